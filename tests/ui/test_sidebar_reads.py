"""The sidebar draws only what the page reads, checked from the table of pages (``attnviz.views.catalogue``):
every control it draws for a page is a setting that page's entry reads (``attnviz.views.state.reads``), and
a setting of the computation that a random-layer page does not read changes nothing it draws (so leaving
its control out hides nothing: Mask lab's masks are its own, a gradient and a Q/K map run before dropout,
Why √d_k draws no colour scale)."""

from __future__ import annotations

import json

import pytest

from attnviz.views.catalogue import PAGES
from attnviz.views.state import reads
from tests.support.apphelp import app, figures, no_errors, z
from ui.session import MORE

# A value other than the default for each setting of the computation a sidebar may draw.
CHANGED = {"mask": "none", "dropout": "0.3", "colors": "Cividis"}
RANDOM_PAGES = [p for p in PAGES if p.random]  # fast to run: the random layer over a text or an input


def _drawn(at) -> set[str]:
    """The keys of the sidebar's widgets (the "More settings" switch opened, so that all are drawn)."""
    at.toggle(key=MORE).set_value(True).run()
    return {w.key for kind in ("selectbox", "slider", "number_input", "toggle", "text_area", "multiselect")
            for w in getattr(at.sidebar, kind) if w.key and not w.key.startswith("_")}


def _rounded(x):
    """``x`` with every number to 6 significant digits (Plotly's packed arrays unpacked): two runs of the same
    settings on the same process can sum in another order (a worker's thread count), a last bit apart; a setting
    that the page reads moves its numbers far more."""
    if isinstance(x, dict):
        if "bdata" in x and "dtype" in x:
            return _rounded(z({"z": x}).ravel().tolist())
        return {k: _rounded(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_rounded(v) for v in x]
    if isinstance(x, float):
        return float(f"{x:.6g}")
    return x


def _drawing(at) -> str:
    """Everything the page drew, as text: its figures (data and layout), each number to 6 significant digits."""
    return json.dumps(_rounded([{k: f[k] for k in ("data", "layout")} for f in figures(at)]), sort_keys=True)


@pytest.mark.parametrize("entry", PAGES, ids=lambda p: p.name)
def test_the_sidebar_draws_only_settings_the_page_reads(entry):
    at = app(page=f"app_pages/{entry.script}", timeout=300)
    no_errors(at)
    drawn = _drawn(at)
    assert {"lang", "present"} <= drawn <= reads(entry.name)


@pytest.mark.parametrize("entry", [p for p in RANDOM_PAGES if set(CHANGED) - reads(p.name)], ids=lambda p: p.name)
def test_a_setting_the_page_does_not_read_changes_nothing_it_draws(entry):
    unread = [name for name in CHANGED if name not in reads(entry.name)]
    before = app(page=f"app_pages/{entry.script}")
    no_errors(before)
    assert figures(before)
    for name in unread:
        after = app(f"{name}={CHANGED[name]}", page=f"app_pages/{entry.script}")
        no_errors(after)
        assert _drawing(after) == _drawing(before), f"{name} changes what {entry.name} draws, but it does not read it"
