"""Self-contained HTML for notebooks and files: plotly.js embedded (works offline, no CDN,
no require.js), one unique div id per figure so several views in one notebook never collide.
"""

from __future__ import annotations

import importlib
import uuid
from dataclasses import dataclass, field
from functools import lru_cache

import plotly.graph_objects as go
import plotly.io as pio

CONFIG = {"displaylogo": False, "responsive": True}


@lru_cache(maxsize=1)
def plotly_script() -> str:
    """plotly.js itself, inline (about 4.8 MB; it sets ``window.Plotly``)."""
    from plotly.offline import get_plotlyjs

    return f'<script type="text/javascript">{get_plotlyjs()}</script>'


def new_id(prefix: str = "attnviz") -> str:
    return f"{prefix}-{uuid.uuid4().hex}"


def figure_div(fig: go.Figure, div_id: str | None = None) -> str:
    """One figure as a div and the script that draws it (plotly.js must already be on the page)."""
    return pio.to_html(fig, include_plotlyjs=False, full_html=False, div_id=div_id or new_id(), config=CONFIG)


def fragment(figures: list[go.Figure]) -> str:
    """An HTML fragment for a notebook cell: plotly.js, then every figure, in one div."""
    divs = "\n".join(figure_div(f) for f in figures)
    return f'<div class="attnviz-notebook" id="{new_id()}">\n{plotly_script()}\n{divs}\n</div>'


def to_html(figures, *, title: str = "attnviz") -> str:
    """One self-contained HTML page holding ``figures`` (a figure, a list of them, or a
    ``Rendered``): plotly.js is embedded once, nothing is fetched."""
    if isinstance(figures, Rendered):
        figures = figures.figures
    elif isinstance(figures, go.Figure):
        figures = [figures]
    figures = list(figures)
    if not figures or not all(isinstance(f, go.Figure) for f in figures):
        raise ValueError("to_html needs one or more plotly Figures.")
    from html import escape

    return ("<!DOCTYPE html>\n<html>\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>{escape(title)}</title>\n</head>\n<body>\n{fragment(figures)}\n</body>\n</html>\n")


@dataclass
class Rendered:
    """What a notebook view returns: ``.data`` is the HTML (as BertViz's returned object's
    ``.data``), ``.figures`` the Plotly figures; Jupyter shows it through ``_repr_html_``."""

    figures: list[go.Figure]
    data: str = field(default="", repr=False)

    def __post_init__(self) -> None:
        if not self.data:
            self.data = fragment(self.figures)

    @property
    def figure(self) -> go.Figure:
        return self.figures[0]

    def _repr_html_(self) -> str:
        return self.data

    def __str__(self) -> str:
        return self.data

    def save(self, path) -> None:
        """Write a self-contained HTML page."""
        with open(path, "w", encoding="utf-8") as f:
            f.write(to_html(self.figures))


HTML_ACTIONS = ("view", "return")


def check_action(html_action: str) -> None:
    if html_action not in HTML_ACTIONS:
        raise ValueError(f"'html_action' parameter must be 'view' or 'return', not {html_action!r}.")


def deliver(rendered: Rendered, html_action: str):
    """"return": the ``Rendered``; "view": shown with IPython.display when IPython is there
    (returning None, as BertViz does), else the ``Rendered``."""
    check_action(html_action)
    if html_action == "return":
        return rendered
    try:  # optional: only notebooks have IPython, so it is found at run time, not declared
        display = importlib.import_module("IPython.display")
    except ImportError:
        return rendered
    display.display(display.HTML(rendered.data))
    return None
