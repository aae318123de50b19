"""Head roles as the pages show them, one way for every page that names them (the explorer's
model view and Head roles table, Watch it learn's heads and table): a head's title with its
role, the one-line legend of what each role means and its threshold, and the table's rows.
The scores, the thresholds and the roles themselves are ``attnviz.analysis.roles``'s."""

from __future__ import annotations

import numpy as np

from attnviz.analysis.roles import ROLE_LABELS, ROLE_THRESHOLDS, ROLE_WORDS
from attnviz.i18n import _


def head_title(layer: int, head: int, role: str = "", *, stacked: bool = False) -> str:
    """"L1 H0", and " · " its role's short label where it has one. ``stacked``: for small
    multiples whose rows are named by layer (``grid_figure``'s ``row_names``), "H0", and the
    role on a second line, so that a row of twelve titles does not run together."""
    if stacked:
        return f"H{head}" + (f"<br>{_(ROLE_LABELS[role])}" if role else "")
    return f"L{layer} H{head}" + (f" · {_(ROLE_LABELS[role])}" if role else "")


def legend() -> str:
    """Every role's label, what its score measures and its threshold, on one line (Markdown)."""
    return " · ".join(f"**{_(ROLE_LABELS[r])}** {_(ROLE_WORDS[r])} ≥ {t}" for r, t in ROLE_THRESHOLDS.items())


def thresholds() -> str:
    """Every role's score and threshold, for a page's caption: "previous_token ≥ 0.4, …"."""
    return ", ".join(f"{k} ≥ {v}" for k, v in ROLE_THRESHOLDS.items())


def table(columns: dict[str, np.ndarray], roles: np.ndarray) -> list[dict]:
    """A row per layer × head: its layer, head, role, then each column's (layers, heads) score."""
    layers, heads = roles.shape
    return [{"layer": layer, "head": h, "role": roles[layer, h],
             **{name: float(v[layer, h]) for name, v in columns.items()}}
            for layer in range(layers) for h in range(heads)]
