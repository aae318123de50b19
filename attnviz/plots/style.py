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

# The figures' font, named so that every machine draws the same widths: Plotly's own family
# ("Open Sans", Verdana, Arial, sans-serif) is Arial's metrics where Liberation Sans is
# installed (it comes with Debian's Chromium) and DejaVu Sans's where it is not, and the
# room reserved for labels (``attnviz.plots.margins``) is measured in DejaVu Sans. Verdana,
# of the same design, where DejaVu Sans is missing (Windows, macOS).
FONT_FAMILY = "DejaVu Sans, Verdana, sans-serif"


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

    @property
    def presenting(self) -> bool:
        return presenting(self.font_size)


def presenting(font_size: int) -> bool:
    """Whether a figure is drawn for a projector: presenter mode raises the font over the laptop's 14 px."""
    return font_size > 14


# The tallest chart in presenter mode: a projector's screen (1024 × 768) holds it whole, with the line above it.
PROJECTOR_CHART_PX = 680
# A page's first chart in presenter mode, under the title and one row of controls (its top at about 330 px): the
# first screen of a 1024 × 768 projector holds it whole.
PROJECTOR_FIRST_CHART_PX = 400


def fit_screen(layout: dict) -> dict:
    """``layout`` (a figure's plain dict's, changed in place) at most one projector screen tall where its text is
    presenter mode's (a font over 14 px); a laptop's figure as it is."""
    height, size = layout.get("height"), (layout.get("font") or {}).get("size") or 12
    if height and presenting(size) and height > PROJECTOR_CHART_PX:
        layout["height"] = PROJECTOR_CHART_PX
    return layout


def rows_down(n: int) -> dict:
    """A categorical y axis of ``n`` rows, the first at the top, as a fixed range.

    ``"autorange": "reversed"`` draws the same, but plotly.js rewrites it in the figure as
    it draws, so a copy of the drawn figure handed to ``Plotly.react`` reads as a changed
    axis and is drawn again (``apply_template`` says when that happens)."""
    return {"range": [n - 0.5, -0.5]}


def escape_label(token: str) -> str:
    """Show ``token`` literally in Plotly text (no tags, no links, no entities).

    Only ``&``, ``<`` and ``>`` are escaped: they are what Plotly's text markup reads, and it
    decodes ``&amp; &lt; &gt;`` (and numeric entities) back. Quotes are not markup outside a tag,
    and Plotly does not decode ``&quot;``: escaped, ``"`` showed as ``&quot;``."""
    return html.escape(token, quote=False)


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


# Half a line of nothing under a colour bar's title: Plotly sets the bar below its title's last line, and the
# label of the bar's top tick reaches half a line above the bar, where it ran into the title ("weight" over
# "1" by 2 px at 12 px type, 3 at 16, 7 at 24). Beside the bar instead (side "right"), Plotly set a Chinese
# title over the tick labels.
_UNDER_BAR_TITLE = "<br><span style='font-size:50%'>&nbsp;</span>"


def colour_bar(title: str, **more) -> dict:
    """A colour bar's settings: its title above the bar and clear of the top tick's label."""
    return {"title": {"text": title + _UNDER_BAR_TITLE if title else title}, **more}


def short_bar_ticks(plot_px: float, font_size: int, lo: float = 0.0, hi: float = 1.0) -> dict:
    """A colour bar's ticks where its bar is too short for three tick labels a line and a half apart (eight font
    heights; the bar is its plot's height, ``plot_px``, less its title's three lines): its two ends only; else none
    given (Plotly's own 0, 0.5, 1 ran together on a chart of a few rows)."""
    return {"tickvals": [lo, hi]} if plot_px - 3 * font_size < 8 * font_size else {}


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


# A template's layout keys that style every subplot of their kind (xaxis: xaxis, xaxis2, ...).
_SUBPLOT_KINDS = ("xaxis", "yaxis", "coloraxis", "geo", "polar", "scene", "ternary", "mapbox", "map", "smith")
# A template's defaults for each item of a layout array: "annotationdefaults" styles every annotation.
_ITEM_DEFAULTS = {"annotationdefaults": "annotations", "shapedefaults": "shapes", "imagedefaults": "images",
                  "sliderdefaults": "sliders", "updatemenudefaults": "updatemenus",
                  "selectiondefaults": "selections"}
