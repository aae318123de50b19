"""One session's settings: URL <-> session state, and the URL's warnings.

Session-state keys are the settings' link names (``attnviz.views.state.SETTINGS``). On a
session's first run the URL is parsed into session state before any widget exists;
after every run the current state is written back to the URL, so the address bar
always reopens exactly this view. When the URL changes under a running session
(back/forward, or a client that reruns with a new query string) it is parsed again, so
the URL always wins over stale widget values; switching pages (which clears the query
string) keeps the settings.

Streamlit forgets the value of a widget that a run did not draw (a page's own controls
while another page is open, or every widget when the first run of a session is
replaced by another page's run). So the last known value of every setting is kept
under a key no widget owns, and any setting missing from the session state is restored
from it: a page never reads a key that this module has not set.

Only the settings a page may draw or read live in the session state while it runs (the
sidebar's, and those declared for that page or for every page: ``keep``); the rest wait
in the last known values. Every widget call walks the whole session state (Streamlit's
``filtered_state``): with every setting of every page in it, a selectbox cost 152 µs
instead of 88.
"""

from __future__ import annotations

import streamlit as st

from attnviz import cache
from attnviz.i18n import _, set_language
from attnviz.limits import fit_heads, head_choices
from attnviz.views.markdown import md
from attnviz.views.state import DEFAULTS, NAMES, SETTINGS, ViewState, default_of, link_query, parse, reads
from ui import picks

_PRESENT_AT_LOAD = "_attnviz_present_at_load"  # the page opened in presenter mode (sidebar collapsed)
_URL = "_attnviz_url"  # the query string this session last parsed or wrote
_WARNINGS = "_attnviz_url_warnings"  # [(warning, the fallback value it set)]
_PAGE = "_attnviz_page"  # the page this run draws (``keep``)
_ENTERED = "_attnviz_entered"  # this run opens its page (a link, or another page before it), not a click on it
_KNOWN = "_attnviz_values"  # every setting's last known value, owned by no widget
MORE = "_attnviz_more"  # the sidebar's "More settings" switch: closed again for each new link
# The states made from a session's values (a text of up to 20,000 characters among them), shared by every
# session: kept in the byte-bounded cache's lookups share, least recently used leaving (limits.CACHE_SHARES).
LOOKUPS = cache.named("lookups")


def restore() -> None:
    """Parse the URL when it is new to this session (a new session, or a URL that changed
    under this one), before the page is known; set the language."""
    ss = st.session_state
    url = st.query_params.to_dict()
    # Moving to another page of the app arrives with an empty query string: that keeps
    # the session's settings.
    if _URL not in ss or (url and ss[_URL] != url):
        set_language(str(url.get("lang", DEFAULTS.lang)))  # the warnings below speak the link's language
        state, warnings = parse(url)
        values = state.values()
        held = ss.to_dict()  # one pass: a pop() of a key that is not there costs a KeyError through the proxy
        for k in NAMES:  # the link wins over every value this session had: keep() sets them from it
            if k in held:
                del ss[k]
        ss[_KNOWN] = values
        ss[_WARNINGS] = [(w, values[w.name]) for w in warnings]
        ss[_URL] = url
        ss[_PRESENT_AT_LOAD] = state.present
        ss.pop(MORE, None)  # a new link starts with "More settings" closed (ui.sidebar names what it set)
        ss.pop(_PAGE, None)  # a new link opens its page anew (``entered``)
    set_language(str(ss.get("lang") or (ss.get(_KNOWN) or DEFAULTS.values())["lang"]))


def live_names(page: str) -> frozenset[str]:
    """The settings a run of ``page`` may draw or read: those declared for that page or for every
    page (``attnviz.views.state.reads``)."""
    return reads(page)


def entered() -> bool:
    """This run opens its page: a new link, or the first run after another page (not a click on this one)."""
    return bool(st.session_state.get(_ENTERED))


def keep(page: str) -> None:
    """Put the settings of ``page`` (``live_names``) in the session state, from this
    session's values or else the last known ones; move the others out, into the last
    known values. Then apply a chart's pending pick and keep the head count valid."""
    ss = st.session_state
    ss[_ENTERED] = ss.get(_PAGE) != page
    ss[_PAGE] = page
    now = ss.to_dict()
    known = now.get(_KNOWN) or DEFAULTS.values()
    live = live_names(page)
    gone = {k: now[k] for k in NAMES if k in now and k not in live}
    if gone:  # e.g. the explorer's close-up corner, when another page opens
        ss[_KNOWN] = known = {**known, **gone}
        for k in gone:
            del ss[k]
    values = {**known, **{k: now[k] for k in NAMES if k in now}}
    for k in live:
        # Re-assigning keeps a value Streamlit would forget; a forgotten one comes back.
        ss[k] = now[k] if k in now else known[k]
        # A default that follows other settings (a language's sentence) follows them while unchanged.
        if SETTINGS[k].spec.follows is not None and ss[k] == default_of(k, known):
            ss[k] = default_of(k, values)
    picks.apply_pending()
    if "heads" not in live:
        return
    # d_model may have changed under a head count that no longer divides it.
    d_model = int(ss["d_model"])
    if ss["heads"] not in head_choices(d_model):
        old = ss["heads"]
        ss["heads"] = fit_heads(d_model, int(old or 1))
        picks.toast(_("{old} heads do not divide d_model={d}: using {new}.").format(old=old, d=d_model,
                                                                                     new=ss["heads"]),
                    icon=":material/tune:")


