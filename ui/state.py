"""Shared settings: URL <-> session state <-> sidebar widgets.

Widget keys are the query-string names of ``attnviz.params.ViewState``. On a
session's first run the URL is parsed (``attnviz.params.parse``) into session state
before any widget exists; after every run the current state is written back to the
URL, so the address bar always reopens exactly this view. When the URL changes under
a running session (back/forward in the browser, or a client that reruns with a new
query string) it is parsed again, so the URL always wins over stale widget values;
switching pages (which clears the query string) keeps the settings.

Warnings about the URL are shown (escaped) until the setting they name is changed.
Every bound comes from ``attnviz.limits``.
"""

from __future__ import annotations

from dataclasses import asdict

import streamlit as st

from attnviz.devices import available_devices
from attnviz.figures import COLOR_SCALES
from attnviz.i18n import LANGUAGES, N_, _, fixed, set_language
from attnviz.limits import D_MODELS, MAX_DROPOUT, MAX_LINES, MAX_SEED, MAX_TEXT_CHARS, MAX_TOKENS, head_choices
from attnviz.masks import MASK_KINDS
from attnviz.models import MODEL_LABELS, ModelError, available_models, layer_count
from attnviz.params import DEFAULTS, NAMES, ViewState, parse
from attnviz.tokens import MODES
from ui.safe import md

MASK_NAMES = {"none": N_("none"), "causal": N_("causal"), "padding": N_("padding"), "window": N_("window"),
              "causal+window": N_("causal+window")}
_PRESENT_AT_LOAD = "_attnviz_present_at_load"  # the page opened in presenter mode (sidebar collapsed)
_URL = "_attnviz_url"  # the query string this session last parsed or wrote
_WARNINGS = "_attnviz_url_warnings"  # [(warning, the fallback value it set)]


def load() -> None:
    """Seed session state from the URL when it is new to this session; keep
    page-specific keys alive after."""
    ss = st.session_state
    url = st.query_params.to_dict()
    # A new session, or a URL that changed under this one. Moving to another page of the
    # app arrives with an empty query string: that keeps the session's settings.
    if _URL not in ss or (url and ss[_URL] != url):
        set_language(str(url.get("lang", DEFAULTS.lang)))  # the warnings below speak the link's language
        state, warnings = parse(url)
        for k, v in asdict(state).items():
            ss[k] = v
        ss[_WARNINGS] = [(w, getattr(state, w.name)) for w in warnings]
        ss[_URL] = url
        ss[_PRESENT_AT_LOAD] = state.present
    else:
        # Streamlit forgets the value of a widget that a run did not draw (a page's own
        # controls while another page is open); re-assigning keeps it.
        for k in NAMES:
            if k in ss:
                ss[k] = ss[k]
    set_language(str(ss.get("lang", DEFAULTS.lang)))
    for key, value in ss.pop(_PENDING, {}).items():
        ss[key] = value
    # d_model may have changed under a head count that no longer divides it.
    d_model = int(ss.get("d_model", DEFAULTS.d_model))
    choices = head_choices(d_model)
    if ss.get("heads") not in choices:
        old = ss.get("heads")
        ss["heads"] = max(h for h in choices if h <= max(1, int(old or 1)))
        st.toast(_("{old} heads do not divide d_model={d}: using {new}.").format(old=old, d=d_model, new=ss["heads"]),
                 icon=":material/tune:")


@st.cache_resource(show_spinner=False)
def _layer_count(model: str) -> int:
    try:
        return layer_count(model)
    except ModelError:
        return 1


def url_warnings() -> list[str]:
    """The URL's warnings whose setting still holds the value the warning set."""
    ss = st.session_state
    return [w for w, fallback in ss.get(_WARNINGS, []) if ss.get(w.name) == fallback]


def show_url_warnings() -> None:
    for w in url_warnings():
        st.warning(md(w), icon=":material/link:")


def current() -> ViewState:
    ss = st.session_state
    values = {k: ss.get(k, getattr(DEFAULTS, k)) for k in NAMES}
    if isinstance(values["masks"], (list, tuple)):  # the mask lab's multiselect holds a list
        values["masks"] = ",".join(values["masks"])
    return ViewState(**values)


def write_url(state: ViewState) -> None:
    """Mirror every setting in the query string (only when it changed)."""
    want = state.to_query()
    if st.query_params.to_dict() != want:
        st.query_params.from_dict(want)
    st.session_state[_URL] = want


