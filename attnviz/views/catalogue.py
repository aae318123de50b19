"""The one table of pages and of views: ``app.py`` builds its navigation from ``PAGES``, the CLI
takes ``--page`` and ``--view`` from them, a link's path names a page, its ``view=`` a view.

Each view is one entry of ``VIEWS``, read by every page, the CLI and links. The entry says

- what it draws, in order (``parts``: captions, figures, tables, the close-up of a long text),
  and its ``figure``: the one the CLI renders for ``--view`` and the JSON describes;
- what it needs (``needs``, one of ``NEEDS``: the weights only, the run's every step, the
  followed layer's values and W_O or its q and k, a rerun on the roles probe, or two runs);
- the selection it reads (``picks``: the head, the query), which a page draws widgets for and
  which names its figures in the caches;
- the message it gives where it cannot apply (``problem``), its text alternative
  (``describe``) and the numbers the JSON export adds (``record``);
- the pages that offer it (``pages``).

A page keeps only its layout: it draws the entry (``ui.rendering``); the CLI renders its figure. A new
view is one entry here plus its functions (in the module named by what it draws).

May import: what the views' functions need (``attnviz.views``' own modules below it), ``i18n``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

from attnviz.i18n import N_
from attnviz.models.door import Cap, available
from attnviz.models.door import open as open_model
from attnviz.views import contributions as C
from attnviz.views import layers as Y
from attnviz.views import neurons as U
from attnviz.views import patching as P
from attnviz.views import roles as R
from attnviz.views import weights as W
from attnviz.views.selection import style_for

ATTENTION, BEYOND, LONG, CIRCUITS = N_("Attention"), N_("Beyond text"), N_("Long inputs"), N_("Circuits")


@dataclass(frozen=True)
class Page:
    path: str  # the URL path ("" for the explorer, the default page)
    name: str  # the page's name in links and in ``--page``
    script: str  # its file under app_pages/
    title: str  # marked for translation
    icon: str  # a Material icon name
    menu: str = ATTENTION  # the navigation's menu that lists it (marked for translation)
    text: bool = True  # uses the sidebar's text and text-only controls
    input: str = ""  # the input it runs instead of a text: "image", "audio" or "graph" (attnviz.views.modality)
    file: str = ""  # the file it reads, by the CLI's flag and a spec's key ("image": --image FILE, image = "…")
    window: bool = False  # reads the sidebar's window whatever its mask (Mask lab's masks, Long sequences' patterns)
    random: bool = True  # runs the random layer's width, heads and mask (not: weights from a file, a trained model)
    # What a model must be able to do for it to run (``attnviz.models.door.Cap``): its sidebar offers those models
    # only, and the kind of each other model says why not. Cap.RUNS: any model that runs the page's own input.
    needs: frozenset = frozenset({Cap.RUNS})
    # What its lesson is best seen on: where a model that also holds these is offered, the page offers only those
    # (Long context reads a language model's cache and its next token; the random layer, which has neither,
    # is its fallback where no language model is offered).
    prefers: frozenset = frozenset()
    # What the model a visit opens on holds, where an offered model does (the Q/K map: a language model's queries
    # and keys); unlike ``prefers``, every model that runs the page stays offered, and the others are chosen.
    opens_on: frozenset = frozenset()
    stack: str | None = None  # the attention of an encoder–decoder it always shows ("cross"); None: the sidebar's
    # Its module of the library (attnviz.views.<module>): its own settings, its run, its figure for the CLI
    # (``main_figure``; a module of several pages names each one's) and, where its
    # numbers are its own rather than a run's, ``numbers``.
    module: str = ""
    figure: str = "main_figure"
    command: str = ""  # a command of its own instead of ``render --page`` (a training)
    # The shared settings it reads, by link name (its own are declared for it in its module): its sidebar
    # draws these, its link writes them (``attnviz.views.state.reads``). The one place that says who reads what.
    reads: tuple[str, ...] = ()
    # Its own settings: (the field of ViewState that holds them, the settings class's name in its module), so
    # that the state is composed from this table (``page_settings``) and imports no page.
    settings: tuple[tuple[str, str], ...] = ()
    # Settings declared for every page that this one has no use for (Why √d_k draws no colour scale): its
    # sidebar does not draw them, its link does not carry them.
    ignores: tuple[str, ...] = ()

    @property
    def reads_residual(self) -> bool:
        """It patches or reads a language model's residual stream (every layer: no one layer to follow)."""
        return bool(self.needs & {Cap.PATCHABLE, Cap.UNEMBEDDING})


