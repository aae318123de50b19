"""Cached computation, cached figures and error display shared by the pages.

One server process serves every session, so the caches here are process-wide and
keyed on plain values (a config, a view, a style):

- results: the process's one results cache (``attnviz.run.run.RESULTS``, an
  ``attnviz.cache.ByteBudgetCache`` bounded in bytes), computing each config once however
  many students open the same link at the same moment, shared with the roles probe;
- figures: the same kind of cache, so changing only the head, query, view or colours
  sends a figure that is already built;
- at most ``limits.MAX_CONCURRENT_RUNS`` computations run at once, so memory stays
  within (runs at once × the per-run budget) + the cache.
"""

from __future__ import annotations

import base64
import contextvars
import json
import zlib
from collections.abc import Callable, Hashable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import astuple

import numpy as np
import plotly.io as pio
import streamlit as st
from _plotly_utils.basevalidators import is_homogeneous_array
from _plotly_utils.utils import is_skipped_key, plotlyjsShortTypes, to_typed_array_spec

from attnviz import AttentionConfig, AttentionResult, cache
from attnviz.analysis.describe import describe_figure
from attnviz.cache import PLAIN_TYPES
from attnviz.i18n import _, language
from attnviz.limits import MAX_CONCURRENT_RUNS
from attnviz.plots.style import PlainFigure, apply_template, fit_screen, plain_figures
from attnviz.run.run import RESULTS, shared_result
from ui.loading import ready

# A frozen figure's size: the length of its JSON, made once when it is frozen. Its share of the cache
# budget: limits.CACHE_SHARES["figures"].
FIGURES = cache.named("figures", size_of=lambda fig: 2 * len(fig.to_dict().json))


class FrozenSpec(dict):
    """A figure's plain dict, shared read-only, with its JSON made once (its size in the cache)."""

    json: str = ""


_to_json = pio.to_json
# st.plotly_chart serialises its figure with plotly.io.to_json on every rerun. Nothing here replaces that
# function: a frozen figure's JSON (made once, above, for its size) would spare 0.07-0.17 ms a chart on the
# default pages, 1 ms on the image and audio pages and 2.9 ms on the explorer's grid at 120 tokens x 8 heads
# (measured), which is not worth changing Plotly for the whole process.
# The computations run on long-lived worker threads, MAX_CONCURRENT_RUNS at most, not on
# the page's own thread: Streamlit gives every session's run a new thread, and torch sets
# up each new thread that runs an op (its OpenMP team, its caches) once more.
_RUNS = ThreadPoolExecutor(MAX_CONCURRENT_RUNS, thread_name_prefix="attnviz-run")


def on_worker(fn: Callable, *args):
    """``fn(*args)`` on a worker, in this run's context (its language): its value, or its exception."""
    return _RUNS.submit(contextvars.copy_context().run, fn, *args).result()


def cached_result(config: AttentionConfig) -> AttentionResult:
    """The (shared, read-only) result of ``config``, computed on a worker; raises what
    ``compute`` raises (``attnviz.run.run.shared_result``: keyed by the language too)."""
    return shared_result(config, compute_with=on_worker)


def cached(key: Hashable, build: Callable, *, limited: bool = True):
    """Any other derived value (verification, gradients), cached with the results (and,
    as they may hold words, by language).

    ``limited``: count the build against the concurrent-run limit (for heavy work).
    """
    return RESULTS.get_or_compute((key, language()), (lambda: on_worker(build)) if limited else build)


def keeper() -> Callable:
    """``cached`` bound to this run's language, for a background job that fills the cache for later runs (it
    builds in its own thread, not on the compute workers, which stay the sessions')."""
    lang = language()
    return lambda key, build: RESULTS.get_or_compute((key, lang), build)


def result(config: AttentionConfig) -> AttentionResult:
    """The result for ``config``, or a clear message on the page and a stop (or, while its
    model loads in the background, the load's progress and a stop)."""
    ready(config.model)
    return guard(lambda: cached_result(config))


def guard(fn: Callable):
    """``fn()``, or its error as a message on the page and a stop (never a traceback)."""
    try:
        return fn()
    except ValueError as e:
        st.error(str(e), icon=":material/error:")
    except Exception as e:  # noqa: BLE001 - never a traceback in the browser
        st.error(_("The computation failed: {error}").format(error=f"{type(e).__name__}: {e}"),
                 icon=":material/error:")
    st.stop()
    raise AssertionError("unreachable")  # st.stop() raises


def fallback(fn: Callable, instead: Callable, label: str):
    """``fn()``; where a value the user typed or a link gave cannot be read (``ValueError``), a warning that names
    the setting (``label``) and why, and ``instead()`` (the page's own default): the page, its charts and the
    field stay, so the value can be mended where it was typed."""
    try:
        return fn()
    except ValueError as e:
        used = instead()
        st.warning(_("{setting}: {why} Showing {used} instead; mend it in its field.").format(
            setting=label, why=str(e), used=getattr(used, "name", used)), icon=":material/warning:")
        return used