def sidebar(text_page: bool = True) -> None:
    """Every control of the computation, each with a key (its URL name) and a help line.

    ``text_page=False`` (image, audio and graph pages) greys out what only text uses."""
    sb = st.sidebar
    t = fixed()  # format_func runs outside this run's context in tests: bind the language now
    sb.selectbox(_("Language"), list(LANGUAGES), key="lang", format_func=LANGUAGES.get,
                 help=_("The app's own text; Streamlit's widget chrome stays in English."))
    sb.text_area(_("Text — one sentence per line"), key="text", height=110, max_chars=MAX_TEXT_CHARS,
                 help=_("Several lines (up to {lines}) form a padded batch. Up to {tokens} tokens per line.").format(
                     lines=MAX_LINES, tokens=MAX_TOKENS))
    lines = [ln for ln in str(st.session_state.get("text", "")).splitlines() if ln.strip()]
    if len(lines) > 1:
        if st.session_state.get("seq", 0) >= len(lines):
            st.session_state["seq"] = 0
        sb.selectbox(_("Sentence to show"), list(range(len(lines))), key="seq",
                     format_func=lambda i: f"{i + 1}: {lines[i][:40]}",
                     help=_("Which line of the padded batch the views show."))
    models = available_models()
    if st.session_state.get("model") not in models:
        st.session_state["model"] = "random"
    sb.selectbox(_("Model"), models, key="model", format_func=lambda m: t(MODEL_LABELS.get(m, m)),
                 help=_("random: one layer of seeded weights over tokenizer-free tokens. A pretrained model reads "
                        "WordPiece tokens through all its layers, offline."))
    pretrained = st.session_state["model"] != "random"
    if pretrained:
        layers = _layer_count(st.session_state["model"])
        if not 0 <= int(st.session_state.get("layer", 0)) < layers:
            st.session_state["layer"] = 0
        sb.selectbox(_("Layer"), list(range(layers)), key="layer", help=_("Which layer's attention the views show."))
    only = (lambda text: text + " " + _("(the random model only)")) if pretrained else (lambda text: text)
    if not text_page:
        only = lambda text: text + " " + _("(text pages only)")  # noqa: E731
    off = pretrained or not text_page
    c1, c2 = sb.columns(2)
    c1.selectbox("d_model", D_MODELS, key="d_model", disabled=pretrained,
                 help=only(_("Width E of the embeddings and of the output.")))
    c2.selectbox(_("Heads"), head_choices(int(st.session_state["d_model"])), key="heads", disabled=pretrained,
                 help=only(_("Only counts that divide d_model: each head gets d_model / heads features.")))
    sb.selectbox(_("Mask"), MASK_KINDS, key="mask", format_func=lambda k: t(MASK_NAMES[k]), disabled=not text_page,
                 help=_("causal: no looking ahead; padding: pads are never keys; window: |i−j| ≤ w. "
                        "Every mask but 'none' also blocks [PAD] keys."))
    c1, c2 = sb.columns(2)
    c1.number_input(_("Window"), min_value=0, max_value=MAX_TOKENS, step=1, key="window", disabled=not text_page,
                    help=_("Local window: query i sees keys j with |i − j| ≤ window."))
    c2.number_input(_("Pad to"), min_value=0, max_value=MAX_TOKENS, step=1, key="pad_to", disabled=not text_page,
                    help=_("Pad every sentence to at least this many tokens with [PAD]."))
    devices = available_devices()
    labels = {d.name: d.label for d in devices}
    if st.session_state.get("device") not in labels:
        st.session_state["device"] = "cpu"
    sb.selectbox(_("Device"), list(labels), key="device", format_func=labels.get,
                 help=_("Where the computation runs. Only devices found on this machine."))
    c1, c2 = sb.columns(2)
    c1.number_input(_("Seed"), min_value=0, max_value=MAX_SEED, step=1, key="seed", disabled=pretrained,
                    help=only(_("Seeds the projection weights and dropout: same seed, same numbers.")))
    c2.selectbox(_("Tokens"), MODES, key="tokenize", disabled=off,
                 help=only(_("auto: words, and one token per CJK character; word; char.")))
    sb.slider(_("Dropout p"), min_value=0.0, max_value=MAX_DROPOUT, step=0.05, key="dropout", disabled=off,
              help=only(_("Dropout on the weights (off by default); seeded, so reproducible.")))
    sb.toggle(_("Q/K/V projections"), key="projections", disabled=off,
              help=only(_("Off: Q = K = V = X, no learned projections, so attention is plain similarity of the "
                          "inputs.")))
    sb.toggle(_("Positional encoding"), key="positional", disabled=off,
              help=only(_("Add sinusoidal position vectors to the token embeddings.")))
    sb.selectbox(_("Colour scale"), COLOR_SCALES, key="colors",
                 help=_("Viridis and Cividis read well for colour-blind viewers and in greyscale."))
    sb.toggle(_("Presenter mode"), key="present",
              help=_("Large fonts, collapsed sidebar, one view per screen — for a projector."))


_PICKED = "_attnviz_picked"  # the pick already acted on (a selection persists across reruns)
_PENDING = "_attnviz_pending"  # widget values picked on a chart, applied at the next run's start


def pick(values: dict, token: object) -> None:
    """Set widgets from a click on a chart or a table row. Those widgets are drawn already
    in this run, so the values are applied at the start of the next one (``load``);
    ``token`` names the pick, so a selection that persists across reruns acts once."""
    ss = st.session_state
    if ss.get(_PICKED) == token:
        return
    ss[_PICKED] = token
    ss.setdefault(_PENDING, {}).update(values)
    st.rerun()


def open_head(layer: int, head: int, token: object) -> None:
    """Show one layer's head enlarged (from the model view or the head table)."""
    layer_of = {"layer": layer} if st.session_state.get("model", "random") != "random" else {}
    pick({**layer_of, "head": head, "view": "head"}, token)


def forget_pick() -> None:
    st.session_state.pop(_PICKED, None)


def presenter_hint() -> None:
    """Presenter mode collapses the sidebar when a page opens with it; switched on later,
    the sidebar stays where it is, so say how to close it."""
    ss = st.session_state
    if ss.get("present") and not ss.get(_PRESENT_AT_LOAD):
        st.info(_("Presenter mode is on: close the sidebar with the « button at its top (or press Esc while it "
                  "has focus). A link with present=1 opens with the sidebar closed."), icon=":material/slideshow:")
