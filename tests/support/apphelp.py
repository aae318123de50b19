"""Helpers for AppTest-based tests."""

import json
from pathlib import Path
from urllib.parse import parse_qsl

import numpy as np
from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parents[2] / "app.py")


def app(query: str = "", page: str | None = None, timeout: float = 60) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=timeout)
    for k, v in parse_qsl(query.lstrip("?"), keep_blank_values=True):
        at.query_params[k] = v
    at.run()
    if page:
        at.switch_page(page).run()
    return after_loads(at, timeout)


def after_loads(at: AppTest, timeout: float = 60) -> AppTest:
    """While a model loads (or a patching or long-context sweep runs) in the background the page shows its
    progress and a fragment polls it; AppTest does not run that fragment, so wait for the job
    and rerun, as the fragment would."""
    from attnviz.models import registry
    from attnviz.views.longcontext import JOBS
    from attnviz.views.patching import SWEEPS
    from attnviz.views.visionlang import JOBS as READINGS

    for _ in range(4):
        if not at.get("progress"):
            return at
        for job in (*registry.LOADING.jobs(), *SWEEPS.jobs(), *JOBS.jobs(), *READINGS.jobs()):
            job.done.wait(timeout)
        at.run()
    return at


def more_settings(at: AppTest) -> AppTest:
    """Switch the sidebar's "More settings" on (its widgets are drawn only then)."""
    from ui.session import MORE

    at.toggle(key=MORE).set_value(True).run()
    return at


def open_downloads(at: AppTest, key: str = "dl") -> AppTest:
    """Click a page's "Download…" button: its dialog lists the files."""
    at.button(key=key).click().run()
    return at


def figures(at: AppTest) -> list[dict]:
    return [json.loads(el.proto.spec) for el in at.get("plotly_chart")]


def z(trace: dict) -> np.ndarray:
    """A heatmap's z, decoded from Plotly's base64 'bdata' when needed."""
    import base64

    v = trace["z"]
    if isinstance(v, dict) and "bdata" in v:
        arr = np.frombuffer(base64.b64decode(v["bdata"]), dtype=np.dtype(v["dtype"]))
        shape = v.get("shape")
        if isinstance(shape, str):
            shape = [int(s) for s in shape.split(",")]
        return arr.reshape(shape) if shape else arr
    return np.array(v, dtype=float)


def no_errors(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def heatmaps(fig: dict) -> list[dict]:
    return [t for t in fig["data"] if t["type"] == "heatmap"]


def shown(value: str) -> str:
    """Markdown source as a reader sees it: backslash escapes removed (attnviz.views.markdown.md adds them)."""
    import re

    return re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", value).replace("\u200b", "")


def warnings_shown(at: AppTest) -> list[str]:
    return [shown(w.value) for w in at.warning]


def grid_heads(fig: dict) -> list[dict]:
    """The grid figure's single heatmap split back into one block per head: dicts with
    ``z`` (L, S), ``x`` and ``y`` labels, found through the trace's head index."""
    (trace,) = heatmaps(fig)
    zz = z(trace)
    head = z({"z": trace["customdata"]}).astype(int)
    xs, ys = list(trace["x"]), list(trace["y"])
    out = []
    for h in range(int(head.max()) + 1):
        rows, cols = np.nonzero(head == h)
        r0, r1, c0, c1 = rows.min(), rows.max() + 1, cols.min(), cols.max() + 1
        out.append({"z": zz[r0:r1, c0:c1], "x": xs[c0:c1], "y": ys[r0:r1], "head": h})
    return out
