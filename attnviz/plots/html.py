"""HTML for notebooks and files, offline (no CDN, no require.js), one unique div id per
figure so several views in one notebook never collide.

- Notebook outputs (``_repr_html_`` and ``html_action="view"``): the first view of a kernel
  session carries plotly.js (it sets ``window.Plotly``); later views carry only their data and
  draw with the plotly.js that the first view's output put on the page. The output is saved
  with the notebook, so on reopen the first view's script defines ``window.Plotly`` again and
  the later views (which wait for it) draw. ``include_plotlyjs()`` makes the next view carry
  plotly.js again (after clearing the first view's output).
- The figures' data travel in a compact form (``compact``): heatmap weights as 2-byte values
  (uint16, quantised over the trace's range, error ≤ 1e-5 so that hover's 4 decimals hold;
  a wider range stays float32), and a typed array repeated across traces is sent once.
- ``Rendered.data`` (``html_action="return"``), ``Rendered.save`` and ``to_html`` are
  self-contained: plotly.js inline, always.
"""

from __future__ import annotations

import base64
import importlib
import json
import uuid
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio

CONFIG = {"displaylogo": False, "responsive": True}
QUANT_MAX_ERROR = 1e-5  # hover reads %{z:.4f}: a quantised weight must stay within this of its value
_Q = 65534  # uint16 levels 0.._Q; 65535 marks a gap (NaN)
LIST_SHARED = 16  # a plain list this long (tick labels) is kept once, however many traces hold it
WAIT_MS = 120_000  # how long a light view waits for plotly.js before it says what is missing

_session = {"library_sent": False}


@lru_cache(maxsize=1)
def plotly_script() -> str:
    """plotly.js itself, inline (about 4.8 MB; it sets ``window.Plotly``)."""
    from plotly.offline import get_plotlyjs

    return f'<script type="text/javascript">{get_plotlyjs()}</script>'


def include_plotlyjs() -> None:
    """The next notebook view carries plotly.js again (as the first of a session does): call
    it after clearing the output of the view that carried it."""
    _session["library_sent"] = False


def new_id(prefix: str = "attnviz") -> str:
    return f"{prefix}-{uuid.uuid4().hex}"


def figure_div(fig: go.Figure, div_id: str | None = None) -> str:
    """One figure as a div and the script that draws it (plotly.js must already be on the page)."""
    return pio.to_html(fig, include_plotlyjs=False, full_html=False, div_id=div_id or new_id(), config=CONFIG)


def fragment(figures: list[go.Figure]) -> str:
    """A self-contained HTML fragment: plotly.js, then every figure, in one div."""
    divs = "\n".join(figure_div(f) for f in figures)
    return f'<div class="attnviz-notebook" id="{new_id()}">\n{plotly_script()}\n{divs}\n</div>'


# ---- compact data -------------------------------------------------------------------------

def _shape(spec: dict, n: int) -> list[int]:
    s = spec.get("shape")
    if s is None:
        return [n]
    return [int(x) for x in (s.split(",") if isinstance(s, str) else s)]


def _quantised(spec: dict) -> dict:
    """A float typed-array spec as uint16 over its finite range, where that keeps every value
    within QUANT_MAX_ERROR; otherwise the spec unchanged."""
    if spec.get("dtype") not in ("f4", "f8"):
        return spec
    v = np.frombuffer(base64.b64decode(spec["bdata"]), dtype="<" + spec["dtype"]).astype(np.float64)
    finite = np.isfinite(v)
    if not finite.any():
        return spec
    lo, hi = float(v[finite].min()), float(v[finite].max())
    step = (hi - lo) / _Q or 1.0
    if step / 2 > QUANT_MAX_ERROR:
        return spec
    q = np.full(v.shape, 65535, dtype="<u2")
    q[finite] = np.rint((v[finite] - lo) / step).astype("<u2")
    return {"attnviz_u2": base64.b64encode(q.tobytes()).decode("ascii"), "lo": lo, "step": step,
            "shape": _shape(spec, v.size)}


def decode_u2(spec: dict) -> np.ndarray:
    """What the page's script makes of a quantised spec (for tests): float32, NaN at gaps."""
    q = np.frombuffer(base64.b64decode(spec["attnviz_u2"]), dtype="<u2")
    out = (spec["lo"] + q.astype(np.float64) * spec["step"]).astype(np.float32)
    out[q == 65535] = np.nan
    return out.reshape(spec["shape"])


