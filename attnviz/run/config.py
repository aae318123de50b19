"""``AttentionConfig``: every setting of a text run, each declared once on its field.

The declarations (link name, bounds or choices, label, help, pages) are read by the URL
parser and writer, the CLI's flags, the sidebar and ``validate``: see
``attnviz.settings.spec``. Bounds come from ``attnviz.limits``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from attnviz import limits
from attnviz.core.devices import device_names
from attnviz.core.masks import MASK_KINDS
from attnviz.core.multihead import MultiHeadAttention
from attnviz.i18n import N_, _
from attnviz.inputs.text import DEFAULT_TEXT, check_text
from attnviz.inputs.tokens import MODES
from attnviz.models.door import available as available_models
from attnviz.models.hf import STACKS
from attnviz.models.packaged import INSTALL, MINILM, SMOL_INSTALL, SMOLLM2
from attnviz.settings.spec import BY_ENTRY, Reason, Unavailable, setting, validate

# The settings here are shared: the pages that read each one say so in their entries
# (``attnviz.views.catalogue.Page.reads``); the sidebar draws a setting only on a page that reads it, and a
# link writes only those (``attnviz.views.state.reads``).
RANDOM_ONLY = N_("(the random model only)")


def heads_fit(d_model: int, heads: int) -> None:
    """Each head gets d_model / heads features: ``Reason`` unless ``heads`` divides ``d_model``
    (the rule itself is ``MultiHeadAttention.check_heads``)."""
    try:
        MultiHeadAttention.check_heads(d_model, heads)
    except ValueError:
        raise Reason(_("does not divide d_model={d} (choose one of {choices})").format(
            d=d_model, choices=", ".join(map(str, limits.head_choices(d_model))))) from None


def _heads(raw: str, taken: dict) -> int:
    h = int(raw)
    if 1 <= h <= limits.MAX_HEADS:
        heads_fit(taken.get("d_model", AttentionConfig.d_model), h)
    return h


def _text(raw: str, taken: dict) -> str:
    return check_text(raw, taken.get("tokenize", AttentionConfig.tokenize_mode))


def _device(raw: str, taken: dict) -> str:
    dev = raw.strip().lower()
    dev = "cuda:0" if dev == "cuda" else dev
    if dev not in device_names():
        raise Unavailable()
    return dev


def _model(raw: str, taken: dict) -> str:
    if raw not in available_models():
        if raw in (MINILM, SMOLLM2):
            raise Reason(_("is not installed on this server ({install})").format(
                install=INSTALL if raw == MINILM else SMOL_INSTALL))
        raise Unavailable()
    return raw


def _devices() -> tuple:
    return tuple(device_names())


def _models() -> tuple:
    return tuple(available_models())


@dataclass(frozen=True)
class AttentionConfig:
    """Every setting of a run, as plain values (hashable, so caches can key on it).

    ``text`` holds one sentence per line; several lines form a padded batch.
    ``source``, when not empty, makes it cross-attention: queries come from
    ``text``, keys and values from ``source`` (one line per line of ``text``).
    """

    tokenize_mode: str = setting(
        "auto", sidebar=True, url="tokenize", choices=MODES, pages=BY_ENTRY, label=N_("Tokens"),
        help=N_("auto: words, and one token per CJK character; word; char."))
    text: str = setting(
        DEFAULT_TEXT, sidebar=True, convert=_text, pages=BY_ENTRY,
        label=N_("Text — one sentence per line"),
        help=N_("Several lines (up to {lines}) form a padded batch. Up to {tokens} tokens per line."))
    model: str = setting(
        "random", sidebar=True, convert=_model, choices=_models, pages=BY_ENTRY, label=N_("Model"),
        help=N_("random layer: one layer of seeded weights over tokenizer-free tokens. A pretrained model reads "
                "WordPiece tokens through all its layers, offline. watch-it-learn: the tiny attention-only model "
                "the Watch it learn page trains."))
    stack: str = setting(
        "encoder", sidebar=True, choices=STACKS, pages=BY_ENTRY, label=N_("Attention"),
        help=N_("An encoder–decoder model (T5, BART) has three: the encoder's self-attention, the decoder's causal "
                "self-attention, and cross-attention (decoder tokens over the encoder's). The encoder reads the "
                "Cross-attention page's source, or else the text; the decoder reads the text."))
    layer: int = setting(0, sidebar=True, lo=0, hi=limits.MAX_LAYERS - 1, pages=BY_ENTRY, label=N_("Layer"),
                         help=N_("Which layer's attention the views show."))
    d_model: int = setting(64, sidebar=True, choices=limits.D_MODELS, pages=BY_ENTRY, label="d_model",
                           help=N_("Width E of the embeddings and of the output."))
    num_heads: int = setting(4, sidebar=True, url="heads", lo=1, hi=limits.MAX_HEADS, convert=_heads,
                             pages=BY_ENTRY, label=N_("Heads"),
                             help=N_("Only counts that divide d_model: each head gets d_model / heads features."))
    mask: str = setting(
        "causal", sidebar=True, choices=MASK_KINDS, pages=BY_ENTRY, label=N_("Mask"),
        help=N_("causal: no looking ahead; padding: pads are never keys; window: |i−j| ≤ w. Every mask but 'none' "
                "also blocks [PAD] keys."))
    window: int = setting(2, sidebar=True, lo=0, hi=limits.MAX_WINDOW, pages=BY_ENTRY,
                          label=N_("Window"),
                          help=N_("Local window: query i sees keys j with |i − j| ≤ window."))
    pad_to: int = setting(0, sidebar=True, lo=0, hi=limits.MAX_TOKENS, pages=BY_ENTRY, label=N_("Pad to"),
                          help=N_("Pad every sentence to at least this many tokens with [PAD]."))
    device: str = setting("cpu", sidebar=True, convert=_device, choices=_devices, pages=BY_ENTRY,
                          label=N_("Device"),
                          help=N_("Where the computation runs. Only devices found on this machine."))
    seed: int = setting(0, sidebar=True, lo=0, hi=limits.MAX_SEED, pages=BY_ENTRY,
                        label=N_("Seed"),
                        help=N_("Seeds the projection weights and dropout: same seed, same numbers."))
    dropout: float = setting(0.0, sidebar=True, lo=0.0, hi=limits.MAX_DROPOUT, pages=BY_ENTRY, label=N_("Dropout p"),
                             help=N_("Dropout on the weights (off by default); seeded, so reproducible."))
    positional: bool = setting(True, sidebar=True, pages=BY_ENTRY, label=N_("Positional encoding"),
                               help=N_("Add sinusoidal position vectors to the token embeddings."))
    projections: bool = setting(
        True, sidebar=True, pages=BY_ENTRY, label=N_("Q/K/V projections"),
        help=N_("Off: Q = K = V = X, no learned projections, so attention is plain similarity of the inputs."))
    source: str = ""  # cross-attention's keys/values (the page's own setting fills it)
    max_tokens: int = limits.MAX_TOKENS

    def validate(self) -> None:
        """Raise ``ValueError`` with a message a user can act on (bounds: ``attnviz.limits``)."""
        for what, text in (("text", self.text), ("source text", self.source)):
            if len(text) > limits.MAX_TEXT_CHARS:
                raise ValueError(f"The {what} has {len(text):,} characters; the limit is {limits.MAX_TEXT_CHARS:,}.")
        if not 1 <= self.max_tokens <= limits.MAX_TOKENS:
            raise ValueError(f"max_tokens must be between 1 and {limits.MAX_TOKENS}, got {self.max_tokens}.")
        if not isinstance(self.model, str) or not self.model.strip():
            raise ValueError("The model must be 'random', a model name or a model folder.")
        # Every declared bound, but not the lists of this machine (devices, models): the
        # run resolves those with a message that names what exists.
        validate(self, skip=("text", "device", "model"))
        MultiHeadAttention.check_heads(self.d_model, self.num_heads)
        if self.pad_to > self.max_tokens:
            raise ValueError(f"pad_to must be between 0 and the token cap {self.max_tokens}, got {self.pad_to}.")

    def with_(self, **changes) -> AttentionConfig:
        return replace(self, **changes)
