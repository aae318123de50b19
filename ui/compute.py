"""Cached computation, cached figures and error display shared by the pages.

One server process serves every session, so the caches here are process-wide and
keyed on plain values (a config, a view, a style):

- results: ``attnviz.cache.ByteBudgetCache`` bounded in bytes, computing each config
  once however many students open the same link at the same moment;
- figures: the same kind of cache, so changing only the head, query, view or colours
  sends a figure that is already built;
- at most ``limits.MAX_CONCURRENT_RUNS`` computations run at once, so memory stays
  within (runs at once × the per-run budget) + the cache.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from dataclasses import astuple

import streamlit as st

from attnviz import AttentionConfig, AttentionResult, compute
from attnviz.analysis.describe import describe_figure
from attnviz.cache import ByteBudgetCache, nbytes
from attnviz.i18n import _
from attnviz.limits import MAX_CONCURRENT_RUNS, cache_budget_bytes

_budget = cache_budget_bytes()
RESULTS = ByteBudgetCache(_budget * 3 // 4)
# A frozen figure's size: its plain dict (arrays already base64 text), walked, not serialised.
FIGURES = ByteBudgetCache(_budget // 4, size_of=lambda fig: nbytes(fig.to_dict()))
_RUNS = threading.BoundedSemaphore(MAX_CONCURRENT_RUNS)


def _compute(config: AttentionConfig) -> AttentionResult:
    with _RUNS:
        return compute(config)


def cached_result(config: AttentionConfig) -> AttentionResult:
    """The (shared, read-only) result of ``config``; raises what ``compute`` raises."""
    return RESULTS.get_or_compute(("result", config), lambda: _compute(config))


def cached(key: Hashable, build: Callable, *, limited: bool = True):
    """Any other derived value (verification, gradients), cached with the results.

    ``limited``: count the build against the concurrent-run limit (for heavy work).
    """
    def run():
        if not limited:
            return build()
        with _RUNS:
            return build()

    return RESULTS.get_or_compute(key, run)


def run(config: AttentionConfig) -> AttentionResult:
    """The result for ``config``, or a clear message on the page and a stop (or, while its
    model loads in the background, the load's progress and a stop)."""
    from ui.loading import ready

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


def figure(key: Hashable, build: Callable, *, alt: Callable[[object], str] | None = None):
    """A figure built once per ``key`` (plain values: config, view, selection, style),
    with its text alternative (``alt(fig)``, or one generated from the figure)."""
    return FIGURES.get_or_compute(key, lambda: freeze(build(), alt))


def freeze(fig, alt: Callable[[object], str] | None = None):
    """Compute the figure's plain dict and its text alternative once: ``st.plotly_chart``
    calls ``to_dict()`` on every rerun, which deep-copies the figure and re-encodes each
    array as base64, and describing it reads every cell. The dict is shared read-only
    (Streamlit only serialises it)."""
    frozen = fig.to_dict()
    object.__setattr__(fig, "to_dict", lambda: frozen)
    object.__setattr__(fig, "_attnviz_alt", (alt or describe_figure)(fig))
    return fig


def style_key(style) -> tuple:
    return astuple(style)


def chart(fig, *, key: str, filename: str, alt: str | None = None) -> None:
    """A Plotly chart whose toolbar saves a PNG under a meaningful name, with a text
    alternative (``alt``, the one cached with the figure, or one generated from it) that
    screen readers read as the chart's name; presenter mode also shows it under the chart."""
    alt = alt or getattr(fig, "_attnviz_alt", None) or describe_figure(fig)
    st.plotly_chart(
        fig, key=key, theme=None, width="stretch", alt=alt,
        config={"displaylogo": False,
                "toImageButtonOptions": {"format": "png", "filename": filename, "scale": 2}},
    )
    if st.session_state.get("present"):
        st.caption(alt)
