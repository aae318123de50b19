"""What a server holds between requests after many distinct links to every page, against its one
budget (``ATTNVIZ_CACHE_MB``): every page opened in Streamlit's AppTest, in one process (so its caches
are shared as a server's are), once per link, each link a different value of one numeric setting the
page reads (the seed, a layer, a threshold…).

After each link it reads the bytes every cache of the process holds (``attnviz.cache.CACHES``:
results, figures, finished jobs, Q/K runs, lookups, layers; the loaded models are bounded apart by
``ATTNVIZ_MAX_LOADED_MB``) and prints, per page, the most held and the process's resident memory.

    ATTNVIZ_CACHE_MB=64 .venv/bin/python bench/bench_memory.py --links 40
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from pathlib import Path
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _values(entry, n: int) -> list[str]:
    """``n`` distinct values of a numeric setting within its bounds."""
    lo, hi = entry.spec.lo, entry.spec.hi
    lo = lo() if callable(lo) else lo
    hi = hi() if callable(hi) else hi
    if entry.spec.kind is int:
        return [str(int(lo) + i % (int(hi) - int(lo) + 1)) for i in range(n)]
    return [f"{lo + (hi - lo) * (i + 1) / (n + 1):.4f}" for i in range(n)]


def varied(page: str) -> str | None:
    """The setting a page's links differ in: the first numeric one it reads with room for many values."""
    from attnviz.views.state import SETTINGS, reads

    read = reads(page)
    for name in ("seed", "circuit_threshold", "learn_seed", "long_q0", "length", "patch_at", "node", "frame_at"):
        if name in read:
            return name
    for name in sorted(read):
        e = SETTINGS[name]
        if e.spec.kind in (int, float) and e.spec.lo is not None and e.spec.hi is not None and not e.spec.choices:
            return name
    return None


def held() -> int:
    from attnviz.cache import CACHES

    return sum(c.total_bytes for c in CACHES.values())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--links", type=int, default=40)
    ap.add_argument("--pages", default="", help="comma-separated page names (default: every page)")
    args = ap.parse_args()
    from streamlit.testing.v1 import AppTest

    from attnviz import limits
    from attnviz.views.catalogue import PAGES
    from attnviz.views.state import SETTINGS

    budget = limits.cache_budget_bytes()
    wanted = [p for p in PAGES if not args.pages or p.name in args.pages.split(",")]
    print(f"budget ATTNVIZ_CACHE_MB = {budget / 2**20:.0f} MB; {args.links} links a page; "
          f"{len(wanted)} pages", flush=True)
    most = 0
    for entry in wanted:
        name = varied(entry.name)
        values = _values(SETTINGS[name], args.links) if name else [""] * args.links
        t0, top = time.perf_counter(), 0
        for value in values:
            at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
            for k, v in (urlencode({name: value}).split("=", 1),) if name else ():
                at.query_params[k] = v
            at.run()
            at.switch_page(f"app_pages/{entry.script}").run()
            top = max(top, held())
        most = max(most, top)
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"{entry.name:16s} varying {name or '-':18s} most held {top / 2**20:7.1f} MB "
              f"({top / budget:5.1%} of the budget)  peak RSS {rss:6.0f} MB  {time.perf_counter() - t0:6.1f} s",
              flush=True)
    print(f"most held after {args.links} links to every page: {most / 2**20:.1f} MB of {budget / 2**20:.0f} MB "
          f"({most / budget:.1%})")
    return 0 if most <= budget else 1


if __name__ == "__main__":
    os.environ.setdefault("ATTNVIZ_CACHE_MB", "64")
    sys.exit(main())