def cached_figure(key: Hashable, build: Callable, *, alt: Callable[[object], str] | None = None,
                  plain: bool = False):
    """A figure built once per ``key`` (plain values: config, view, selection, style),
    with its text alternative (``alt(fig)``, or one generated from the figure).
    ``plain``: the builder returns ``attnviz.plots.style.figure(...)`` as it is, so it can
    be built as plain dicts (``plain_figures``), without a ``go.Figure``'s copies."""
    def made():
        if not plain:
            return build()
        with plain_figures():
            return build()

    return FIGURES.get_or_compute(key, lambda: freeze(made(), alt))


def freeze(fig, alt: Callable[[object], str] | None = None):
    """Compute the figure's plain dict and its text alternative once: ``st.plotly_chart``
    calls ``to_dict()`` on every rerun, which deep-copies the figure and re-encodes each
    array as base64, and describing it reads every cell. The dict is shared read-only
    (Streamlit only serialises it), and made to be drawn once (``drawn_once``)."""
    plain = plain_dict(fig)
    fit_screen(plain["layout"])  # presenter mode: one screen at most
    spec, data_json = _drawn_once(plain)
    frozen = FrozenSpec(spec)
    frozen.json = (spec_json(frozen) if data_json is None else
                   '{"data":' + data_json + ',"layout":' + _plain_json(frozen["layout"]) + "}")
    object.__setattr__(fig, "to_dict", lambda: frozen)
    object.__setattr__(fig, "_attnviz_alt", (alt or describe_figure)(fig))
    # A view's own description is a sentence a person would write: presenter mode shows it under the chart. The
    # generic one (the title and the largest value) stays the chart's accessible name only.
    object.__setattr__(fig, "_attnviz_alt_own", alt is not None)
    return fig


def drawn_once(spec: dict) -> dict:
    """``spec`` as the browser should get it so that its chart is drawn once, not twice.

    Streamlit's chart draws a figure, then applies its theme to a copy made through JSON
    and hands the copy to ``Plotly.react``, which redraws everything it sees changed: the
    template (compared by identity) and, without a ``datarevision``, every data array
    (new arrays are new data). So the template is written into the figure
    (``attnviz.plots.style.apply_template``), and ``layout.datarevision`` names the data:
    the copy has the same one, so plotly.js keeps its arrays; other data have another. A
    heatmap's 2-D arrays are then left alone; a 1-D typed array still counts as changed
    (plotly.js compares those by identity whatever the revision)."""
    return _drawn_once(spec)[0]


def _drawn_once(spec: dict) -> tuple[dict, str | None]:
    """``drawn_once(spec)`` and its traces' JSON (None for a spec left as it was)."""
    if set(spec) - {"data", "layout"}:  # frames (an animation): as Plotly would send it
        return spec, None
    data, layout = apply_template(spec.get("data") or [], spec.get("layout") or {})
    data_json = _data_json(data)
    # The JSON's CRC-32 and length: a name for these data, made in a tenth of the JSON's own time.
    revision = f"{zlib.crc32(data_json.encode()):08x}-{len(data_json):x}"
    return {"data": data, "layout": {**layout, "datarevision": revision}}, data_json


def _encoded(x):
    """``x`` as ``convert_to_base64`` would leave a copy of it, in one pass: every array that
    is a dict's value becomes a typed-array spec; dicts are new, and so are lists and
    tuples that hold containers; a list of only strings and numbers (a figure's labels,
    hundreds of them) is shared, not walked item by item as Plotly's walk and a copy
    would each do."""
    if isinstance(x, dict):
        out = {}
        for k, v in x.items():
            if type(v) in PLAIN_TYPES or is_skipped_key(k):  # Plotly does not convert under a skipped key
                out[k] = v
            elif type(v) is np.ndarray:
                out[k] = _typed(v)
            elif isinstance(v, (dict, list, tuple)):  # never a homogeneous array for Plotly
                out[k] = _encoded(v)
            elif is_homogeneous_array(v):  # a pandas Series, a tensor...
                out[k] = to_typed_array_spec(v)
            else:
                out[k] = v
        return out
    if isinstance(x, (list, tuple)):
        if set(map(type, x)) <= PLAIN_TYPES:
            return x
        items = [_encoded(v) for v in x]
        return items if isinstance(x, list) else tuple(items)
    return x


class TypedArray(dict):
    """A typed-array spec made here (``_typed``): its text is base64, a dtype name and a
    shape of digits, so its JSON needs no encoder (``_data_json``)."""


def _typed(v: np.ndarray):
    """``to_typed_array_spec(v)`` for a NumPy array, without its detour through narwhals
    and its copy: a native numeric array of a type plotly.js reads, or else Plotly's own."""
    short = plotlyjsShortTypes.get(v.dtype.name)
    if short is None or not v.size or not v.dtype.isnative:
        return to_typed_array_spec(v)
    spec = TypedArray(dtype=short, bdata=base64.b64encode(np.ascontiguousarray(v)).decode("ascii"))
    if v.ndim > 1:
        spec["shape"] = str(v.shape)[1:-1]
    return spec