# Groups of shared settings, by link name, for the entries below.
RANDOM = ("d_model", "heads", "seed")  # the random layer
EMBED = ("tokenize", "pad_to", "dropout", "positional", "projections")  # how a text is embedded
MASK = ("mask", "window")
MODEL = ("model", "layer", "device")  # a model and the layer followed
TEXT_RUN = ("text", "seq", "stack", *MODEL, *RANDOM, *EMBED)  # a run of the sidebar's text (and its mask: MASK)
INPUT_RUN = ("device", *RANDOM, "input_projections")  # the random layer over an image, a sound or a graph
PAIR = ("clean", "corrupted", "answer", "wrong")  # two prompts and the answer: one pair opens Patching and Circuit


PATCHES, UNEMBEDS = frozenset({Cap.PATCHABLE}), frozenset({Cap.UNEMBEDDING})


def without(group: tuple[str, ...], *names: str) -> tuple[str, ...]:
    """``group`` less ``names``: a page that reads a group but for a setting it has no use for."""
    return tuple(k for k in group if k not in names)


PAGES = (
    Page("", "explorer", "explorer.py", N_("Explorer"), "search", module="explorer",
         reads=(*TEXT_RUN, *MASK, "head", "query", "view"), settings=(("explorer", "Settings"),)),
    Page("step-by-step", "step-by-step", "step_by_step.py", N_("Step by step"), "stairs", module="stepbystep",
         reads=(*TEXT_RUN, *MASK, "head", "query"), settings=(("step_by_step", "Settings"),)),
    # Mask lab compares masks of its own ("masks"), before dropout: it reads the window, not the sidebar's mask
    # or dropout.
    Page("mask-lab", "mask-lab", "mask_lab.py", N_("Mask lab"), "grid_on", window=True, module="masklab",
         reads=(*without(TEXT_RUN, "dropout"), "window", "head"), settings=(("mask_lab", "Settings"),)),
    Page("cross-attention", "cross-attention", "cross_attention.py", N_("Cross-attention"), "swap_horiz",
         stack="cross", module="cross", reads=(*TEXT_RUN, "head", "query"),  # padding only: no MASK
         settings=(("cross_attention", "Settings"),)),
    Page("verify", "verify", "verify.py", N_("Verify against PyTorch"), "verified", module="verify",
         reads=(*TEXT_RUN, *MASK), settings=(("verify", "Settings"),)),
    Page("gradients", "gradients", "gradients.py", N_("Gradients"), "trending_down", module="gradients",
         reads=(*without(TEXT_RUN, "dropout"), *MASK, "query"),  # a gradient runs without dropout
         settings=(("gradients", "Settings"),)),
    Page("why-scale", "why-scale", "why_scale.py", N_("Why scale by √d_k"), "straighten", module="whyscale",
         reads=("seed",), settings=(("why_scale", "Settings"),), ignores=("colors",)),  # line charts only
    Page("image-patches", "image-patches", "image_patches.py", N_("Image patches"), "image", menu=BEYOND, text=False,
         input="image", file="image", module="modality", figure="image_figure",
         reads=(*INPUT_RUN, "model", "layer", "head", "view"), settings=(("image_patches", "ImageSettings"),)),
    Page("audio-frames", "audio-frames", "audio_frames.py", N_("Audio frames"), "graphic_eq", menu=BEYOND, text=False,
         input="audio", file="audio", module="modality", figure="audio_figure", reads=INPUT_RUN,
         settings=(("audio_frames", "AudioSettings"),)),
    Page("graph-nodes", "graph-nodes", "graph_nodes.py", N_("Graph nodes"), "hub", menu=BEYOND, text=False,
         input="graph",
         module="modality", figure="graph_figure", reads=INPUT_RUN, settings=(("graph_nodes", "GraphSettings"),)),
    # Long sequences and the Q/K map run the random layer over a text of their own (a text repeated, the
    # corpus): they read how a text is embedded and masked, though not the sidebar's sentence to show.
    Page("long-sequences", "long-sequences", "long_sequences.py", N_("Long sequences"), "speed", menu=LONG, window=True,
         module="longseq", reads=("text", "device", *RANDOM, *EMBED, *MASK),
         settings=(("long_sequences", "Settings"),)),
    Page("attention-file", "attention-file", "attention_file.py", N_("Your attention"), "upload_file", menu=BEYOND,
         text=False, random=False, file="attention", module="attention_file", reads=("layer", "head", "query", "view")),
    Page("qk-map", "qk-map", "qk_map.py", N_("Q/K map"), "scatter_plot", menu=BEYOND, opens_on=UNEMBEDS, module="qkmap",
         reads=(*MODEL, *RANDOM, *without(EMBED, "dropout"), *MASK, "head"),  # queries and keys: before dropout
         settings=(("qk_map", "Settings"),)),
    Page("watch-it-learn", "watch-it-learn", "watch_it_learn.py", N_("Watch it learn"), "school", menu=CIRCUITS,
         text=False, random=False, module="learn", command="python -m attnviz learn",
         settings=(("learn", "LearnSettings"), ("watch", "Settings"))),  # its training's, and the page's
    Page("patching", "patching", "patching.py", N_("Patching"), "troubleshoot", menu=CIRCUITS, text=False,
         random=False, needs=PATCHES, module="patching", reads=(*MODEL, *PAIR),  # the pair is shared
         settings=(("patching", "Settings"),)),
    Page("circuit", "circuit", "circuit.py", N_("Circuit"), "account_tree", menu=CIRCUITS, text=False, random=False,
         needs=PATCHES, module="circuit", reads=(*MODEL, *PAIR), settings=(("circuit", "CircuitSettings"),)),
    Page("long-context", "long-context", "long_context.py", N_("Long context"), "menu_book", menu=LONG, text=False,
         random=False, needs=frozenset({Cap.KV_CACHE}), prefers=UNEMBEDS, module="longcontext", file="text-file",
         reads=("model",),  # a causal LM folder, or the random layer's defaults
         settings=(("long", "LongSettings"),)),
    Page("logit-lens", "logit-lens", "logit_lens.py", N_("Logit lens"), "layers", menu=CIRCUITS, random=False,
         needs=UNEMBEDS, module="lens", reads=("text", "seq", "model", "device"), settings=(("lens", "LensSettings"),)),
    Page("vision-language", "vision-language", "vision_language.py", N_("Vision-language"), "visibility", menu=BEYOND,
         random=False, needs=frozenset({Cap.SEES_PICTURES}), module="visionlang", reads=("text", "model"),
         settings=(("look", "LookSettings"), ("vl", "Settings"))),
)
PAGE_NAMES = tuple(p.name for p in PAGES)
FILE_PAGES = {p.file: p.name for p in PAGES if p.file}  # the page a file flag (--image, --text-file…) opens
HOME = PAGES[0].name  # the default page: a link without a path, where a click elsewhere opens a head


