"""The view state shared by the app's URL and the CLI's ``--from-url``.

Every control of the app has a query-string name. This module is the one place
that parses those strings (they always arrive as text), validates them, and writes
them back, so a link opened in the browser and a ``render --from-url`` build show
the same thing. Invalid or missing values fall back to their defaults, and each
fallback or clamp is reported as a warning that names the parameter. Bounds come
from ``attnviz.limits``, like everywhere else.

Warnings are plain text that quotes the user's value as it came: whoever shows one
in Markdown must escape it (``ui.safe.md``), or a value such as
``[Sign in](https://…)`` becomes a link.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace
from urllib.parse import parse_qsl, urlencode, urlsplit

from . import limits
from .devices import device_names
from .figures import COLOR_SCALES
from .i18n import _
from .limits import (
    D_MODELS,
    MAX_DROPOUT,
    MAX_HEADS,
    MAX_LINES,
    MAX_SEED,
    MAX_TEXT_CHARS,
    MAX_TOKENS,
    MAX_WINDOW,
    head_choices,
)
from .masks import MASK_KINDS
from .pipeline import DEFAULT_TEXT, AttentionConfig
from .tokens import MODES, tokenize

VIEWS = ("grid", "head", "query", "mean", "mask", "output", "table", "model", "analysis")
CROSS_MASK = "padding"  # cross-attention blocks padded source keys only
GRAD_SCALARS = ("sum", "norm", "dim0")


class ParamWarning(str):
    """A warning's text, plus ``name``: the parameter it is about."""

    name: str

    def __new__(cls, name: str, text: str) -> ParamWarning:
        obj = super().__new__(cls, text)
        obj.name = name
        return obj


@dataclass(frozen=True)
class ViewState:
    """Everything a link restores. Field names are the query-string names."""

    text: str = DEFAULT_TEXT
    heads: int = 4
    d_model: int = 64
    mask: str = "causal"
    window: int = 2
    pad_to: int = 0
    device: str = "cpu"
    seed: int = 0
    positional: bool = True
    tokenize: str = "auto"
    dropout: float = 0.0
    colors: str = COLOR_SCALES[0]
    head: int = 0
    query: int = -1  # the followed query token; -1 = the last real token (it sees the most keys)
    seq: int = 0
    q0: int = 0  # a long text's close-up: first query position
    k0: int = 0  # ... and first key position
    view: str = "grid"
    present: bool = False
    source: str = "我爱人工智能"  # the cross-attention page's keys/values
    masks: str = "causal,window,causal+window"  # the mask lab's comparison, comma-separated
    float64: bool = False  # the verification page's extra float64 check
    grad_of: str = "sum"  # the gradient page's scalar of the query's output
    additive: bool = False  # the √d_k page's comparison with additive attention
    model: str = "random"  # "random" or a pretrained encoder ("minilm-l6", "local")
    layer: int = 0  # a pretrained model's layer
    projections: bool = True  # False: Q = K = V = X, attention as plain similarity
    # The image/audio/graph pages start from plain similarity (Q = K = V = X): the first
    # thing a class should see on pixels and sound.
    input_projections: bool = False
    image_sample: str = "shapes"  # the image-patches page (an upload is not in the link)
    patch: int = 8
    stride: int = 8
    patch_mask: str = "none"
    patch_k: int = 1
    patch_at: int = -1  # the followed patch; -1 = the one in the middle
    audio_sample: str = "tone-chirp-tone"  # the audio-frames page
    frame: int = 256
    hop: int = 128
    frame_at: int = 5
    graph: str = "two-communities"  # the graph-nodes page: a preset ...
    edges: str = ""  # ... or a typed edge list, which wins when not empty
    graph_mask: str = "adjacency"
    node: int = 0
    lang: str = "en"  # "en" or "zh"

    def config(self, *, cross: bool = False) -> AttentionConfig:
        """The computation these settings describe (view-only fields excluded).

        ``cross``: queries from ``text``, keys and values from ``source``. Causal and
        window masks compare positions of one sequence, so between two sequences only
        the source's padding is blocked (as in a Transformer's cross-attention).
        """
        return AttentionConfig(
            text=self.text, num_heads=self.heads, d_model=self.d_model,
            mask=CROSS_MASK if cross else self.mask,
            window=self.window, pad_to=self.pad_to, device=self.device, seed=self.seed,
            dropout=self.dropout, positional=self.positional, tokenize_mode=self.tokenize,
            source=self.source if cross else "",
            model="random" if cross else self.model, layer=0 if cross else self.layer,
            projections=self.projections,
        )  # fmt: skip

    def with_(self, **changes) -> ViewState:
        return replace(self, **changes)

    def to_query(self) -> dict[str, str]:
        """Every field as the string the URL carries (booleans as 1/0)."""
        out = {}
        for k, v in asdict(self).items():
            out[k] = ("1" if v else "0") if isinstance(v, bool) else str(v)
        return out

    def query_string(self) -> str:
        return urlencode(self.to_query())


