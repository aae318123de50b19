"""Attention weights made for the notebook's and the handover's tests, and their figures read back
as a browser gets them."""

from __future__ import annotations

import json
import re

import numpy as np
import plotly.graph_objects as go
import torch

from tests.support.apphelp import z  # figures decoded as a browser gets them (base64 "bdata")

LAYERS, H, L = 2, 3, 4
TOKENS = ["the", "cat", "sat", "down"]


def weights(layers=LAYERS, heads=H, q=L, k=L, seed=0) -> np.ndarray:
    """Seeded attention (layers, H, L, S): each row a softmax."""
    g = torch.Generator().manual_seed(seed)
    return torch.softmax(torch.randn(layers, heads, q, k, generator=g), -1).numpy()  # (layers, H, L, S)


W = weights()


def as_dict(fig: go.Figure) -> dict:
    assert isinstance(fig, go.Figure)
    return json.loads(fig.to_json())


def blocks_of(trace: dict) -> list[dict]:
    """A grid trace split back into its blocks, found through the block index (customdata)."""
    zz, head = z(trace), z({"z": trace["customdata"]}).astype(int)
    out = []
    for i in range(int(head.max()) + 1):
        rows, cols = np.nonzero(head == i)
        r0, r1, c0, c1 = rows.min(), rows.max() + 1, cols.min(), cols.max() + 1
        out.append({"z": zz[r0:r1, c0:c1], "x": trace["x"][c0:c1], "y": trace["y"][r0:r1], "r0": r0, "c0": c0})
    return out


def script_tags(html: str) -> list[str]:
    return re.findall(r"<script\b[^>]*>", html, flags=re.I)


def assert_offline(html: str) -> None:
    """Every script inline: no src, no CDN, no require; plotly.js itself in the page."""
    from plotly.offline import get_plotlyjs

    tags = script_tags(html)
    assert tags and not [t for t in tags if re.search(r"\bsrc\s*=|cdn|require|http", t, flags=re.I)]
    assert get_plotlyjs()[:2000] in html