def menus() -> list[tuple[str, list[str]]]:
    """The navigation's menus across the top of every page, in the order of their first page: (title, its
    pages' names). (A list of seventeen pages in the sidebar pushed the controls a page reads below the first
    screen.)"""
    return [(title, [p.name for p in PAGES if p.menu == title]) for title in dict.fromkeys(p.menu for p in PAGES)]


def page_settings(entry: Page) -> list[tuple[str, type]]:
    """(field, settings class) of each of ``entry``'s own settings, its module imported here: what
    ``attnviz.views.state`` composes ``ViewState`` from."""
    module = importlib.import_module(f"attnviz.views.{entry.module}")
    return [(name, getattr(module, cls)) for name, cls in entry.settings]


def page(name: str) -> Page:
    return next(p for p in PAGES if p.name == name)


def models_for(entry: Page) -> list[str]:
    """The models ``entry`` runs, of those this server offers: the first is the one the app opens the page on
    and ``render --page`` renders: those whose capabilities hold all the page's ``needs``, and of those, where
    any holds its ``prefers`` too, only those; the first of them that holds its ``opens_on`` first, then in the
    order offered."""
    runs = [m for m in available() if open_model(m).can(*entry.needs)]
    best = [m for m in runs if open_model(m).can(*entry.prefers)] or runs
    first = [m for m in best if open_model(m).can(*entry.opens_on)][:1]
    return first + [m for m in best if m not in first]