def compact(fig: go.Figure) -> dict:
    """The figure's JSON with float heatmap data quantised to 2 bytes a value and every typed
    array that repeats (the head index of each layer's grid) kept once in ``blobs``."""
    spec = json.loads(pio.to_json(fig, validate=False))
    blobs: list[dict] = []
    seen: dict[str, int] = {}

    def keep(s: dict) -> dict:
        k = json.dumps(s, sort_keys=True)
        if k not in seen:
            seen[k] = len(blobs)
            blobs.append(s)
        return {"attnviz_blob": seen[k]}

    def walk(v, key=""):
        if isinstance(v, list):
            if len(v) >= LIST_SHARED and all(isinstance(x, (str, int, float)) for x in v):
                return keep({"attnviz_list": v})  # the axes' labels, the same in every layer
            return [walk(x) for x in v]
        if not isinstance(v, dict):
            return v
        if "bdata" in v and "dtype" in v:
            return keep(_quantised(v) if key == "z" else v)
        return {k: walk(x, k) for k, x in v.items()}

    data = walk(spec.get("data", []))
    return {"data": data, "layout": spec.get("layout", {}), "blobs": blobs}


# The page side of ``compact``: defined once per page by every light view (it is small).
_DRAW_JS = """window.attnvizDraw = window.attnvizDraw || function (id, p) {
  function blob(s) {
    if ("attnviz_list" in s) return s.attnviz_list;
    if (!("attnviz_u2" in s)) return s;  // a plotly typed-array spec: plotly.js decodes it
    var b = atob(s.attnviz_u2), u8 = new Uint8Array(b.length);
    for (var i = 0; i < b.length; i++) u8[i] = b.charCodeAt(i);
    var q = new Uint16Array(u8.buffer), f = new Float32Array(q.length);
    for (var i = 0; i < q.length; i++) f[i] = q[i] === 65535 ? NaN : s.lo + q[i] * s.step;
    if (s.shape.length < 2) return f;
    var rows = [], n = s.shape[1];
    for (var r = 0; r < s.shape[0]; r++) rows.push(f.subarray(r * n, (r + 1) * n));
    return rows;
  }
  var cache = {};
  function walk(v) {
    if (Array.isArray(v)) return v.map(walk);
    if (v === null || typeof v !== "object") return v;
    if ("attnviz_blob" in v) {
      var k = v.attnviz_blob;
      if (!(k in cache)) cache[k] = blob(p.blobs[k]);
      return Array.isArray(cache[k]) ? cache[k].slice() : cache[k];
    }
    var o = {};
    for (var key in v) o[key] = walk(v[key]);
    return o;
  }
  return Plotly.newPlot(id, walk(p.data), p.layout, %s);
};""" % json.dumps(CONFIG)


def _light_div(fig: go.Figure) -> str:
    div_id = new_id()
    payload = json.dumps(compact(fig), separators=(",", ":")).replace("<", "\\u003c")
    msg = ("attnviz: plotly.js is not on this page. The notebook's first attnviz view carries it: "
           "re-run that cell, or call attnviz.notebook.include_plotlyjs() and re-run this one.")
    return (f'<div id="{div_id}" class="plotly-graph-div" style="height:100%; width:100%;"></div>\n'
            f'<script type="text/javascript">(function () {{ var p = {payload}, t0 = Date.now();\n'
            f'(function go() {{ if (window.Plotly && window.attnvizDraw) return window.attnvizDraw("{div_id}", p);\n'
            f'if (Date.now() - t0 > {WAIT_MS}) {{ var d = document.getElementById("{div_id}"); '
            f'if (d) d.textContent = {json.dumps(msg)}; return; }}\n'
            f'setTimeout(go, 50); }})(); }})();</script>')


def notebook_fragment(figures: list[go.Figure], *, with_library: bool | None = None) -> str:
    """A notebook output: plotly.js only in the session's first (or ``with_library``), the
    figures' data compact."""
    if with_library is None:
        with_library = not _session["library_sent"]
    if with_library:
        _session["library_sent"] = True
    lib = plotly_script() + "\n" if with_library else ""
    divs = "\n".join(_light_div(f) for f in figures)
    return (f'<div class="attnviz-notebook" id="{new_id()}">\n{lib}<script type="text/javascript">{_DRAW_JS}</script>\n'
            f'{divs}\n</div>')


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
    """What a notebook view returns: ``.data`` is self-contained HTML (as BertViz's returned
    object's ``.data``), ``.figures`` the Plotly figures; Jupyter shows it through
    ``_repr_html_``, which is light after the session's first view."""

    figures: list[go.Figure]
    _data: str = field(default="", repr=False)

    @property
    def data(self) -> str:
        if not self._data:
            self._data = fragment(self.figures)
        return self._data

    @property
    def figure(self) -> go.Figure:
        return self.figures[0]

    def _repr_html_(self) -> str:
        return notebook_fragment(self.figures)

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
    display.display(display.HTML(notebook_fragment(rendered.figures)))
    return None