# Traces that are drawn on no x/y axes (every other kind is, as plotly.js's "cartesian" category).
_NOT_CARTESIAN = frozenset({"pie", "table", "parcoords", "parcats", "sankey", "sunburst", "treemap", "icicle",
                            "funnelarea", "indicator", "barpolar", "scatterpolar", "scatterpolargl", "scattergeo",
                            "choropleth", "scatter3d", "surface", "mesh3d", "cone", "streamtube", "volume",
                            "isosurface", "scatterternary", "scattermap", "scattermapbox", "choroplethmap",
                            "choroplethmapbox", "densitymap", "densitymapbox", "scattersmith", "carpet"})


def under(default, value):
    """``value`` laid over ``default``: dicts merge key by key, ``value`` winning; anything
    else (a list, an array, a number) is ``value`` as it is. New dicts; neither is changed."""
    if isinstance(default, dict) and isinstance(value, dict):
        merged = dict(default)
        for k, v in value.items():
            merged[k] = under(default[k], v) if k in default else v
        return merged
    return value


# An axis's switches that plotly.js turns on when the figure itself (not its template) sets
# one of their values: written out, the template's colours would turn them on, so each is
# written too, as plotly.js would have set it. Off by default: the line; the grid and zero
# line of the axis along which bars (and other oriented traces) stand; on for other axes.
_IMPLIED = {"showline": ("linecolor", "linewidth"), "showgrid": ("gridcolor", "gridwidth", "griddash"),
            "zeroline": ("zerolinecolor", "zerolinewidth")}
_ORIENTED = frozenset({"bar", "box", "violin", "histogram", "funnel", "waterfall"})


def _axis_under(default: dict, own: dict, grid: bool) -> dict:
    axis = under(default, own)
    for switch, setters in _IMPLIED.items():
        if switch not in own and any(k in default for k in setters):
            axis[switch] = any(k in own for k in setters) or (grid and switch != "showline")
    return axis


def _axis(trace: dict, letter: str) -> str:
    """The layout key of the ``letter`` axis a trace is drawn on ("x2" -> "xaxis2")."""
    return letter + "axis" + str(trace.get(letter + "axis", letter))[1:]


def apply_template(data: list[dict], layout: dict) -> tuple[list[dict], dict]:
    """The figure with its template's values written where plotly.js would apply them, and
    no ``template`` left: the same picture, drawn once.

    A page's chart component may hand ``Plotly.react`` a copy (through JSON) of a figure it
    has just drawn, as Streamlit's does to apply its theme (``ui.compute.drawn_once``).
    plotly.js compares a layout's ``template`` by identity, so the copy redrew the whole
    figure. Written out, the template's values are plain values, compared by value. The
    rules are plotly.js's: ``layout.xaxis`` of a template styles every x axis (those a
    trace uses as well as those the layout names), ``annotationdefaults`` every annotation,
    ``data.<type>[i]`` the i-th trace of that type (cycling); the figure's own values always
    win. ``tests/test_drawn_once.py`` draws every view both ways and compares the pixels.
    """
    tpl = layout.get("template")
    if not isinstance(tpl, dict):
        return data, layout
    t_layout, t_data = tpl.get("layout") or {}, tpl.get("data") or {}
    out = {k: v for k, v in layout.items() if k != "template"}
    cartesian = [t for t in data if t.get("type", "scatter") not in _NOT_CARTESIAN]
    used = {_axis(t, "x") for t in cartesian} | {_axis(t, "y") for t in cartesian}
    used |= {str(t["coloraxis"]) for t in data if isinstance(t.get("coloraxis"), str)}
    no_grid = {_axis(t, "y" if t.get("orientation") == "h" else "x") for t in data if t.get("type") in _ORIENTED}
    for key, value in t_layout.items():
        if key in _ITEM_DEFAULTS:
            items = out.get(_ITEM_DEFAULTS[key])
            if isinstance(items, (list, tuple)) and items:
                out[_ITEM_DEFAULTS[key]] = [under(value, item) for item in items]
        elif key in _SUBPLOT_KINDS:
            names = {k for k in out if k == key or (k.startswith(key) and k[len(key):].isdigit())}
            names |= {k for k in used if k.startswith(key)}
            for name in sorted(names):
                out[name] = (_axis_under(value, out.get(name, {}), name not in no_grid) if key in ("xaxis", "yaxis")
                             else under(value, out.get(name, {})))
        else:
            out[key] = under(value, out[key]) if key in out else value
    seen: dict[str, int] = {}
    traces = []
    for trace in data:
        kind = trace.get("type", "scatter")
        defaults = t_data.get(kind) or ()
        if defaults:
            i = seen.get(kind, 0)
            seen[kind] = i + 1
            trace = under({k: v for k, v in defaults[i % len(defaults)].items() if k != "type"}, trace)
        traces.append(trace)
    return traces, out


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


