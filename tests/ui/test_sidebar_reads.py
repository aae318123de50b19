"""The sidebar draws only what the page reads, checked from the table of pages (``attnviz.views.catalogue``):
every control it draws for a page is a setting that page's entry reads (``attnviz.views.state.reads``), and
a setting of the computation that a random-layer page does not read changes nothing it draws (so leaving
its control out hides nothing: Mask lab's masks are its own, a gradient and a Q/K map run before dropout,
Why √d_k draws no colour scale)."""

from __future__ import annotations

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


def _unpacked(x):
    """``x`` with Plotly's packed arrays unpacked into lists of numbers."""
    if isinstance(x, dict):
        if "bdata" in x and "dtype" in x:
            return z({"z": x}).ravel().tolist()
        return {k: _unpacked(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_unpacked(v) for v in x]
    return x


def _drawing(at) -> dict:
    """Everything the page drew: its figures (data and layout), numbers unpacked; not the layout's
    ``datarevision``, a checksum of the data's exact bits (``ui.compute.drawn_once``), which the numbers are
    compared for themselves."""
    drawn = _unpacked([{k: f[k] for k in ("data", "layout")} for f in figures(at)])
    for f in drawn:
        f["layout"].pop("datarevision", None)
    return drawn


def _same(a, b, path: str = "") -> str | None:
    """Where two drawings differ (None: nowhere). Numbers agree within 1e-5 of their size: two runs of the same
    settings in one process can sum in another order (another test's job changed the threads meanwhile), a last
    bit apart, where a setting the page reads moves them far more; everything else agrees exactly."""
    if isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            return f"{path}: keys {sorted(a)} != {sorted(b)}"
        return next((d for k in a if (d := _same(a[k], b[k], f"{path}.{k}"))), None)
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return f"{path}: {len(a)} items != {len(b)}"
        return next((d for i, (x, y) in enumerate(zip(a, b, strict=True)) if (d := _same(x, y, f"{path}[{i}]"))),
                    None)
    numbers = (int, float)
    if isinstance(a, numbers) and isinstance(b, numbers) and not isinstance(a, bool) and not isinstance(b, bool):
        if a != a or b != b:  # NaN: a gap the heatmap leaves (a masked cell), on both sides or not
            return None if (a != a) == (b != b) else f"{path}: {a} != {b}"
        return None if abs(a - b) <= 1e-5 * max(1.0, abs(a), abs(b)) else f"{path}: {a} != {b}"
    return None if a == b else f"{path}: {str(a)[:80]} != {str(b)[:80]}"


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
        where = _same(_drawing(after), _drawing(before))
        assert where is None, f"{name} changes what {entry.name} draws, but it does not read it ({where})"
