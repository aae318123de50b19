"""Graph nodes as tokens: degree plus a seeded embedding; the adjacency matrix with
self-loops is the attention mask (graph attention), or no mask, for contrast."""

from __future__ import annotations

import re

import torch

from attnviz import limits
from attnviz.i18n import _
from attnviz.inputs.record import Input, single

GRAPH_PRESETS = ("path", "star", "grid", "two-communities")
GRAPH_MASKS = ("adjacency", "none")


def preset_edges(name: str) -> str:
    if name == "path":
        return ", ".join(f"{i}-{i + 1}" for i in range(7))
    if name == "star":
        return ", ".join(f"0-{i}" for i in range(1, 8))
    if name == "grid":
        edges = [(r * 3 + c, r * 3 + c + 1) for r in range(3) for c in range(2)]
        edges += [(r * 3 + c, (r + 1) * 3 + c) for r in range(2) for c in range(3)]
        return ", ".join(f"{a}-{b}" for a, b in edges)
    if name == "two-communities":
        a = [(i, j) for i in range(5) for j in range(i + 1, 5)]
        b = [(i, j) for i in range(5, 10) for j in range(i + 1, 10)]
        return ", ".join(f"{i}-{j}" for i, j in [*a, *b, (4, 5)])
    raise ValueError(f"Unknown graph {name!r}; choose one of {', '.join(GRAPH_PRESETS)}.")


_EDGE = re.compile(r"^\s*(\d{1,12})\s*(?:-|–|,|\s)\s*(\d{1,12})\s*$")


def parse_edges(text: str) -> tuple[int, list[tuple[int, int]], list[str]]:
    """"0-1, 1-2" or one "a b" per line -> (node count, undirected edges, notes).

    Nodes are 0 … n−1. A malformed item or a node past the bound raises ``ValueError``
    naming it; a self-loop or a repeated edge is dropped with a note (self-loops are
    always part of the attention mask).
    """
    items = [it for it in re.split(r"[,;\n]", text) if it.strip()]
    if len(text) > limits.MAX_TEXT_CHARS:
        raise ValueError(_("The edge list has {n} characters; the limit is {limit}.").format(
            n=f"{len(text):,}", limit=f"{limits.MAX_TEXT_CHARS:,}"))
    if not items:
        raise ValueError(_("The edge list is empty: type edges like 0-1, 1-2."))
    edges, seen, notes = [], set(), []
    for k, item in enumerate(items, 1):
        m = _EDGE.match(item)
        if not m:
            raise ValueError(_("Edge {k} ({item}) is not of the form a-b with node numbers, like 0-1.").format(
                k=k, item=repr(item.strip()[:30])))
        a, b = int(m.group(1)), int(m.group(2))
        for node in (a, b):
            if node >= limits.MAX_GRAPH_NODES:
                raise ValueError(_("Edge {k} names node {node}; nodes are numbered 0 to {last}.").format(
                    k=k, node=node, last=limits.MAX_GRAPH_NODES - 1))
        if a == b:
            notes.append(_("Self-loop {a}-{b} dropped: every node already attends to itself.").format(a=a, b=b))
            continue
        key = (min(a, b), max(a, b))
        if key in seen:
            notes.append(_("Edge {a}-{b} is listed twice; kept once.").format(a=a, b=b))
            continue
        seen.add(key)
        edges.append(key)
    n = max((max(e) for e in edges), default=max(int(_EDGE.match(items[0]).group(1)), 0)) + 1
    return n, edges, notes


def adjacency(n: int, edges: list[tuple[int, int]]) -> torch.Tensor:
    """The adjacency matrix with self-loops, as a bool mask (True = may attend): (n, n)."""
    a = torch.eye(n, dtype=torch.bool)
    for i, j in edges:
        a[i, j] = a[j, i] = True
    return a


def graph_input(n: int, edges: list[tuple[int, int]], d_model: int, seed: int, mask_kind: str) -> Input:
    """Nodes as tokens: a seeded embedding plus the degree; the adjacency (with self-loops)
    as the structure when ``mask_kind`` is "adjacency"."""
    if mask_kind not in GRAPH_MASKS:
        raise ValueError(f"Unknown graph mask {mask_kind!r}; choose one of {', '.join(GRAPH_MASKS)}.")
    adj = adjacency(n, edges)
    degree = (adj.sum(1) - 1).to(torch.float32)  # (n,)
    gen = torch.Generator().manual_seed(int(seed) * 1_000_003 + 3)
    own = torch.randn(n, d_model, generator=gen)  # each node's seeded embedding
    deg_dir = torch.randn(d_model, generator=gen)  # one direction that carries the degree
    x = own + (degree - degree.mean()).unsqueeze(1) * deg_dir  # (n, E)
    structure = adj if mask_kind == "adjacency" else None
    return single("graph", [f"node {i}" for i in range(n)], x, structure, mask_kind,
                  {"edges": edges, "n": n, "degree": degree.tolist()})
