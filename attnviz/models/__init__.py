"""Models: what turns an ``Input`` into per-layer attention (``base.Model``).

``random`` (one seeded layer), ``bert`` (a BERT-family encoder run with attnviz's own
attention), ``hf`` (any Hugging Face folder on transformers: decoders, encoders,
encoder–decoders, vision transformers), ``hooks`` (forward hooks on a transformers model's
attention projections: the followed layer's values, W_O, q and k, and a head knocked out),
``positions`` (what an attention module adds after those projections: rotary q and k, a
position bias),
``vision`` (an image as a ViT's input),
``generate`` (greedy generation with each token's attention), ``given`` (weights from a
file), ``tiny`` (the attention-only model of "Watch it learn") and ``registry`` (which
models exist here, loading each once per process in the background, within the
loaded-models bound: one ``attnviz.cache`` of them, each load an ``attnviz.jobs`` job), ``gguf`` (a GGUF
file's header checked, then de-quantized once into the model cache) and ``door`` (one door for every
model: ``attnviz.models.open(name)`` gives a handle with the model's capabilities, identity and load,
whatever its kind).

May import: attnviz.cache, attnviz.core, attnviz.i18n, attnviz.inputs, attnviz.jobs, attnviz.limits.
"""

from attnviz.models.door import Cap, Handle, Kind, open, register  # noqa: E402, A004 - the door, as attnviz.models.open

__all__ = ["Cap", "Handle", "Kind", "open", "register"]