TITLE_LINE_EM = 50  # the characters of a title line that a projector's full-width chart holds at presenter size
_BREAKS = (" — ", " · ", ", ", ": ", " ")  # where a title line may break, the stronger first


def title_line_px(font_size: int) -> int:
    """The height of one line of a chart title (drawn at 1.3 × the font, lines 1.3 apart)."""
    return round(font_size * 1.3 * 1.3)


def wrap_title(title: str, font_size: int) -> str:
    """``title`` in lines that fit a full-width chart: at presenter mode's size (a font over 14 px) a
    line longer than ``TITLE_LINE_EM`` characters breaks (``<br>``) at its last separator that
    keeps the first part in bounds (Plotly draws a title on one line, and a 1024 px projector cut
    "… float32 on cp"). At the laptop's size titles stay as written."""
    if not presenting(font_size):
        return title
    limit = round(TITLE_LINE_EM * 24 / font_size)
    lines = []
    for line in title.split("<br>"):
        while len(line) > limit:
            # The strongest separator in the line's second half, else the last space.
            found = [(b, line.rfind(b, 0, limit)) for b in _BREAKS]
            sep, cut = next(((b, i) for b, i in found if i > limit // 2), found[-1])
            if cut <= 0:
                break  # one long word: Plotly's own clip beats a break inside it
            lines.append(line[:cut + len(sep.rstrip())])
            line = line[cut + len(sep):]
        lines.append(line)
    return "<br>".join(lines)


def layout_for(layout: dict, style: FigureStyle, title: str, *, top_axis: bool = False,
               room: dict[str, int] | None = None, note_lines: int = 0) -> dict:
    """``room``: the left, right or bottom margin a builder reserved for its labels, colour
    bar or legend (``attnviz.plots.margins``), so that Plotly draws the figure once.
    ``note_lines``: the lines of a note a builder sets between the title and the plot (an
    annotation anchored at the plot's top, as Q/K map's agreement line)."""
    wrapped = wrap_title(title, style.font_size)
    line_px = title_line_px(style.font_size)
    added = wrapped.count("<br>") - title.count("<br>")  # lines a projector's width broke off
    # A key axis drawn on top needs room between it and the title; so does each further line
    # of a title (``<br>``) above the first, and twice that for each line the wrap added (Plotly
    # centres the lines from the first down: a second line ran into Image patches' panel titles).
    top = (60 + style.font_size + (6 * style.font_size if top_axis else 0)
           + title.count("<br>") * line_px + 2 * added * line_px
           + 2 * note_lines * round(1.3 * style.font_size))  # twice, as the wrap's: the title is centred above
    title = wrapped
    if added and "height" in layout:  # a builder's height keeps its plot: the room comes on top
        layout["height"] += 2 * added * line_px
    layout.update(
        template=template(style.theme),
        title={"text": title, "font": {"size": round(style.font_size * 1.3)},
               # a key axis on top: the title at the figure's top, whatever room the labels below it take
               # (Plotly's default centres it in the top margin, onto the axis title of long labels)
               **({"y": 1, "yref": "container", "yanchor": "top", "pad": {"t": 28}} if top_axis else {})},
        font={"family": FONT_FAMILY, "size": style.font_size},
        margin={"l": 10, "r": 10, "t": top, "b": 10, **(room or {})},
    )
    # An explicit size wins; otherwise keep the height a builder chose for its content.
    if style.width is not None:
        layout["width"] = style.width
    if style.height is not None:
        layout["height"] = style.height
    return layout