def opening_model(entry: Page) -> str | None:
    """The model a link to ``entry`` without one opens it on (where it has ``opens_on``; else None: the
    sidebar's model carries over)."""
    models = models_for(entry) if entry.opens_on else []
    return models[0] if models else None


def why_not(entry: Page, model: str) -> str:
    """Why ``entry`` does not run ``model`` (one of ``available``, not in ``models_for``), in words: its kind's."""
    handle = open_model(model)  # what it lacks of the page's needs first, then of what the page prefers
    return handle.why_not(entry.needs) or handle.why_not(entry.prefers) or N_("is not available here")


def check_view(page: str, state) -> None:
    """``ValueError`` unless ``page`` draws ``state.view``, naming the page that does."""
    if state.view not in views_on(page):
        where = next(p for p in VIEWS[state.view].pages)
        raise ValueError(f"The view {state.view} is drawn on the {where} page: give --page {where}.")


def page_of(url_or_path: str) -> str:
    """The page a link opens: the last path segment ("" and unknown paths: the explorer)."""
    s = url_or_path.strip()
    path = urlsplit(s).path if "://" in s or s.startswith("/") else ""
    name = path.rstrip("/").rsplit("/", 1)[-1]
    return name if name in PAGE_NAMES else HOME


# --- the views --------------------------------------------------------------------------

# What a view needs of a run, in words (marked for translation): a run that lacks it gets the view's problem.
NEEDS = {
    "weights": N_("the attention weights (any run, an attention file too)"),
    "mask": N_("the mask the run applied"),
    "steps": N_("the run's every step: the output vectors"),
    "values": N_("the followed layer's values and output projection W_O"),
    "qk": N_("the followed layer's q and k, as its scores use them"),
    "probe": N_("a rerun of the model on the roles probe (where the run can be repeated)"),
    "two runs": N_("a clean and a corrupted run of a causal language model"),
}
def open_head(layer: int, head: int, layered: bool) -> dict:
    """The settings a click on a head sets: that head (of that layer, for a model of layers), in
    the view "head"."""
    return {**({"layer": layer} if layered else {}), "head": head, "view": "head"}


PART_KINDS = ("caption", "info", "subheader", "figure", "table", "corner", "columns")


