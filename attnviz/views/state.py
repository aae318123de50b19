"""``ViewState``: everything a link restores, each setting declared once on its field.

``SharedState`` holds what several pages read: the run's ``AttentionConfig`` (``state.config``), the
language, colours, presenter mode, the sentence, head, query and view the pages follow, and the prompt pair
Patching and Circuit share (``state.pair``). ``ViewState``
adds each page's own settings, nested under the field its entry in the table of pages names
(``state.circuit.top``), composed from that table so that this module imports no page. The run's settings
read as the state's own properties (``state.heads`` is ``state.config.num_heads``); any setting, by its link
name, through ``state.value(name)``, and ``state.with_(heads=8)`` changes it. The URL parser and writer, the
CLI's flags, the sidebar and validation all come from the declarations (``attnviz.settings``).

Bounds that depend on the run (the heads of the chosen model, the tokens of the text)
are not checked here but against the run, by the views (``attnviz.views.selection``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, make_dataclass
from urllib.parse import urlencode

from attnviz import limits
from attnviz.i18n import LANGUAGES, N_
from attnviz.plots.style import COLOR_SCALES
from attnviz.run.config import AttentionConfig
from attnviz.settings import url as U
from attnviz.settings.spec import BY_ENTRY, OWN, Unavailable, setting
from attnviz.views.catalogue import PAGE_NAMES, PAGES, VIEW_NAMES, opening_model, page_settings
from attnviz.views.catalogue import page as page_entry
from attnviz.views.pair import PromptPair

# A value this machine does not offer gets its own words, not "must be one of".
FALLBACKS = {
    "device": N_("URL parameter device={value} is not available on this machine (available: {choices}); "
                 "running on cpu."),
    "model": N_("URL parameter model={value} is not a model here (available: {choices}); using the random "
                "model."),
    "lang": N_("URL parameter lang={value} is not a language here (available: {choices}); using English."),
}


def _lang(raw: str, taken: dict) -> str:
    if raw not in LANGUAGES:
        raise Unavailable()
    return raw


@dataclass(frozen=True)
class SharedState:
    """The settings several pages share: the run's (``config``), the language, the colours, presenter mode,
    and what the pages that draw a run follow (the sentence, the head, the query, the view). ``ViewState``
    adds each page's own, composed from the table of pages."""

    config: AttentionConfig = AttentionConfig()
    lang: str = setting("en", sidebar=True, convert=_lang, choices=tuple(LANGUAGES), label=N_("Language"),
                        help=N_("The app's own text; Streamlit's widget chrome stays in English."))
    colors: str = setting(COLOR_SCALES[0], sidebar=True, choices=COLOR_SCALES, label=N_("Colour scale"),
                          help=N_("Viridis and Cividis read well for colour-blind viewers and in greyscale."))
    present: bool = setting(False, sidebar=True, label=N_("Presenter mode"),
                            help=N_("Large fonts, collapsed sidebar, one view per screen — for a projector."))
    seq: int = setting(0, sidebar=True, lo=0, hi=limits.MAX_LINES - 1, pages=BY_ENTRY, label=N_("Sentence to show"),
                       help=N_("Which line of the padded batch the views show."))
    # The image/audio/graph pages start from plain similarity (Q = K = V = X): the first
    # thing a class should see on pixels and sound.
    input_projections: bool = setting(
        False, pages=BY_ENTRY, label=N_("Q/K/V projections"),
        help=N_("Off (the default here): Q = K = V = X, so attention is plain similarity of the inputs. On: "
                "seeded projections, as in a Transformer layer."))
    # What the pages that draw a run's heads follow: which head, which query, which picture of it.
    head: int = setting(0, lo=0, hi=limits.MAX_HEADS - 1, pages=BY_ENTRY, label=N_("Head"),
                        help=N_("Which head to follow."))
    # The followed query token; -1 = the last real token (it sees the most keys).
    query: int = setting(-1, lo=-1, hi=limits.MAX_TOKENS - 1, pages=BY_ENTRY, label=N_("Query token"),
                         help=N_("Which query token to follow (the last one sees the most keys under a causal "
                                 "mask)."))
    view: str = setting("grid", choices=VIEW_NAMES, pages=BY_ENTRY, label=N_("View"),
                        help=N_("Which picture of the result to show."))
    # The prompt pair Patching and Circuit share (``attnviz.views.pair``): one link opens both on it.
    pair: PromptPair = PromptPair()
    # The run's settings, by their link names: the state's own, shared by every page that runs the text
    # (``config`` holds them). A page's own settings are reached through its settings object
    # (``state.circuit.top``), never flattened into this namespace.
    @property
    def tokenize(self) -> str:
        return self.config.tokenize_mode

    @property
    def text(self) -> str:
        return self.config.text

    @property
    def model(self) -> str:
        return self.config.model

    @property
    def stack(self) -> str:
        return self.config.stack

    @property
    def layer(self) -> int:
        return self.config.layer

    @property
    def d_model(self) -> int:
        return self.config.d_model

    @property
    def heads(self) -> int:
        return self.config.num_heads

    @property
    def mask(self) -> str:
        return self.config.mask

    @property
    def window(self) -> int:
        return self.config.window

    @property
    def pad_to(self) -> int:
        return self.config.pad_to

    @property
    def device(self) -> str:
        return self.config.device

    @property
    def seed(self) -> int:
        return self.config.seed

    @property
    def dropout(self) -> float:
        return self.config.dropout

    @property
    def positional(self) -> bool:
        return self.config.positional

    @property
    def projections(self) -> bool:
        return self.config.projections

    def value(self, name: str):
        """Any setting by its link name, for the code that handles settings by name (links, widgets, cache
        keys): ``state.value("clean")`` is ``state.pair.clean``."""
        entry = U.table(type(self)).get(name)
        if entry is None:
            raise KeyError(f"No setting is named {name!r}.")
        return U.get(self, entry)

    @classmethod
    def of(cls, **values) -> SharedState:
        """A state from settings by link name: ``ViewState.of(heads=8, mask="none")``."""
        return U.set_values(cls(), values)

    def with_(self, **changes) -> SharedState:
        return U.set_values(self, changes)

    def values(self) -> dict[str, object]:
        """Every setting by link name, as a value (not text)."""
        return {url: U.get(self, e) for url, e in U.table(type(self)).items()}

    def to_query(self) -> dict[str, str]:
        return U.to_query(self)

    def query_string(self, page: str | None = None) -> str:
        """The link's query: every setting, or (``page``) only those ``page`` reads that differ from
        their defaults (``link_query``)."""
        return urlencode(self.to_query() if page is None else link_query(self, page))


