"""Inputs: everything that becomes the tokens of attention, as one ``Input`` record each.

text (tokenizer-free tokens and embeddings), image patches, audio frames, graph nodes, the
Q/K map's corpus of sentences (corpus), and attention weights computed elsewhere (attention:
``normalise`` reads every array and object the field hands over into one ``Attention``; attention_file:
the file format ``save_attention`` writes and ``load_attention`` reads, never pickle).
May import: attnviz.core, attnviz.settings.spec, attnviz.limits, attnviz.i18n, attnviz.atomic,
attnviz.cache (the tables a run looks up, kept in its ``lookups`` share). Never a model, a run or a view.
"""

from attnviz.inputs.audio import AUDIO_SAMPLES, audio_input, frame_count, read_wav, sample_audio, spectrogram
from attnviz.inputs.graph import GRAPH_MASKS, GRAPH_PRESETS, adjacency, graph_input, parse_edges, preset_edges
from attnviz.inputs.image import (
    IMAGE_SAMPLES,
    PATCH_MASKS,
    image_input,
    image_patches,
    patch_mask,
    patches_like_the_tutorial,
    positions_2d,
    read_image,
    sample_image,
)
from attnviz.inputs.record import PAD, Input, single

__all__ = ["AUDIO_SAMPLES", "GRAPH_MASKS", "GRAPH_PRESETS", "IMAGE_SAMPLES", "PAD", "PATCH_MASKS", "Input",
           "adjacency", "audio_input", "frame_count", "graph_input", "image_input", "image_patches", "parse_edges",
           "patch_mask", "patches_like_the_tutorial", "positions_2d", "preset_edges", "read_image", "read_wav",
           "sample_audio", "sample_image", "single", "spectrogram"]
