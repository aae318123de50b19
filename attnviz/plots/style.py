"""Figure style shared by every chart: colour scales, themes, the layout every figure
starts from, and token labels made safe and unique.

Token labels are user text. Plotly renders a subset of HTML in labels (``<b>``,
``<a href>``), so every label is HTML-escaped here and shows literally. Repeated tokens
("the ... the") get invisible zero-width suffixes so that Plotly's categorical axes keep
one row/column per position instead of merging them.

Figures are written as plain dicts and wrapped in ``go.Figure`` without Plotly's
per-property validation (``_validate=False``): validating a figure and its template
costs ~10 ms, building it this way ~0.3 ms, and a server rebuilds figures for every
session. ``tests/test_figures.py`` validates every builder's output instead.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

import plotly.graph_objects as go
import plotly.io as pio
from plotly.basedatatypes import BaseFigure

COLOR_SCALES = ("Viridis", "Cividis", "Magma", "Blues", "Greys", "Hot")  # first: colour-blind safe


DIVERGING = "RdBu_r"


THEMES = {"light": "plotly_white", "dark": "plotly_dark"}


# Beyond this many rows/columns, grid views are max-pooled to stay light in a browser.
DEFAULT_MAX_CELLS = 96


@dataclass(frozen=True)
class FigureStyle:
    colors: str = COLOR_SCALES[0]
    theme: str = "light"
    font_size: int = 12  # presenter mode raises this
    width: int | None = None
    height: int | None = None
    lang: str = "en"  # the language of titles and labels (part of a cached figure's key)


def escape_label(token: str) -> str:
    """Show ``token`` literally in Plotly text (no tags, no links, no entities)."""
    return html.escape(token, quote=True)


# Invisible characters used as digits to tell repeated labels apart (not U+200D, the
# zero-width joiner, which would fuse with an emoji label).
_INVISIBLE_DIGITS = ("\u200b", "\u200c", "\u2060", "\ufeff")


def invisible_suffix(k: int) -> str:
    """The k-th repeat's suffix: k written in base 4 with invisible digits ('' for k = 0)."""
    out = ""
    while k:
        k, d = divmod(k, len(_INVISIBLE_DIGITS))
        out += _INVISIBLE_DIGITS[d]
    return out


def axis_labels(tokens: list[str]) -> list[str]:
    """Escaped labels, made unique by invisible suffixes so no two positions merge.

    The suffix grows with log(repeats), so 512 copies of one token stay cheap.
    """
    seen: dict[str, int] = {}
    out = []
    for t in tokens:
        lab = escape_label(t)
        k = seen.get(lab, 0)
        seen[lab] = k + 1
        out.append(lab + invisible_suffix(k))
    return out


def plain_label(label: str) -> str:
    """A label without its invisible suffix (for tests and tables)."""
    return label.rstrip("".join(_INVISIBLE_DIGITS))


_TEMPLATE_CACHE: dict[str, dict] = {}


_SCALE_CACHE: dict[str, list] = {}


def colorscale(name: str) -> list:
    """A named scale as explicit [position, colour] stops. Plotly's Python names
    ("Magma", "RdBu_r") are not all known to plotly.js, and the figures skip the
    validation that would expand them."""
    if name not in _SCALE_CACHE:
        from plotly.colors import get_colorscale

        _SCALE_CACHE[name] = [[pos, _not_a_placeholder(c)] for pos, c in get_colorscale(name)]
    return _SCALE_CACHE[name]


def _not_a_placeholder(color: str) -> str:
    """Streamlit's frontend treats colours "#000001"… as placeholders for its theme and
    swaps them for theme colours, whatever the chart's theme: Magma's first stop,
    "#000004", came out purple. Nudge such a colour by one step of red (invisible)."""
    return "#01" + color[3:] if re.fullmatch(r"#0000[0-9a-fA-F]{2}", color) else color


def template(theme: str) -> dict:
    """The theme's Plotly template as a plain dict, prepared once per process."""
    name = THEMES.get(theme, THEMES["light"])
    if name not in _TEMPLATE_CACHE:
        _TEMPLATE_CACHE[name] = pio.templates[name].to_plotly_json()
    return _TEMPLATE_CACHE[name]


class PlainFigure(BaseFigure):
    """A figure kept as the plain dicts its builder wrote (``plain_figures``): for a server
    that only serialises it. ``st.plotly_chart`` reads nothing but ``to_dict()``; anything
    else a ``go.Figure`` offers (``.layout``, ``update_layout``) is not there."""

    def __init__(self, data: list[dict], layout: dict) -> None:  # no BaseFigure.__init__: no copies
        object.__setattr__(self, "_spec", {"data": data, "layout": layout})

    def to_dict(self) -> dict:
        return self._spec


_PLAIN: ContextVar[bool] = ContextVar("attnviz_plain_figures", default=False)


@contextmanager
def plain_figures() -> Iterator[None]:
    """Within it, ``figure`` returns a ``PlainFigure``: wrapping a builder's dicts in a
    ``go.Figure`` deep-copies them, every label and the theme's template included
    (0.44 ms of a grid's 0.77), for a page that only sends the figure on. For builders
    that return ``figure(...)`` as it is (not one that adds to it afterwards)."""
    token = _PLAIN.set(True)
    try:
        yield
    finally:
        _PLAIN.reset(token)


def figure(data: list[dict], layout: dict) -> go.Figure:
    """Wrap plain trace and layout dicts without re-validating them (see the module doc)."""
    if _PLAIN.get():
        return PlainFigure(data, layout)
    return go.Figure(data=data, layout=layout, _validate=False)


def layout_for(layout: dict, style: FigureStyle, title: str, *, top_axis: bool = False,
               room: dict[str, int] | None = None) -> dict:
    """``room``: the left, right or bottom margin a builder reserved for its labels, colour
    bar or legend (``attnviz.plots.margins``), so that Plotly draws the figure once."""
    # A key axis drawn on top needs room between it and the title.
    top = 60 + style.font_size + (6 * style.font_size if top_axis else 0)
    layout.update(
        template=template(style.theme),
        title={"text": title, "font": {"size": round(style.font_size * 1.3)}},
        font={"size": style.font_size},
        margin={"l": 10, "r": 10, "t": top, "b": 10, **(room or {})},
    )
    # An explicit size wins; otherwise keep the height a builder chose for its content.
    if style.width is not None:
        layout["width"] = style.width
    if style.height is not None:
        layout["height"] = style.height
    return layout
