"""The one lazy seam: the project's own modules that are imported on first use, and why, said
here once. Everywhere else an import of the project's own modules is at the top of its module,
so the picture of what depends on what is the code (the house test counts, tests/test_house.py).

    from attnviz import lazy
    notebook = lazy.imported("attnviz.notebook")

May import: nothing of attnviz at its top (``load`` imports what ``REASONS`` names).
"""

from __future__ import annotations

import importlib
from types import ModuleType

REASONS = {
    "attnviz.notebook": "``import attnviz`` stays free of plotly: the notebook API (head_view, show, save_attention, "
                        "…) loads on its first use, as attnviz.head_view and the like",
}


def imported(name: str) -> ModuleType:
    """The module ``name``, imported now if it was not; only the ones ``REASONS`` gives a reason for."""
    if name not in REASONS:
        raise LookupError(f"{name} is not one of attnviz's lazy imports ({', '.join(REASONS)}): import it at the top.")
    return importlib.import_module(name)
