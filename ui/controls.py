"""Widgets made from the settings' declarations (``attnviz.views.state``).

``control("window")`` draws the setting's widget with its label, help, bounds and
choices as declared once; its key is the link name, so the URL, the session state and
the widget are one value. A page passes only what is about the layout (a column, a
height) or what the run decides (the options of ``head`` come from the run's heads).
"""

from __future__ import annotations

import streamlit as st

from attnviz.i18n import N_, _
from attnviz.views.state import SETTINGS

MASK_NAMES = {"none": N_("none"), "causal": N_("causal"), "padding": N_("padding"), "window": N_("window"),
              "causal+window": N_("causal+window")}


def row(where=None, *, wrap: bool = True):
    """Widgets side by side: one horizontal container (one element on the wire, where
    ``st.columns(2)`` sends three: every element is a message the server handles).
    ``wrap=False`` keeps a pair side by side in the narrow sidebar."""
    return (where or st).container(horizontal=True, gap="small", wrap=wrap)


def label_of(name: str) -> str:
    spec = SETTINGS[name].spec
    return _(spec.label) if spec.label else name


def help_of(name: str, **values) -> str | None:
    spec = SETTINGS[name].spec
    return _(spec.help).format(**values) if spec.help else None


def control(name: str, where=None, *, kind: str | None = None, options=None, bounds=None, suffix: str = "",
            **kw):
    """The widget of setting ``name`` in ``where`` (default: the page). ``kind`` overrides
    the widget (``"slider"``, ``"text_area"``, ``"segmented"``, ``"multiselect"``);
    ``options`` and ``bounds`` narrow the declared ones (a bound that comes from the run)."""
    where = where or st
    spec = SETTINGS[name].spec
    if name not in st.session_state:  # without its value a widget would start from its own default, not the link's
        raise KeyError(f"The setting {name!r} is drawn on a page that does not read it (its entry's reads, or its own "
                       "declaration's pages), so ui.session.keep() did not put it in the session state.")
    label = kw.pop("label", None) or label_of(name)
    help_text = kw.pop("help", None) or help_of(name, **kw.pop("help_values", {}))
    if help_text and suffix:
        help_text = f"{help_text} {suffix}"
    common = dict(key=name, help=help_text, **kw)
    if spec.kind is bool:
        return where.toggle(label, **common)
    choices = list(options) if options is not None else list(spec.options())
    if kind == "multiselect":
        return where.multiselect(label, choices, **common)
    if kind == "segmented":
        return where.segmented_control(label, choices, required=True, **common)
    if choices:
        return where.selectbox(label, choices, **common)
    lo, hi = bounds if bounds is not None else spec.bounds()
    if spec.kind is float or kind == "slider":
        return where.slider(label, min_value=lo, max_value=hi, **common)
    if spec.kind is int:
        common.setdefault("step", 1)
        return where.number_input(label, min_value=int(lo), max_value=int(hi), **common)
    if kind == "text_area":
        return where.text_area(label, **common)
    return where.text_input(label, **common)