@dataclass(frozen=True)
class Part:
    """One thing a view draws on a page, in its order.

    - ``caption``, ``info``, ``subheader``: ``build(result, state)`` -> Markdown (None: nothing);
    - ``figure``: ``build(result, state, style)`` -> a figure (None: the view's own ``figure``);
      ``describe(result, state, fig)`` its text alternative; ``selectable``: a click on a block
      of the model view opens that head;
    - ``table``: ``build(result, state)`` -> rows (a list of dicts, or {"data", "index",
      "columns"}; None: nothing); ``selectable``: a row opens that layer and head;
    - ``corner``: the close-up's top-left corner (q0, k0), bounded by the run;
    - ``columns``: ``parts`` side by side.
    ``opens(layer, head, layered)``: the settings a click on a block or a row sets (``open_head``:
    that head, in the view "head"). ``when(result)``: drawn only where it holds (a long text's
    close-up). ``worker``: long work, built on a compute worker, never in the page's own thread.
    ``reads``: what else of the state it reads besides the view's picks (the close-up's corner),
    for its cache key. ``plain``: a figure built as plain dicts (``attnviz.plots.style.plain_figures``),
    not a ``go.Figure``.
    """

    kind: str
    build: Callable | None = None
    name: str = ""
    describe: Callable | None = None
    selectable: bool = False
    worker: bool = False
    when: Callable | None = None
    parts: tuple = ()
    reads: tuple[str, ...] = ()
    plain: bool = True
    opens: Callable = open_head


@dataclass(frozen=True)
class View:
    name: str  # its name in links (view=) and in --view
    title: str  # marked for translation
    needs: str  # a key of NEEDS
    figure: Callable  # (result, state, style) -> its figure: what the CLI renders
    parts: tuple[Part, ...]  # what a page draws, in order
    picks: tuple[str, ...] = ()  # the selection it reads besides the sentence: "head", "query"
    describe: Callable | None = None  # (result, state, fig) -> its figure's text alternative (None: from the figure)
    record: Callable | None = None  # (result, state) -> {key: numbers}, added to the run's JSON
    problem: Callable | None = None  # (result, state) -> why it cannot draw this run (None: it can)
    pages: tuple[str, ...] = ("explorer", "attention-file")  # the pages that offer it

    @property
    def opens_heads(self) -> bool:
        """A block or a row of it opens a head (its page keeps the pick while it shows it)."""
        return any(p.selectable for p in self.parts)

    def key(self, state, part: Part | None = None) -> tuple:
        """The plain values one of its parts reads, a cache key beside the run's: only the
        selection it shows, so that changing the head leaves the grid's figure valid."""
        reads = (*self.picks, *(part.reads if part is not None else ()))
        return (self.name, part.name if part is not None else "", state.seq, *(state.value(p) for p in reads))


FIGURE = Part("figure")  # the view's own figure


def close_up_parts(figure: Callable) -> tuple[Part, ...]:
    """A long text's exact numbers: a REGION × REGION window of the view above, drawn by ``figure``."""
    return (Part("subheader", W.close_up_title, when=W.is_long),
            Part("caption", W.close_up_caption, when=W.is_long),
            Part("corner", when=W.is_long),
            Part("figure", figure, name="region", when=W.is_long, reads=("q0", "k0")))


