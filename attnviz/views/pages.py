"""Every page's figure and numbers for the command line, read from the one table of pages
(``attnviz.views.catalogue.PAGES``): each entry names its module of the library, and the module's
``main_figure`` (and, where a page's numbers are its own, ``numbers``) is what ``python -m attnviz render
--page …`` writes. The app's page draws the same functions.

A page module (``attnviz.views.<module>``) owns its settings (a dataclass of ``setting(...)`` fields,
nested in ``ViewState``), its run, ``main_figure(state, style, data)`` (``data``: the bytes of the file the
page reads, an image, a WAV, an attention file, a corpus or a text; None: its sample), optionally
``all_figures`` (every figure, for ``--out x.html``), ``numbers(state, fmt, data)`` (its record: every
number it draws, for ``--out x.json``) and, for a page that runs an input of its own rather than the
sidebar's text, ``page_result(name, state, data)`` (the run its downloads hold, and the state as it reads it).
"""

from __future__ import annotations

import importlib
from types import ModuleType

import plotly.graph_objects as go

from attnviz import plots as F
from attnviz.run.result import AttentionResult
from attnviz.run.run import compute
from attnviz.views.catalogue import PAGES, page
from attnviz.views.state import ViewState


def module_of(name: str) -> ModuleType:
    """The library module of page ``name`` (its entry's ``module``)."""
    return importlib.import_module(f"attnviz.views.{page(name).module}")


def _check(name: str) -> None:
    known = {p.name for p in PAGES}
    if name not in known:
        raise ValueError(f"Unknown page {name!r}; choose one of {', '.join(known)}.")
    if page(name).command and not hasattr(module_of(name), page(name).figure):
        raise ValueError(f"The {name} page has a command of its own: {page(name).command}.")


def page_figure(name: str, state: ViewState, style: F.FigureStyle, data: bytes | None = None) -> go.Figure:
    """The main figure of page ``name`` for ``state``: what a link to that page shows first (``data``: the
    bytes of the file the page reads).

    Raises ``ValueError`` with a user-facing message for settings that cannot run.
    """
    _check(name)
    return getattr(module_of(name), page(name).figure)(state, style, data)


def page_figures(name: str, state: ViewState, style: F.FigureStyle, data: bytes | None = None) -> list[go.Figure]:
    """Every figure of page ``name`` where its module draws several (``all_figures``); else its main one."""
    _check(name)
    module = module_of(name)
    if page(name).figure == "main_figure" and hasattr(module, "all_figures"):
        return module.all_figures(state, style, data)
    return [page_figure(name, state, style, data)]


def page_record(name: str, state: ViewState, fmt: str, data: bytes | None = None) -> bytes | None:
    """The numbers of a page whose numbers are its own (its module's ``numbers``), in ``fmt``; None for a
    page that writes its run's. ``ValueError`` for a format the page does not write."""
    _check(name)
    module = module_of(name)
    if page(name).figure != "main_figure" or not hasattr(module, "numbers"):
        return None
    if fmt != "json":
        raise ValueError(f"The {name} page writes .json, .png, .svg or .html.")
    return module.numbers(state, fmt, data)


def page_result(name: str, state: ViewState, data: bytes | None = None) -> tuple[AttentionResult, ViewState]:
    """The run a page's downloads hold (CSV, JSON), its own input through the one seam, and
    ``state`` as that page reads it: an image, audio or graph page's query is the token it
    follows (``followed_state``), so the neuron view's JSON is the page's."""
    module = module_of(name)
    if hasattr(module, "page_result"):  # a page that runs its own input (an image, a file, a source text)
        return module.page_result(name, state, data)
    return compute(state.config), state
