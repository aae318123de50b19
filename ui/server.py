"""Start the Streamlit server with the heavy imports already done.

    python -m ui.server [streamlit run options...]

``streamlit run app.py`` would import torch, Plotly and pandas inside the first
session's script run, so the first student of a class waits for them (and every
other session waits behind the import lock). Importing them here, before the server
accepts connections, moves that cost to start-up. The options are ``streamlit
run``'s own (``--server.port 8502``, ...). Importing this module is that preload: only the
launcher imports it.
"""

from __future__ import annotations

import gc
import sys
from pathlib import Path

import pandas  # noqa: F401 - imported before the server starts: the first session does not wait for it
import plotly.io as pio
from streamlit.web import cli

import attnviz.cli  # noqa: F401 - the CLI pulls in every view
from attnviz import AttentionConfig, compute
from attnviz.learn.train import start_defaults
from attnviz.learn.worker import TRAININGS
from attnviz.views.catalogue import HOME, VIEWS, views_on
from attnviz.views.selection import style_for
from attnviz.views.state import DEFAULTS
from ui import compute as ui_compute  # noqa: F401
from ui import controls, picks, rendering, session, sidebar, widgets  # noqa: F401

APP = Path(__file__).resolve().parent.parent / "app.py"


def preload() -> None:
    """Build one figure of every view (Plotly's lazy class lookups and template happen on
    first use), with everything a page run needs imported already (above)."""
    result = compute(AttentionConfig(text="warm up", num_heads=2, d_model=8))
    state = DEFAULTS.with_(text="warm up", heads=2, d_model=8)
    for name in views_on(HOME):  # the views of a run (the Patching page's reads two: it has its own record)
        pio.to_json(VIEWS[name].figure(result, state, style_for(state)), validate=False)


def quiet_gc() -> None:
    """Keep Python's cyclic garbage collector off the preloaded object graph.

    Streamlit's own post-run collection is off (.streamlit/config.toml), but Python
    still runs full collections as allocations pile up, and each walks every object
    torch, Plotly and pandas created at import: under a 30-session load that was ~19%
    of the server's CPU. ``gc.freeze()`` moves everything alive now (the preloaded
    modules) out of the collector's sight, and a larger first threshold makes
    collections rarer; attnviz creates no reference cycles per run.
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 20, 20)


def train_defaults() -> None:
    """Watch it learn's default training, started in its worker process now, so that a first
    visitor finds it finished (about 15 s on one core) instead of a page that waits for
    Train."""
    start_defaults(TRAININGS)


def serve(argv: list[str]) -> None:
    """The launcher's part after the imports and ``preload``: the default trainings, the collector, then
    ``streamlit run app.py`` with ``argv`` (its options). Exits the process when the server stops."""
    train_defaults()
    quiet_gc()
    sys.argv = ["streamlit", "run", str(APP), *argv]
    sys.exit(cli.main())


def main(argv: list[str] | None = None) -> None:
    sys.path.insert(0, str(APP.parent))
    preload()
    serve(sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    main()