def _compose() -> type:
    """``ViewState``: the shared settings and, nested under its field, each page's own settings class, as the
    table of pages names them (``catalogue.Page.settings``), so that this module imports no page."""
    own = [(name, cls, field(default=cls())) for p in PAGES for name, cls in page_settings(p)]
    composed = make_dataclass("ViewState", own, bases=(SharedState,), frozen=True)
    composed.__module__ = __name__  # pickling and reprs name it where it is defined
    return composed


ViewState = _compose()  # everything a link restores: state.patching is Patching's own Settings, say
SETTINGS = U.table(ViewState)  # {link name: Entry}: the one table every door reads
NAMES = tuple(SETTINGS)
DEFAULTS = ViewState()
ParamWarning = U.ParamWarning
query_dict = U.query_dict


def reads(page: str) -> frozenset[str]:
    """The settings ``page`` reads, by link name: its sidebar draws these, and its link writes those
    of them that differ from their defaults. Every page reads the settings declared for all, less those it
    ignores (``Page.ignores``); the shared ones its entry in the table names (``Page.reads``); and its own
    (declared ``OWN`` in the settings classes its entry names: ``Page.settings``)."""
    entry = next((p for p in PAGES if p.name == page), None)
    shared = entry.reads if entry else ()
    own = {name for name, _cls in entry.settings} if entry else set()
    ignored = entry.ignores if entry else ()
    return _READS.get(page) or _READS.setdefault(page, frozenset(
        k for k, e in SETTINGS.items()
        if ("*" in e.spec.pages and k not in ignored) or page in e.spec.pages or k in shared
        or (e.spec.pages == OWN and e.path[0] in own)))


_READS: dict[str, frozenset[str]] = {}


def own(page: str) -> frozenset[str]:
    """The settings ``page`` alone reads (declared ``OWN`` in the settings classes its entry names): a CLI flag
    among them names the page."""
    fields = {name for p in PAGES if p.name == page for name, _cls in p.settings}
    return frozenset(k for k, e in SETTINGS.items() if e.spec.pages == OWN and e.path[0] in fields)


def default_of(name: str, values: Mapping[str, object]):
    """The default of setting ``name`` where the others hold ``values`` (a language's example sentence)."""
    e = SETTINGS[name]
    return e.spec.default_for(e.default, values)


def link_query(state: ViewState, page: str) -> dict[str, str]:
    """The settings ``page`` reads that differ from their defaults, as the URL carries them: a link
    that reopens this view and nothing else (the default page's is empty). A page that opens on a model of
    its own (``catalogue.opening_model``) writes any other, the random layer among them."""
    values = state.values()
    opens = opening_model(page_entry(page)) if page in PAGE_NAMES else None
    return {k: U.as_text(values[k]) for k in SETTINGS if k in reads(page) and values[k] != (
        opens if k == "model" and opens else default_of(k, values))}


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
        if not limits.heads_divide(state.d_model, state.heads):
            state = state.with_(heads=limits.fit_heads(state.d_model, DEFAULTS.heads))
    return state, warnings


def parse_url(url_or_query: str) -> tuple[ViewState, list[ParamWarning]]:
    return parse(query_dict(url_or_query))
