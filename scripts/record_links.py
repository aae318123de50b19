"""Record what the CLI writes for a fixed set of links (every page, every view, the random layer
and MiniLM), as JSON and SVG, so that a change meant to keep behaviour can be checked to keep it.

    .venv/bin/python scripts/record_links.py record OUT_DIR      # writes OUT_DIR/spec.toml and the files
    .venv/bin/python scripts/record_links.py compare BEFORE AFTER  # exit 1 and the differences, if any

``compare`` ignores what changes from run to run by design: timings (keys named ``seconds``,
``timings_ms``, ``ms``) and the random ids Plotly gives an SVG's clip paths and gradients; the
Long sequences page's "cost" and "kernels" parts, which draw measured times, are not recorded.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VIEWS = ("grid", "head", "query", "mean", "mask", "output", "table", "model", "analysis", "roles", "flow", "norms",
         "neurons")
TEXT = "the cat sat on the mat because it was tired"


def links() -> list[tuple[str, dict]]:
    """(name, settings) for every page and every explorer view, with the random layer and MiniLM."""
    out = []
    for model in ("random", "minilm-l6"):
        for view in VIEWS:
            out.append((f"explorer-{model}-{view}", {"model": model, "view": view, "text": TEXT, "head": 1}))
    out += [
        ("explorer-random-causal-query", {"view": "query", "mask": "causal", "query": 3, "text": TEXT}),
        ("explorer-random-batch", {"view": "grid", "mask": "padding", "text": "I love AI\n我爱人工智能", "seq": 1}),
        ("explorer-minilm-layer3-roles", {"model": "minilm-l6", "layer": 3, "view": "roles", "text": TEXT}),
        ("step-by-step", {"page": "step-by-step", "text": TEXT, "head": 1, "query": 2}),
        ("mask-lab", {"page": "mask-lab", "text": TEXT, "window": 2}),
        ("cross-attention", {"page": "cross-attention", "text": TEXT}),
        ("verify", {"page": "verify", "text": TEXT}),
        ("gradients", {"page": "gradients", "text": TEXT, "query": 2}),
        ("why-scale", {"page": "why-scale"}),
        ("image-patches", {"page": "image-patches"}),
        ("image-patches-norms", {"page": "image-patches", "view": "norms"}),
        ("image-patches-neurons", {"page": "image-patches", "view": "neurons", "head": 1}),
        ("audio-frames", {"page": "audio-frames"}),
        ("graph-nodes", {"page": "graph-nodes", "view": "neurons"}),
        # "cost" and "kernels" draw measured times: left out (they differ from run to run by design)
        ("long-sequences-tiles", {"page": "long-sequences", "length": 256, "part": "tiles"}),
        ("long-sequences-sparse", {"page": "long-sequences", "length": 256, "part": "sparse"}),
        ("long-sequences-lowrank", {"page": "long-sequences", "length": 256, "part": "lowrank"}),
        ("attention-file", {"page": "attention-file", "view": "model"}),
        ("attention-file-roles", {"page": "attention-file", "view": "roles"}),
        ("qk-map", {"page": "qk-map", "model": "minilm-l6", "head": 3}),
        ("patching", {"page": "patching", "model": "watch-it-learn"}),
        ("circuit", {"page": "circuit", "model": "watch-it-learn", "circuit_cell": "12.5"}),
        ("long-context", {"page": "long-context", "long_text": "constitution", "long_blocks": 8}),
    ]
    return out


def spec(folder: Path) -> str:
    lines = ["# Written by scripts/record_links.py: every page and view, as JSON and SVG.", ""]
    for name, settings in links():
        for ext in ("json", "svg"):
            lines.append("[[figure]]")
            lines.append(f'out = "{name}.{ext}"')
            lines += [f"{key} = {json.dumps(value, ensure_ascii=False)}" for key, value in settings.items()]
            lines.append("")
    return "\n".join(lines)


def record(folder: Path) -> int:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "spec.toml").write_text(spec(folder), encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "attnviz", "render", "--spec", str(folder / "spec.toml")], cwd=ROOT)
    return done.returncode


TIMING_KEYS = {"seconds", "timings_ms", "ms"}
SVG_IDS = re.compile(r"\b(clip|legend|topbar|bottombar|colorbar|g)[0-9a-f]{6}\b")


def _plain(obj):
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items() if k not in TIMING_KEYS}
    if isinstance(obj, list):
        return [_plain(v) for v in obj]
    return obj


def same(a: Path, b: Path) -> str | None:
    """None when the two files say the same (timings and SVG ids aside), else what differs."""
    if a.suffix == ".json":
        x, y = _plain(json.loads(a.read_text(encoding="utf-8"))), _plain(json.loads(b.read_text(encoding="utf-8")))
        return None if x == y else "the JSON differs"
    x = SVG_IDS.sub("ID", a.read_text(encoding="utf-8"))
    y = SVG_IDS.sub("ID", b.read_text(encoding="utf-8"))
    if x == y:
        return None
    at = next(i for i, (p, q) in enumerate(zip(x, y, strict=False)) if p != q) if len(x) == len(y) else min(len(x),
                                                                                                           len(y))
    return f"the SVG differs at character {at}: …{x[max(0, at - 60):at + 60]!r} vs …{y[max(0, at - 60):at + 60]!r}"


def compare(before: Path, after: Path) -> int:
    names = sorted(p.name for p in before.iterdir() if p.suffix in (".json", ".svg"))
    missing = [n for n in names if not (after / n).is_file()]
    diffs = {n: d for n in names if n not in missing and (d := same(before / n, after / n))}
    for n in missing:
        print(f"{n}: missing after")
    for n, d in diffs.items():
        print(f"{n}: {d}")
    print(f"{len(names)} files: {len(names) - len(missing) - len(diffs)} the same, {len(diffs)} differ, "
          f"{len(missing)} missing")
    return 1 if diffs or missing else 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "record":
        sys.exit(record(Path(sys.argv[2]).resolve()))
    if len(sys.argv) == 4 and sys.argv[1] == "compare":
        sys.exit(compare(Path(sys.argv[2]), Path(sys.argv[3])))
    print(__doc__, file=sys.stderr)
    sys.exit(2)
