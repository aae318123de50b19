"""``ViewState``: everything a link restores, each setting declared once on its field.

It holds the run's ``AttentionConfig`` (``state.config``) plus what is only about
viewing (the head, the query, the view, colours, presenter mode, language) and the
teaching pages' own settings. Every setting is read and written by its link name
(``state.heads`` is ``state.config.num_heads``, ``state.with_(heads=8)`` changes it);
the URL parser and writer, the CLI's flags, the sidebar and validation all come from
the declarations (``attnviz.settings``).

Bounds that depend on the run (the heads of the chosen model, the tokens of the text)
are not checked here but against the run, by the views (``attnviz.views.selection``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlencode

from attnviz import limits
from attnviz.analysis.examples import DEFAULT_PAIR
from attnviz.analysis.gradients import SCALARS
from attnviz.analysis.longseq import PARTS, PATTERNS
from attnviz.analysis.qkmap import DEFAULT_NORMALISATION, NORMALISATIONS
from attnviz.core.masks import MASK_KINDS
from attnviz.i18n import LANGUAGES, N_, _
from attnviz.inputs.audio import AUDIO_SAMPLES
from attnviz.inputs.graph import GRAPH_MASKS, GRAPH_PRESETS, parse_edges
from attnviz.inputs.image import IMAGE_SAMPLES, PATCH_MASKS
from attnviz.inputs.text import check_text
from attnviz.learn.train import LENGTH, LearnSettings
from attnviz.learn.train import PAGES as LEARN
from attnviz.learn.trained import parse_sequence
from attnviz.models.registry import model_kind
from attnviz.plots.style import COLOR_SCALES
from attnviz.run.config import TEXT_PAGES, AttentionConfig
from attnviz.settings import url as U
from attnviz.settings.spec import Reason, Unavailable, setting
from attnviz.views.catalogue import VIEW_NAMES
from attnviz.views.circuit import CircuitSettings
from attnviz.views.longcontext import LongSettings

CROSS_MASK = "padding"  # cross-attention blocks padded source keys only
IMAGE, AUDIO, GRAPH = ("image-patches",), ("audio-frames",), ("graph-nodes",)
LONG = ("long-sequences",)
QK = ("qk-map",)
PATCH = ("patching", "circuit")  # the prompts and the answer: one pair opens both pages
# The Patching page's example, on the model Watch it learn trains (attnviz.analysis.examples): a block
# repeated, the corrupted prompt swapping the answer with an earlier token. Another model's own pair
# replaces it on the page (attnviz.views.patching.example_for).
CLEAN, CORRUPTED, ANSWER, WRONG = (DEFAULT_PAIR[k] for k in ("clean", "corrupted", "answer", "wrong"))
QK_METHODS = ("pca", "tsne")  # attnviz.analysis.qkmap.METHODS (not imported: it loads torch and numpy only late)
QK_COLORS = ("position", "kind", "sentence")
INPUTS = IMAGE + AUDIO + GRAPH
HEAD_PAGES = ("explorer", "step-by-step", "mask-lab", "cross-attention", "attention-file", "image-patches", "qk-map")
QUERY_PAGES = ("explorer", "step-by-step", "cross-attention", "gradients", "attention-file")
VIEW_PAGES = ("explorer", "attention-file", "image-patches")
# Cross-attention's source, in the interface's language: a Latin-script sentence needs no CJK font.
CROSS_SOURCES = {"en": "Le chat était assis sur le tapis parce qu'il était fatigué.", "zh": "我爱人工智能"}
# A value this machine does not offer gets its own words, not "must be one of".
FALLBACKS = {
    "device": N_("URL parameter device={value} is not available on this machine (available: {choices}); "
                 "running on cpu."),
    "model": N_("URL parameter model={value} is not a model here (available: {choices}); using the random "
                "model."),
    "lang": N_("URL parameter lang={value} is not a language here (available: {choices}); using English."),
}


def _masks(raw: str, taken: dict) -> str:
    kinds = [k.strip() for k in raw.split(",") if k.strip()]
    if [k for k in kinds if k not in MASK_KINDS] or not kinds:
        raise Reason(_("must be a comma-separated list of {kinds}").format(kinds=", ".join(MASK_KINDS)))
    return ",".join(dict.fromkeys(kinds))


def _source(raw: str, taken: dict) -> str:
    return check_text(raw, taken.get("tokenize", AttentionConfig.tokenize_mode))


def _edges(raw: str, taken: dict) -> str:
    if raw.strip():
        parse_edges(raw)  # raises a readable ValueError naming the bad item
    return raw


def _layer_head(word: str):
    """A setting that is ``word`` or a head as layer.head (1.0); the run bounds the numbers."""
    def convert(raw: str, taken: dict) -> str:
        raw = raw.strip().lower()
        if raw != word:
            layer, _dot, head = raw.partition(".")
            if not (layer.isdigit() and head.isdigit()):
                raise Reason(_("must be {word} or layer.head, like 1.0").format(word=word))
        return raw
    return convert


def _sequence(raw: str, taken: dict) -> str:
    parse_sequence(raw, LENGTH)  # raises a readable ValueError
    return raw


def _prompt(raw: str, taken: dict) -> str:
    text = " ".join(raw.split())  # one line: a prompt is one sequence
    if not text:
        raise Reason(_("is empty"))
    if len(text) > limits.MAX_PROMPT_CHARS:
        raise Reason(_("is longer than {n} characters").format(n=f"{limits.MAX_PROMPT_CHARS:,}"))
    return text


def _token_text(raw: str, taken: dict) -> str:
    if len(raw) > limits.MAX_TOKEN_CHARS or "\n" in raw:
        raise Reason(_("must be one token, at most {n} characters").format(n=limits.MAX_TOKEN_CHARS))
    return raw


def _lang(raw: str, taken: dict) -> str:
    if raw not in LANGUAGES:
        raise Unavailable()
    return raw


@dataclass(frozen=True)
class ViewState:
    """Everything a link restores."""

    config: AttentionConfig = AttentionConfig()
    learn: LearnSettings = LearnSettings()  # the "Watch it learn" page's training
    lang: str = setting("en", sidebar=True, convert=_lang, choices=tuple(LANGUAGES), label=N_("Language"),
                        help=N_("The app's own text; Streamlit's widget chrome stays in English."))
    colors: str = setting(COLOR_SCALES[0], sidebar=True, choices=COLOR_SCALES, label=N_("Colour scale"),
                          help=N_("Viridis and Cividis read well for colour-blind viewers and in greyscale."))
    head: int = setting(0, lo=0, hi=limits.MAX_HEADS - 1, pages=HEAD_PAGES, label=N_("Head"),
                        help=N_("Which head to follow."))
    # The followed query token; -1 = the last real token (it sees the most keys).
    query: int = setting(-1, lo=-1, hi=limits.MAX_TOKENS - 1, pages=QUERY_PAGES, label=N_("Query token"),
                         help=N_("Which query token to follow (the last one sees the most keys under a causal "
                                 "mask)."))
    seq: int = setting(0, sidebar=True, lo=0, hi=limits.MAX_LINES - 1, pages=TEXT_PAGES, label=N_("Sentence to show"),
                       help=N_("Which line of the padded batch the views show."))
    q0: int = setting(0, lo=0, hi=limits.MAX_TOKENS - 1, pages=("explorer",), label=N_("From query position"),
                      help=N_("First row of the close-up."))
    k0: int = setting(0, lo=0, hi=limits.MAX_TOKENS - 1, pages=("explorer",), label=N_("From key position"),
                      help=N_("First column of the close-up."))
    generate: int = setting(0, lo=0, hi=limits.MAX_GENERATE, pages=("explorer",), label=N_("Generate tokens"),
                            help=N_("A causal language model writes this many tokens after the sentence, greedily "
                                    "(0: none), each with the attention that chose it."))
    step: int = setting(0, lo=0, hi=limits.MAX_GENERATE - 1, pages=("explorer",), label=N_("Generated token"),
                        help=N_("Which generated token's attention to show."))
    view: str = setting("grid", choices=VIEW_NAMES, pages=VIEW_PAGES, label=N_("View"),
                        help=N_("Which picture of the result to show."))
    present: bool = setting(False, sidebar=True, label=N_("Presenter mode"),
                            help=N_("Large fonts, collapsed sidebar, one view per screen — for a projector."))
    source: str = setting(CROSS_SOURCES["en"], convert=_source, pages=("cross-attention",),
                          follows=lambda v: CROSS_SOURCES.get(v["lang"], CROSS_SOURCES["en"]),
                          label=N_("Source — keys and values (one line, or one per target line)"),
                          help=N_("Several lines form a padded batch; padded source keys are always blocked."))
    masks: str = setting("causal,window,causal+window", convert=_masks, pages=("mask-lab",),
                         label=N_("Masks to compare"), help=N_("Each with the same text, heads and seed."))
    float64: bool = setting(False, pages=("verify",), label=N_("Also check in float64"),
                            help=N_("Runs both implementations in double precision too."))
    grad_of: str = setting("sum", choices=SCALARS, pages=("gradients",), label=N_("Differentiate"),
                           help=N_("Which scalar of the query's output vector autograd differentiates."))
    additive: bool = setting(
        False, pages=("why-scale",), label=N_("Compare with additive attention"),
        help=N_("vᵀ tanh(W_q q + W_k k): tanh bounds the scores, so it does not saturate as d_k grows."))
    # The image/audio/graph pages start from plain similarity (Q = K = V = X): the first
    # thing a class should see on pixels and sound.
    input_projections: bool = setting(
        False, pages=INPUTS, label=N_("Q/K/V projections"),
        help=N_("Off (the default here): Q = K = V = X, so attention is plain similarity of the inputs. On: "
                "seeded projections, as in a Transformer layer."))
    image_sample: str = setting("shapes", choices=IMAGE_SAMPLES, pages=IMAGE, label=N_("Built-in picture"),
                                help=N_("Drawn in code: no download."))
    patch: int = setting(8, lo=2, hi=limits.MAX_PATCH, pages=IMAGE, label=N_("Patch size (px)"),
                       help=N_("Each patch is p × p pixels."))
    stride: int = setting(8, lo=1, hi=limits.MAX_PATCH, pages=IMAGE, label=N_("Stride (px)"),
                        help=N_("Distance between patches; stride < patch overlaps them."))
    patch_mask: str = setting(
        "none", choices=PATCH_MASKS, pages=IMAGE, label=N_("Mask"),
        help=N_("none; causal in raster order (left to right, top to bottom); window2d: patches within k rows and k "
                "columns."))
    patch_k: int = setting(1, lo=0, hi=limits.MAX_PATCH_REACH, pages=IMAGE, label="k (window2d)")
    patch_at: int = setting(-1, lo=-1, hi=limits.MAX_PATCHES - 1, pages=IMAGE, label=N_("Follow patch"))
    audio_sample: str = setting(
        "tone-chirp-tone", choices=AUDIO_SAMPLES, pages=AUDIO, label=N_("Built-in sound"),
        help=N_("Synthesised in code: a tone, a chirp, then the tone again; two alternating tones; clicks."))
    frame: int = setting(256, lo=limits.FRAME_SAMPLES[0], hi=limits.FRAME_SAMPLES[1], pages=AUDIO,
                         label=N_("Frame (samples)"), help=N_("Samples per frame (the STFT's n_fft)."))
    hop: int = setting(128, lo=1, hi=limits.FRAME_SAMPLES[1], pages=AUDIO, label=N_("Hop (samples)"),
                       help=N_("Samples between the starts of two frames."))
    frame_at: int = setting(5, lo=0, hi=limits.MAX_FRAMES - 1, pages=AUDIO, label=N_("Follow frame"))
    graph: str = setting("two-communities", choices=GRAPH_PRESETS, pages=GRAPH, label=N_("Graph"),
                         help=N_("path, star, 3 × 3 grid, or two communities joined by one edge."))
    # A typed edge list wins over the preset when not empty.
    edges: str = setting("", convert=_edges, pages=GRAPH, label=N_("…or type edges"),
                         help=N_("Pairs of node numbers (0 to 63), separated by commas or new lines. Overrides the "
                                 "preset."))
    graph_mask: str = setting("adjacency", choices=GRAPH_MASKS, pages=GRAPH, label=N_("Mask"),
                              help=N_("adjacency + self-loops (graph attention), or none."))
    node: int = setting(0, lo=0, hi=limits.MAX_GRAPH_NODES - 1, pages=GRAPH, label=N_("Follow node"))
    length: int = setting(1024, lo=16, hi=limits.MAX_LONG_TOKENS, pages=LONG, label=N_("Length L (tokens)"),
                          help=N_("The text's first line, repeated to this many tokens."))
    block_q: int = setting(64, lo=1, hi=limits.MAX_BLOCK, pages=LONG, label=N_("Query block"),
                           help=N_("Rows of one tile: the queries computed together."))
    block_k: int = setting(64, lo=1, hi=limits.MAX_BLOCK, pages=LONG, label=N_("Key block"),
                           help=N_("Columns of one tile: the keys one step of the online softmax reads."))
    tile: int = setting(0, lo=0, hi=limits.MAX_LONG_TOKENS - 1, pages=LONG, label=N_("Step (key block)"),
                        help=N_("Which key block of the last query block the walkthrough shows."))
    pattern: str = setting("window", choices=PATTERNS, pages=LONG, label=N_("Sparse pattern"),
                           help=N_("local window; dilated window (every 2nd key, twice as far); the first token "
                                   "global plus a window. The sidebar's window sets the width."))
    rank: int = setting(16, lo=1, hi=limits.MAX_LONG_TOKENS, pages=LONG, label=N_("Rank k"),
                        help=N_("The Linformer projection's rows, and the truncation's rank."))
    part: str = setting("cost", choices=PARTS, pages=LONG, label=N_("Part"),
                        help=N_("Which part's figure a link renders from the command line."))
    checkpoint: int = setting(-1, lo=-1, hi=limits.MAX_LEARN_STEPS // limits.LEARN_EVERY, pages=LEARN,
                              label=N_("Checkpoint"), help=N_("Which checkpoint's attention to show (-1: the latest)."))
    control: bool = setting(True, pages=LEARN, label=N_("Train the one-layer control alongside"),
                            help=N_("The same task with one layer of twice the heads: it cannot form an induction "
                                    "head."))
    knockout: str = setting("none", convert=_layer_head("none"), pages=LEARN, label=N_("Knock out a head"),
                            help=N_("none, or layer.head (for example 1.0): that head's output is set to zero."))
    # A block of 7 tokens seen once, then again up to its 6th: an induction head predicts 25.
    sequence: str = setting("BOS 8 3 17 22 5 9 12 7 20 14 25 30 5 9 12 7 20 14", convert=_sequence, pages=LEARN,
                            label=N_("Your sequence"),
                            help=N_("Token numbers 3–31 (or BOS, MARK, QUERY), separated by spaces."))

    qk_method: str = setting("pca", choices=QK_METHODS, pages=QK, label=N_("Projection"),
                             help=N_("PCA: exact and deterministic. t-SNE: keeps neighbours together (seeded, so the "
                                     "map is stable), slower."))
    qk_norm: str = setting(DEFAULT_NORMALISATION, choices=NORMALISATIONS, pages=QK, label=N_("Normalisation"),
                           help=N_("Before projecting. mips: each key gets one more coordinate so that, for every "
                                   "query, a nearer key has a larger dot product. attentionviz: AttentionViz's "
                                   "scaling and translation (a key of large norm can win from far away)."))
    qk_color: str = setting("position", choices=QK_COLORS, pages=QK, label=N_("Colour by"),
                            help=N_("The token's position in its sentence, its kind (word, punctuation, special) or "
                                    "its sentence."))
    qk_part: str = setting("map", choices=("map", "overview"), pages=QK, label=N_("Show"),
                           help=N_("One head's map, or every head of the layer as small multiples (PCA)."))
    clean: str = setting(CLEAN, convert=_prompt, pages=PATCH, label=N_("Clean prompt"),
                         help=N_("A prompt whose next token the model gets right: the answer."))
    corrupted: str = setting(CORRUPTED, convert=_prompt, pages=PATCH, label=N_("Corrupted prompt"),
                             help=N_("The same number of tokens, one or two changed so that the answer changes."))
    answer: str = setting(ANSWER, convert=_token_text, pages=PATCH, label=N_("Answer"),
                          help=N_("One token, as the model's tokenizer spells it (GPT-2: ĠParis for “ Paris”)."))
    wrong: str = setting(WRONG, convert=_token_text, pages=PATCH, label=N_("Wrong token"),
                         help=N_("The corrupted prompt's answer. Empty: the metric is the answer's log-probability."))
    patched: str = setting("best", convert=_layer_head("best"), pages=("patching",), label=N_("Chosen head"),
                           help=N_("best (the head that brings back the most of the answer), or layer.head, for "
                                   "example 1.0. A click on a head of the heatmap picks it."))
    long: LongSettings = LongSettings()  # the Long context page's text, blocks, policy, evicted fraction and head
    circuit: CircuitSettings = CircuitSettings()  # the Circuit page's threshold, composition, edge and cell

    def __getattr__(self, name: str):
        """A run setting by its link name: ``state.heads`` is ``state.config.num_heads``."""
        entry = U.table(ViewState).get(name) if not name.startswith("_") else None
        if entry is None:
            raise AttributeError(name)
        return U.get(self, entry)

    @classmethod
    def of(cls, **values) -> ViewState:
        """A state from settings by link name: ``ViewState.of(heads=8, mask="none")``."""
        return U.set_values(cls(), values)

    def with_(self, **changes) -> ViewState:
        return U.set_values(self, changes)

    def cross_config(self) -> AttentionConfig:
        """Queries from ``text``, keys and values from ``source``. Causal and window masks
        compare positions of one sequence, so between two sequences only the source's
        padding is blocked (as in a Transformer's cross-attention). An encoder–decoder
        shows its own cross-attention; any other model leaves the page to the random one."""
        if model_kind(self.model) == "seq2seq":
            return self.config.with_(mask=CROSS_MASK, source=self.source, stack="cross")
        return self.config.with_(mask=CROSS_MASK, source=self.source, model="random", layer=0)

    def values(self) -> dict[str, object]:
        """Every setting by link name, as a value (not text)."""
        return {url: U.get(self, e) for url, e in U.table(ViewState).items()}

    def to_query(self) -> dict[str, str]:
        return U.to_query(self)

    def query_string(self, page: str | None = None) -> str:
        """The link's query: every setting, or (``page``) only those ``page`` reads that differ from
        their defaults (``link_query``)."""
        return urlencode(self.to_query() if page is None else link_query(self, page))


SETTINGS = U.table(ViewState)  # {link name: Entry}: the one table every door reads
NAMES = tuple(SETTINGS)
DEFAULTS = ViewState()
ParamWarning = U.ParamWarning
query_dict = U.query_dict


def reads(page: str) -> frozenset[str]:
    """The settings ``page`` reads, by link name: its sidebar draws these, and its link writes those
    of them that differ from their defaults."""
    return _READS.get(page) or _READS.setdefault(page, frozenset(
        k for k, e in SETTINGS.items() if "*" in e.spec.pages or page in e.spec.pages))


_READS: dict[str, frozenset[str]] = {}


def default_of(name: str, values: Mapping[str, object]):
    """The default of setting ``name`` where the others hold ``values`` (a language's example sentence)."""
    e = SETTINGS[name]
    return e.spec.default_for(e.default, values)


def link_query(state: ViewState, page: str) -> dict[str, str]:
    """The settings ``page`` reads that differ from their defaults, as the URL carries them: a link
    that reopens this view and nothing else (the default page's is empty)."""
    values = state.values()
    return {k: U.as_text(values[k]) for k in SETTINGS if k in reads(page) and values[k] != default_of(k, values)}


def parse(params: Mapping) -> tuple[ViewState, list[ParamWarning]]:
    """Query parameters -> (ViewState, warnings). Never raises on bad input.

    Missing parameters take their defaults silently; invalid ones take their defaults
    with a warning naming the parameter and the reason.
    """
    state, warnings = U.parse(ViewState, params, FALLBACKS)
    given = U.flatten(params)
    for k, e in SETTINGS.items():  # a default that follows other settings (a language's sentence)
        if e.spec.follows is not None and (k not in given or any(w.name == k for w in warnings)):
            state = state.with_(**{k: e.spec.follows(state.values())})
    # A heads value that fit the default d_model but not the link's own d_model.
    if "heads" not in U.flatten(params) or any(w.name == "heads" for w in warnings):
        if state.d_model % state.heads:
            state = state.with_(heads=limits.fit_heads(state.d_model, DEFAULTS.heads))
    return state, warnings


def parse_url(url_or_query: str) -> tuple[ViewState, list[ParamWarning]]:
    return parse(query_dict(url_or_query))
