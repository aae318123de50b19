"""How far the Q/K map can be trusted, head by head: every head of MiniLM-L6 (6 layers × 12)
over the shipped corpus, mapped with both normalisations (AttentionViz's scale-then-translate
and the max-inner-product reduction) and both projections (PCA, t-SNE), each map's
neighbourhood agreement beside its random baseline (k = 3).

    .venv/bin/python bench/bench_qkmap_heads.py [--layers 0-5] [--heads 0-11] [--methods pca,tsne] [--markdown]

Prints one row per head, then per normalisation × projection: how many heads are above their
baseline, how many by at least ``TRUST_MARGIN`` (0.05), and the median agreement. The default
normalisation (``attnviz.analysis.qkmap.DEFAULT_NORMALISATION``) is the one with more heads
above their baseline (ties: the higher median). About 20 minutes on this project's 2-core
machine, nearly all of it t-SNE.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from attnviz.analysis import qkcorpus as QC  # noqa: E402
from attnviz.analysis.qkmap import METHODS, NORMALISATIONS, TRUST_MARGIN  # noqa: E402
from attnviz.inputs.corpus import default_corpus  # noqa: E402
from attnviz.models import registry  # noqa: E402
from attnviz.views.state import ViewState  # noqa: E402

COLUMNS = [(norm, method) for norm in sorted(NORMALISATIONS) for method in METHODS]  # AttentionViz's first
NAMES = {"attentionviz": "AttentionViz", "mips": "MIPS→NN", "pca": "PCA", "tsne": "t-SNE"}


def numbers(text: str) -> list[int]:
    """"0-5", "3,5" or "2": the numbers named."""
    out = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out += range(int(lo), int(hi or lo) + 1)
    return out


def measure(layer_list: list[int], seed: int, columns: list[tuple[str, str]], heads: list[int] | None) -> list[dict]:
    """One row per head: its baseline and each column's agreement."""
    lines = default_corpus()
    rows = []
    for layer in layer_list:
        crun = QC.corpus_run(ViewState.of(model=registry.MINILM, layer=layer).config, lines)
        for head in heads if heads is not None else range(crun.heads):
            row = {"layer": layer, "head": head, "seconds": {}}
            for norm, method in columns:
                rec = QC.head_map(crun, head, method=method, seed=seed, normalisation=norm)
                row["baseline"] = rec["baseline"]  # the same for every column: it depends on the sentences only
                row[norm, method] = rec["agreement"]
                row["seconds"][method] = row["seconds"].get(method, 0.0) + rec["seconds"]
            rows.append(row)
            print("  " + " · ".join([f"L{layer} H{head:<2d} baseline {row['baseline']:.3f}"] + [
                f"{NAMES[n]} {NAMES[m]} {row[n, m]:.4f}" for n, m in columns]), flush=True)
    return rows


def summary(rows: list[dict], columns: list[tuple[str, str]]) -> list[dict]:
    out = []
    for norm, method in columns:
        margins = [r[norm, method] - r["baseline"] for r in rows]
        out.append({"norm": norm, "method": method, "above": sum(m > 0 for m in margins),
                    "trusted": sum(m >= TRUST_MARGIN - 1e-12 for m in margins),
                    "median": statistics.median(r[norm, method] for r in rows),
                    "median_margin": statistics.median(margins)})
    return out


def winner(summ: list[dict]) -> str:
    """The normalisation with more heads above baseline, over the projections measured (ties: the higher median)."""
    score = {n: (sum(s["above"] for s in summ if s["norm"] == n),
                 statistics.mean(s["median"] for s in summ if s["norm"] == n)) for n in NORMALISATIONS}
    return max(NORMALISATIONS, key=lambda n: score[n])


def markdown(rows: list[dict], summ: list[dict], columns: list[tuple[str, str]]) -> str:
    head = ("| normalisation | projection | heads above baseline | above by ≥ 0.05 | median agreement "
            "| median (agreement − baseline) |")
    lines = [head, "|---|---|---:|---:|---:|---:|"]
    for s in summ:
        lines.append(f"| {NAMES[s['norm']]} | {NAMES[s['method']]} | {s['above']} / {len(rows)} | "
                     f"{s['trusted']} / {len(rows)} | {s['median']:.3f} | {s['median_margin']:+.3f} |")
    lines += ["", "| layer | head | baseline | " + " | ".join(f"{NAMES[n]} {NAMES[m]}" for n, m in columns) + " |",
              "|---:|---:|---:|" + "---:|" * len(columns)]
    for r in rows:
        lines.append(f"| {r['layer']} | {r['head']} | {r['baseline']:.3f} | "
                     + " | ".join(f"{r[c]:.3f}" for c in columns) + " |")
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--layers", type=numbers, default=numbers("0-5"), help="layers, e.g. 0-5 or 3,5")
    p.add_argument("--heads", type=numbers, default=None, help="heads of each layer (default: all), e.g. 6-11")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--methods", default=",".join(METHODS), help="projections to measure, e.g. pca (t-SNE is slow)")
    p.add_argument("--markdown", action="store_true", help="also print the tables as Markdown")
    args = p.parse_args()
    columns = [(n, m) for n, m in COLUMNS if m in args.methods.split(",")]
    t0 = time.perf_counter()
    registry.load(registry.MINILM)
    print(f"MiniLM-L6, layers {args.layers}, {len(default_corpus())} shipped sentences, "
          f"seed {args.seed}, k = 3 (model load {time.perf_counter() - t0:.1f} s)")
    rows = measure(args.layers, args.seed, columns, args.heads)
    summ = summary(rows, columns)
    print(f"\n{len(rows)} heads; agreement of each map against its random baseline:")
    for s in summ:
        print(f"  {NAMES[s['norm']]:>12s} {NAMES[s['method']]:<5s}: {s['above']:2d} above baseline, "
              f"{s['trusted']:2d} by ≥ {TRUST_MARGIN}, median agreement {s['median']:.3f} "
              f"(median margin {s['median_margin']:+.3f})")
    per_map = {m: sum(r["seconds"][m] for r in rows) / len(rows) / len(NORMALISATIONS) for m in rows[0]["seconds"]}
    print("normalisation and projection per map (mean): " + ", ".join(f"{NAMES[m]} {s:.2f} s" for m, s in
                                                                      per_map.items())
          + f"; more heads above baseline: {NAMES[winner(summ)]}; {time.perf_counter() - t0:.0f} s in all")
    if args.markdown:
        print("\n" + markdown(rows, summ, columns))
    return 0


if __name__ == "__main__":
    sys.exit(main())