VIEWS = {v.name: v for v in (
    View("grid", N_("All heads"), "weights", W.draw_grid, (FIGURE, Part("caption", W.pooled_note)),
         describe=W.describe_grid_view,
         pages=("explorer", "attention-file", "image-patches", "audio-frames", "graph-nodes")),
    View("head", N_("One head"), "weights", W.draw_head, (FIGURE, *close_up_parts(W.close_up_of_head)), picks=("head",),
         describe=W.describe_head_view),
    View("query", N_("Query focus"), "weights", W.draw_query, (FIGURE,), picks=("query",),
         describe=W.describe_query_view),
    View("mean", N_("Mean over heads"), "weights", W.draw_mean, (FIGURE, *close_up_parts(W.close_up_of_mean))),
    View("mask", N_("Mask"), "mask", W.draw_mask,
         (Part("columns", parts=(FIGURE, Part("figure", W.draw_head, name="head", describe=W.describe_head_view))),
          Part("info", W.fully_masked_note)), picks=("head",), pages=("explorer",)),
    View("output", N_("Output vectors"), "steps", W.draw_output, (FIGURE, Part("table", W.output_table)),
         problem=W.no_vectors, pages=("explorer",)),
    View("table", N_("Weights table"), "weights", W.draw_head,
         (Part("subheader", W.weights_title, reads=("q0", "k0")), Part("corner", when=W.is_long),
          Part("table", W.weights_table, reads=("q0", "k0"))),
         picks=("head",), describe=W.describe_head_view),
    View("model", N_("Model view"), "weights", Y.model_figure,
         (Part("figure", selectable=True, plain=False), Part("caption", Y.model_caption))),
    View("analysis", N_("Head analysis"), "weights", Y.rollout_figure,
         (Part("caption", Y.analysis_caption), Part("table", Y.analysis_rows, selectable=True), FIGURE)),
    View("roles", N_("Head roles"), "probe", R.roles_figure,
         (Part("caption", R.roles_caption), Part("table", R.roles_table, selectable=True, worker=True), FIGURE),
         record=R.roles_record),
    View("flow", N_("Attention flow"), "weights", Y.flow_figure,
         (Part("caption", Y.flow_caption), Part("figure", worker=True)), record=Y.flow_record, problem=Y.flow_problem),
    View("norms", N_("Does the head matter"), "values", C.norms_figure,
         (Part("caption", C.norms_caption), FIGURE, Part("subheader", C.knockout_title),
          Part("caption", C.knockout_caption),
          Part("figure", C.knockout_bars, name="knockout", describe=C.describe_knockout, worker=True, plain=False),
          Part("table", C.next_token_rows, name="next"), Part("caption", C.next_token_note)),
         describe=C.describe_norms, record=C.norms_record, problem=C.parts_problem,
         pages=("explorer", "attention-file", "image-patches")),
    View("neurons", N_("Neuron view"), "qk", U.neuron_view_figure, (Part("caption", U.neuron_caption), FIGURE),
         picks=("head", "query"), describe=U.describe_neurons, record=U.neurons_record, problem=C.qk_problem,
         pages=("explorer", "attention-file", "image-patches")),
    View("patching", N_("Which heads cause the answer"), "two runs", P.draw_heads,
         # The definition under the chart: above it, with the tokens, it pushed the chart off a laptop's screen.
         (Part("caption", P.tokens_caption), Part("figure", selectable=True, plain=False, opens=P.pick_head),
          Part("caption", P.definition),
          Part("subheader", P.chosen_title),
          Part("columns", parts=(Part("figure", P.draw_clean, name="clean", reads=("patched",)),
                                 Part("figure", P.draw_corrupted, name="corrupted", reads=("patched",)))),
          Part("figure", P.draw_difference, name="difference", reads=("patched",)),
          Part("figure", P.draw_positions, name="positions"),
          Part("caption", P.attribution_caption),
          Part("figure", P.draw_attribution, name="attribution", when=P.has_attribution)),
         describe=P.describe, record=P.record, problem=P.problem, pages=("patching",)),
)}
VIEW_NAMES = tuple(VIEWS)
# The explorer's views that are one figure (the CLI renders them; "table" renders its head's)
FIGURE_VIEWS = tuple(v for v, entry in VIEWS.items() if "explorer" in entry.pages and v != "table")
VIEW_TITLES = {name: v.title for name, v in VIEWS.items()}


def figure_of(result, state, view: str | None = None, *, style=None):
    """The figure of ``view`` (default: ``state.view``): its entry's, in ``state``'s style unless given."""
    return VIEWS[view or state.view].figure(result, state, style or style_for(state))


def views_on(page_name: str) -> tuple[str, ...]:
    """The views a page offers, in the table's order."""
    return tuple(name for name, v in VIEWS.items() if page_name in v.pages)