DEFAULTS = ViewState()
NAMES = tuple(f.name for f in fields(ViewState))


class _Reason(ValueError):
    """Why a value was not taken, already worded for the warning."""


def _as_int(raw: str, lo: int, hi: int) -> int:
    v = int(raw.strip())
    if not lo <= v <= hi:
        raise _Reason(_("must be between {lo} and {hi}").format(lo=lo, hi=hi))
    return v


def _as_bool(raw: str) -> bool:
    s = raw.strip().lower()
    if s in ("1", "true", "yes", "on"):
        return True
    if s in ("0", "false", "no", "off", ""):
        return False
    raise _Reason(_("must be 1 or 0"))


def _as_choice(raw: str, choices) -> str:
    if raw not in choices:
        raise _Reason(_("must be one of {choices}").format(choices=", ".join(map(str, choices))))
    return raw


def _as_float(raw: str, lo: float, hi: float) -> float:
    v = float(raw)
    if not lo <= v <= hi:  # also rejects nan
        raise _Reason(_("must be between {lo} and {hi}").format(lo=lo, hi=hi))
    return v


def _as_text(raw: str, mode: str) -> str:
    if len(raw) > MAX_TEXT_CHARS:
        raise _Reason(_("is longer than {n} characters").format(n=f"{MAX_TEXT_CHARS:,}"))
    text = raw.replace("\r\n", "\n")
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines:
        raise _Reason(_("is empty"))
    if len(lines) > MAX_LINES:
        raise _Reason(_("has {n} lines; the limit is {limit}").format(n=len(lines), limit=MAX_LINES))
    for ln in lines:
        tokenize(ln, mode)  # raises a readable ValueError over the cap
    return text


def _as_masks(raw: str) -> str:
    kinds = [k.strip() for k in raw.split(",") if k.strip()]
    bad = [k for k in kinds if k not in MASK_KINDS]
    if bad or not kinds:
        raise _Reason(_("must be a comma-separated list of {kinds}").format(kinds=", ".join(MASK_KINDS)))
    return ",".join(dict.fromkeys(kinds))


def _flatten(params: Mapping) -> dict[str, str]:
    """Streamlit's query params and parse_qs give str or list[str]: take the last."""
    out = {}
    for k, v in params.items():
        if isinstance(v, (list, tuple)):
            if not v:
                continue
            v = v[-1]
        out[str(k)] = str(v)
    return out


def _shown(raw: str) -> str:
    """The user's value, quoted and cut short, for a message (never interpreted)."""
    raw = raw if len(raw) <= 40 else raw[:37] + "..."
    return '"' + raw.replace("\n", " ") + '"'