def plain_dict(fig) -> dict:
    """``fig.to_dict()`` without its deep copy of every array: the containers are new, their
    leaves (arrays, strings, numbers) shared, and the arrays encoded as Plotly's
    ``convert_to_base64`` does (``_encoded``). The template (hundreds of small dicts, no
    arrays) is shared with the figure, not walked: the frozen dict is only read."""
    if isinstance(fig, PlainFigure):  # the builder's own dicts, read, never changed
        spec = fig.to_dict()
        data, source = spec["data"], spec["layout"]
    elif fig._frame_objs:
        return fig.to_dict()
    else:
        data, source = fig._data, fig._layout
    out = {"data": _encoded(data), "layout": _encoded({k: v for k, v in source.items() if k != "template"})}
    if "template" in source:
        out["layout"]["template"] = source["template"]
    return out


def _plain_json(obj, *, sort_keys: bool = False) -> str:
    """JSON by the standard library's C encoder; Plotly's own encoder (a Python pass over
    every value) for what it cannot write: NumPy scalars, dates, or NaN and infinities,
    which Plotly writes as null to keep the JSON strict."""
    try:
        return json.dumps(obj, separators=(",", ":"), allow_nan=False, sort_keys=sort_keys)
    except (TypeError, ValueError):
        text = _to_json(obj, validate=False)
        return json.dumps(json.loads(text), separators=(",", ":"), sort_keys=True) if sort_keys else text


def spec_json(spec: dict) -> str:
    """A plain figure dict's JSON, equal to ``plotly.io.to_json``'s once parsed, by the C
    encoder (the traces' typed arrays written out as they are: ``_data_json``)."""
    if set(spec) - {"data", "layout"}:
        return _plain_json(spec)
    return '{"data":' + _data_json(spec.get("data", [])) + ',"layout":' + _plain_json(spec.get("layout", {})) + "}"


def _data_json(data) -> str:
    """The traces' JSON, each trace's own typed arrays written out as they are, after its
    other keys: the C encoder reads every character of a string to escape it, and a grid's
    base64 is most of its bytes (57 KB of a typical link's grid: 82 µs of its 118). Keys are
    sorted, so the same traces give the same text however they were built (it names their
    data: ``_drawn_once``)."""
    if not isinstance(data, list):
        return _plain_json(data, sort_keys=True)
    out = []
    for trace in data:
        arrays = (sorted(((k, v) for k, v in trace.items() if type(v) is TypedArray), key=lambda kv: kv[0])
                  if isinstance(trace, dict) else [])
        if not arrays:
            out.append(_plain_json(trace, sort_keys=True))
            continue
        rest = _plain_json({k: v for k, v in trace.items() if type(v) is not TypedArray}, sort_keys=True)
        written = ",".join(json.dumps(k) + ':{"dtype":"' + v["dtype"] + '","bdata":"' + v["bdata"] + '"'
                           + (',"shape":"' + v["shape"] + '"' if "shape" in v else "") + "}" for k, v in arrays)
        out.append(rest[:-1] + ("," if rest != "{}" else "") + written + "}")
    return "[" + ",".join(out) + "]"


def style_key(style) -> tuple:
    return astuple(style)


def clicked_points(fig, *, key: str, filename: str) -> list[dict]:
    """A chart (as ``chart`` draws it) whose clicks on a marker rerun the page: the points clicked."""
    if not hasattr(fig, "_attnviz_alt"):
        freeze(fig)
    event = st.plotly_chart(fig, key=key, theme=None, width="stretch", on_select="rerun", selection_mode="points",
                            alt=fig._attnviz_alt, config={"displaylogo": False, "toImageButtonOptions": {
                                "format": "png", "filename": filename, "scale": 2}})
    if st.session_state.get("present") and fig._attnviz_alt_own:
        st.caption(fig._attnviz_alt)
    return list(getattr(getattr(event, "selection", None), "points", None) or [])


def chart(fig, *, key: str, filename: str, alt: str | None = None) -> None:
    """A Plotly chart whose toolbar saves a PNG under a meaningful name, with a text
    alternative (``alt``, the one cached with the figure, or one generated from it) that
    screen readers read as the chart's name; presenter mode also shows it under the chart."""
    if not hasattr(fig, "_attnviz_alt"):  # not from ``figure`` (not frozen): made to be drawn once too
        freeze(fig, (lambda _fig: alt) if alt else None)
    own = bool(alt) or fig._attnviz_alt_own
    alt = alt or fig._attnviz_alt
    st.plotly_chart(
        fig, key=key, theme=None, width="stretch", alt=alt,
        config={"displaylogo": False,
                "toImageButtonOptions": {"format": "png", "filename": filename, "scale": 2}},
    )
    if st.session_state.get("present") and own:  # a view's own sentence, never the generic one
        st.caption(alt)