def url_warnings(page: str | None = None) -> list[str]:
    """The URL's warnings whose setting still holds the value the warning set (on ``page``: those
    of settings it reads; an old link's parameters that it does not read are ignored quietly)."""
    ss = st.session_state
    live = NAMES if page is None else live_names(page)
    return [w.text for w, fallback in ss.get(_WARNINGS, []) if w.name in live and ss.get(w.name) == fallback]


def show_url_warnings(page: str | None = None) -> None:
    for w in url_warnings(page):
        st.warning(md(w), icon=":material/link:")


def current() -> ViewState:
    # One pass over the session state: a lookup through its proxy per setting (65 of them,
    # several times a run) cost 0.3 ms a call.
    ss = st.session_state.to_dict()
    known = ss.get(_KNOWN) or DEFAULTS.values()
    values = {k: ss[k] if k in ss else known[k] for k in NAMES}
    for k, v in values.items():  # a multiselect holds a list; its setting, text with commas
        if isinstance(v, (list, tuple)):
            values[k] = ",".join(map(str, v))
    try:
        return _state(tuple(values.values()))
    except TypeError:  # a value that cannot be a cache key (a widget's list): built directly
        return ViewState.of(**values)


def _state(values: tuple) -> ViewState:
    """The (immutable) state of these settings' values, in ``NAMES`` order: a run asks for
    it several times, each time building and checking every setting of a ViewState. Kept with
    its values, so that the cache counts the texts its key holds."""
    def made() -> tuple[tuple, ViewState]:
        return values, ViewState.of(**dict(zip(NAMES, values, strict=True)))

    return LOOKUPS.get_or_compute(("state", values), made)[1]


def adopt(values: dict, page: str) -> ViewState:
    """Settings ``page`` sets for the user before their widgets are drawn (a model's own example pair in
    place of the defaults); the state with them. The link is written again: app.py wrote it before the page
    ran, without them."""
    st.session_state.update(values)
    state = current()
    write_url(state, page)
    return state


def fall_back(values: dict) -> ViewState:
    """Settings the running page sets back (a chosen head or query that the new input no longer has): the
    state with them, and the link written again, so that it never keeps a value the page does not show."""
    return adopt(values, st.session_state[_PAGE])


def write_url(state: ViewState, page: str) -> None:
    """Mirror in the query string the settings ``page`` reads that differ from their defaults
    (``link_query``; only when it changed): a short link that reopens this view."""
    want = link_query(state, page)
    if st.query_params.to_dict() != want:
        st.query_params.from_dict(want)
    st.session_state[_URL] = want
    st.session_state[_KNOWN] = state.values()


# The page's top margin under the navigation's menus (Streamlit's is 6rem: the heading and the first chart
# a screen lower on a laptop). Beside the sidebar on a screen 1024 px wide, Streamlit's side margins (5rem each)
# leave the charts 564 px, too narrow for a chart's one-line title: a screen that narrow gets 1rem.
PAGE_CSS = ("[data-testid=stMainBlockContainer] {padding-top: 3.5rem} @media (max-width: 1200px) "
            "{[data-testid=stMainBlockContainer] {padding-left: 1rem; padding-right: 1rem}}")
# Presenter mode's body text, for the back of a classroom: the charts' text grows with their font
# (attnviz.views.selection.PRESENTER_FONT), the page's own words here.
PRESENTER_CSS = ("[data-testid=stMain] [data-testid=stMarkdownContainer] p, "
                 "[data-testid=stMain] [data-testid=stMarkdownContainer] li {font-size: 1.3rem; line-height: 1.5}"
                 " [data-testid=stMain] [data-testid=stCaptionContainer] {font-size: 1.1rem}")


def presenter_hint() -> None:
    """The page's margins and presenter mode's larger body text; presenter mode collapses the sidebar when a
    page opens with it, and switched on later, the sidebar stays where it is, so say how to close it."""
    ss = st.session_state
    st.html("<style>" + PAGE_CSS + (" " + PRESENTER_CSS if ss.get("present") else "") + "</style>")
    if ss.get("present") and not ss.get(_PRESENT_AT_LOAD):
        st.info(_("Presenter mode is on: close the sidebar with the « button at its top (or press Esc while it "
                  "has focus). A link with present=1 opens with the sidebar closed."), icon=":material/slideshow:")