def parse(params: Mapping, *, devices: list[str] | None = None,
          models: list[str] | None = None) -> tuple[ViewState, list[ParamWarning]]:
    """Query parameters -> (ViewState, warnings). Never raises on bad input.

    Missing parameters take their defaults silently; invalid ones take their
    defaults with a warning naming the parameter and the reason.
    """
    p = _flatten(params)
    devices = device_names() if devices is None else devices
    warnings: list[ParamWarning] = []
    values: dict = {}

    def warn(name: str, text: str) -> None:
        warnings.append(ParamWarning(name, text))

    def take(name, convert):
        if name not in p:
            return
        try:
            values[name] = convert(p[name])
        except (ValueError, TypeError, OverflowError) as e:
            default = str(getattr(DEFAULTS, name)).replace("\n", " ") or "none"
            warn(name, _("URL parameter {name}={value} {reason}; using the default ({default}).").format(
                name=name, value=_shown(p[name]), reason=_reason(e), default=f"{default:.40}"))

    take("tokenize", lambda r: _as_choice(r, MODES))
    take("text", lambda r: _as_text(r, values.get("tokenize", DEFAULTS.tokenize)))
    take("source", lambda r: _as_text(r, values.get("tokenize", DEFAULTS.tokenize)))
    take("d_model", lambda r: _as_choice(str(int(r)), [str(d) for d in D_MODELS]) and int(r))
    d_model = values.get("d_model", DEFAULTS.d_model)
    take("heads", lambda r: _heads(r, d_model))
    take("mask", lambda r: _as_choice(r, MASK_KINDS))
    take("window", lambda r: _as_int(r, 0, MAX_WINDOW))
    take("pad_to", lambda r: _as_int(r, 0, MAX_TOKENS))
    take("seed", lambda r: _as_int(r, 0, MAX_SEED))
    take("positional", _as_bool)
    take("dropout", lambda r: _as_float(r, 0.0, MAX_DROPOUT))
    take("colors", lambda r: _as_choice(r, COLOR_SCALES))
    take("head", lambda r: _as_int(r, 0, MAX_HEADS - 1))
    take("query", lambda r: _as_int(r, -1, MAX_TOKENS - 1))
    take("seq", lambda r: _as_int(r, 0, MAX_LINES - 1))
    take("q0", lambda r: _as_int(r, 0, MAX_TOKENS - 1))
    take("k0", lambda r: _as_int(r, 0, MAX_TOKENS - 1))
    take("view", lambda r: _as_choice(r, VIEWS))
    take("present", _as_bool)
    take("masks", _as_masks)
    take("float64", _as_bool)
    take("grad_of", lambda r: _as_choice(r, GRAD_SCALARS))
    take("additive", _as_bool)
    take("layer", lambda r: _as_int(r, 0, 63))
    take("projections", _as_bool)
    take("input_projections", _as_bool)
    if "lang" in p:
        from .i18n import LANGUAGES

        if p["lang"] in LANGUAGES:
            values["lang"] = p["lang"]
        else:
            warn("lang", _("URL parameter lang={value} is not a language here (available: {langs}); using English.")
                 .format(value=_shown(p["lang"][:20]), langs=", ".join(LANGUAGES)))
    from .inputs import AUDIO_SAMPLES, GRAPH_MASKS, GRAPH_PRESETS, IMAGE_SAMPLES, PATCH_MASKS, parse_edges

    take("image_sample", lambda r: _as_choice(r, IMAGE_SAMPLES))
    take("patch", lambda r: _as_int(r, 2, 128))
    take("stride", lambda r: _as_int(r, 1, 128))
    take("patch_mask", lambda r: _as_choice(r, PATCH_MASKS))
    take("patch_k", lambda r: _as_int(r, 0, 32))
    take("patch_at", lambda r: _as_int(r, -1, limits.MAX_PATCHES - 1))
    take("audio_sample", lambda r: _as_choice(r, AUDIO_SAMPLES))
    take("frame", lambda r: _as_int(r, 16, 8192))
    take("hop", lambda r: _as_int(r, 1, 8192))
    take("frame_at", lambda r: _as_int(r, 0, limits.MAX_FRAMES - 1))
    take("graph", lambda r: _as_choice(r, GRAPH_PRESETS))
    take("edges", lambda r: r if not r.strip() else (parse_edges(r) and r))
    take("graph_mask", lambda r: _as_choice(r, GRAPH_MASKS))
    take("node", lambda r: _as_int(r, 0, limits.MAX_GRAPH_NODES - 1))
    if "model" in p:
        from .models import INSTALL, MINILM, available_models

        models = available_models() if models is None else models
        if p["model"] in models:
            values["model"] = p["model"]
        elif p["model"] == MINILM:
            warn("model", _("URL parameter model={value} is not installed on this server ({install}); using the "
                            "random model.").format(value=_shown(p["model"]), install=INSTALL))
        else:
            warn("model", _("URL parameter model={value} is not a model here (available: {models}); using the "
                            "random model.").format(value=_shown(p["model"]), models=", ".join(models)))
    if "device" in p:
        dev = p["device"].strip().lower()
        dev = "cuda:0" if dev == "cuda" else dev
        if dev in devices:
            values["device"] = dev
        else:
            warn("device", _("URL parameter device={value} is not available on this machine (available: {devices}); "
                             "running on cpu.").format(value=_shown(p["device"][:20]), devices=", ".join(devices)))
    # A heads value that fit the default d_model but not the URL's own d_model.
    if "heads" not in values and d_model % DEFAULTS.heads:
        values["heads"] = max(h for h in head_choices(d_model) if h <= DEFAULTS.heads)
    state = replace(DEFAULTS, **values)
    if state.head >= state.heads:
        warn("head", _("URL parameter head={value} is past the last head ({last}); showing head 0.").format(
            value=state.head, last=state.heads - 1))
        state = replace(state, head=0)
    return state, warnings


def _heads(raw: str, d_model: int) -> int:
    h = int(raw)
    if not 1 <= h <= MAX_HEADS:
        raise _Reason(_("must be between {lo} and {hi}").format(lo=1, hi=MAX_HEADS))
    if d_model % h:
        raise _Reason(_("does not divide d_model={d} (choose one of {choices})").format(
            d=d_model, choices=", ".join(map(str, head_choices(d_model)))))
    return h


def _reason(e: Exception) -> str:
    if isinstance(e, _Reason):
        return str(e)
    msg = str(e)
    if msg.startswith(("invalid literal", "could not convert", "Exceeds the limit")) or isinstance(e, OverflowError):
        return _("is not a number")
    msg = msg.rstrip(".")
    return _("is invalid: {reason}").format(reason=msg if len(msg) <= 200 else msg[:197] + "...")


def query_dict(url_or_query: str) -> dict[str, str]:
    """A full URL or a bare query string (with or without a leading ``?``) -> its parameters."""
    s = url_or_query.strip()
    query = urlsplit(s).query if "://" in s or s.startswith("/") else s.lstrip("?")
    return dict(parse_qsl(query, keep_blank_values=True))


def parse_url(url_or_query: str, **kw) -> tuple[ViewState, list[str]]:
    return parse(query_dict(url_or_query), **kw)
