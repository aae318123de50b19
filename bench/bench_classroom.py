"""A classroom on one server: N sessions over Streamlit's websocket protocol, no browser.

Every session joins at the same moment (page load, websocket, first run of its own
link), then reruns with its own link every 0–6 s, 6 times: 6–96 words, 1–8 heads,
every mask kind. For each setup it prints join p50/max, edit p50/p95/max, bytes per
rerun, errors and the server's peak RSS, as one Markdown table; the floor page (one
Plotly heatmap of the same size, bench/floor_app.py) runs in the same process and
with the same settings, and each setup's ratios to the floor with as many sessions (the
60-session setups: to the 30-session floor, as each replica serves 30) are printed too.

Then joins alone (``--join-rounds``, 7): rounds of 30 and of 100 sessions joining at once
on the floor, on a second floor server and on attnviz, their p50s' median and ratio. A
single wave's ratio varies by ±25 % between runs on this machine, so the join target is
read from the median; the second floor shows what the ratio reads between two identical
servers. Each server's CPU time per join (read from /proc over each wave) is printed beside
it: a steadier read of a change than the join time itself. Two more rows: the floor page
with as many messages per run as attnviz's (``elements=N``, one-word Markdown elements:
what the element count costs without attnviz's work), and attnviz with the whole class
opening one link, as a class given its teacher's link does (the target is read from the
row where each session opens its own).

Setups: the floor with 30 and with 100 sessions; one process with 30 and with 100 sessions;
``make serve`` with 2 replicas and 60 sessions; and a fault run: 2 replicas, 60
sessions, one replica killed midway, counting the sessions that could not go on
after reconnecting (and how long they took).

    python bench/bench_classroom.py [--quick]
    python bench/bench_classroom.py --joins-only --against ../base   # a change against its base

``--against DIR`` adds another checkout of attnviz (a git worktree of a change's base) to
the join rounds: its waves meet the machine in the same states as this checkout's, so the
median of the rounds' ratios between the two is the change's effect, read far more
precisely than the two ratios to the floor taken apart.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tests.support.stclient import Session, free_port_block, rss_bytes, server_pid, wait_healthy  # noqa: E402

WORDS = ("attention lets every token look at every other token and mix what it finds the weights say how "
         "much each key matters to each query").split()
MASKS = ("none", "causal", "padding", "window", "causal+window")
SHARED = "attnviz, one link for the class"  # the join table's row where every session opens the same link
MATCHED = "floor, as many messages as attnviz"  # the floor page with extra elements (bench/floor_app.py)
EDITS = 6


def link(rng: random.Random) -> str:
    n = rng.randint(6, 96)
    heads = rng.choice([1, 2, 4, 8])
    text = " ".join(rng.choice(WORDS) for _ in range(n))
    return urlencode({"text": text, "heads": heads, "mask": rng.choice(MASKS), "window": rng.randint(1, 4),
                      "seed": rng.randint(0, 99)})


@dataclass
class Tally:
    joins: list[float] = field(default_factory=list)
    edits: list[float] = field(default_factory=list)
    bytes: list[int] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    reconnects: list[float] = field(default_factory=list)  # seconds from the failure to a finished run
    lost: int = 0
    peak_rss: int = 0


async def student(i: int, base: str, tally: Tally, start: asyncio.Event, *, seed: int, reconnect: bool) -> None:
    rng = random.Random(seed * 1000 + i)
    s = Session(base)
    url = link(rng)
    await start.wait()
    t0 = time.perf_counter()
    try:
        await s.connect()
        r = await s.rerun(url)
    except Exception as e:  # noqa: BLE001 - counted, not raised
        tally.errors.append(f"join: {type(e).__name__}: {e}")
        return
    tally.joins.append(time.perf_counter() - t0)
    tally.bytes.append(r.bytes)
    if not r.ok:
        tally.errors.append(r.error or "join failed")
    for _ in range(EDITS):
        await asyncio.sleep(rng.uniform(0, 6))
        url = link(rng)
        try:
            r = await s.rerun(url)
        except Exception:  # noqa: BLE001 - the replica went away
            if not reconnect:
                tally.errors.append("connection lost")
                return
            failed_at = time.perf_counter()
            r = await _reconnect(s, url, failed_at)
            if r is None:
                tally.lost += 1
                return
            tally.reconnects.append(time.perf_counter() - failed_at)
            continue
        tally.edits.append(r.seconds)
        tally.bytes.append(r.bytes)
        if not r.ok:
            tally.errors.append(r.error or "run failed")
    await s.close()


async def _reconnect(s: Session, url: str, since: float, give_up: float = 30.0):
    """What the browser does: reconnect (same cookies) and rerun the page's URL."""
    while time.perf_counter() - since < give_up:
        try:
            await s.close()
        except Exception:  # noqa: BLE001
            pass
        try:
            await s.connect()
            r = await s.rerun(url)
            if r.ok:
                return r
        except Exception:  # noqa: BLE001
            await asyncio.sleep(0.2)
    return None


def watch_rss(pids_of, tally: Tally, stop: threading.Event) -> None:
    while not stop.is_set():
        for pid in pids_of():
            tally.peak_rss = max(tally.peak_rss, rss_bytes(pid))
        stop.wait(0.1)


async def classroom(base: str, n: int, *, seed: int, reconnect: bool = False, during=None) -> Tally:
    tally = Tally()
    start = asyncio.Event()
    tasks = [asyncio.create_task(student(i, base, tally, start, seed=seed, reconnect=reconnect)) for i in range(n)]
    start.set()
    if during is not None:
        asyncio.get_running_loop().run_in_executor(None, during)
    await asyncio.gather(*tasks)
    return tally


class Server:
    """One of the setups, started and stopped around a run."""

    def __init__(self, kind: str, replicas: int = 1, root: Path = ROOT) -> None:
        self.kind, self.replicas, self.root = kind, replicas, root  # root: the checkout an "app" serves
        self.port = free_port_block(replicas)
        self.base = f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> Server:
        py = sys.executable
        if self.kind == "floor":
            cmd = [py, "-m", "streamlit", "run", str(ROOT / "bench" / "floor_app.py"), "--server.port", str(self.port),
                   "--server.address", "127.0.0.1"]
        elif self.kind == "app":
            cmd = [py, "-m", "ui.server", "--server.port", str(self.port), "--server.address", "127.0.0.1"]
        else:
            cmd = [py, str(ROOT / "deploy" / "serve.py"), "--replicas", str(self.replicas), "--port", str(self.port),
                   "--bind", "127.0.0.1"]
        self.log = tempfile.TemporaryFile()  # the server's output, read back if it fails to start
        self.proc = subprocess.Popen(cmd, cwd=self.root if self.kind == "app" else ROOT, stdout=self.log,
                                     stderr=subprocess.STDOUT,
                                     start_new_session=True)
        try:
            wait_healthy(self.base, self.proc)
        except RuntimeError as e:
            self.log.seek(0)
            raise RuntimeError(f"{e} {self.log.read()[-2000:].decode(errors='replace')}") from None
        return self

    def pids(self) -> list[int]:
        if self.kind != "serve":
            return [self.proc.pid]
        out = []
        for i in range(1, self.replicas + 1):
            try:
                out.append(server_pid(self.port + i))
            except LookupError:
                pass
        return out

    def __exit__(self, *exc) -> None:
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)


def rerun_cost(server: Server, repeats: int = 30) -> tuple[float, float, int]:
    """One session alone: p50 seconds of a rerun that recomputes (a new seed) and of one
    that only changes the head, for 64 tokens × 8 heads, and the bytes of one rerun."""
    text = " ".join(WORDS[i % len(WORDS)] for i in range(64))

    async def go():
        s = Session(server.base)
        await s.connect()
        new, view = [], []
        for i in range(repeats):
            r = await s.rerun(urlencode({"text": text, "heads": 8, "seed": 1000 + i}))
            new.append(r.seconds)
            view.append((await s.rerun(urlencode({"text": text, "heads": 8, "seed": 1000 + i, "head": 3}))).seconds)
        await s.close()
        return statistics.median(new), statistics.median(view), r.bytes

    with server:
        asyncio.run(classroom(server.base, 1, seed=99))
        return asyncio.run(go())


def run_setup(label: str, server: Server, n: int, *, seed: int, fault: bool = False) -> tuple[str, Tally]:
    with server:
        # One warm-up session, so that every setup starts from a served first page.
        asyncio.run(classroom(server.base, 1, seed=seed + 99))
        stop = threading.Event()
        tally_holder = Tally()
        watcher = threading.Thread(target=watch_rss, args=(server.pids, tally_holder, stop), daemon=True)
        watcher.start()

        def kill_one():
            time.sleep(8)
            os.kill(server_pid(server.port + 1), signal.SIGKILL)

        tally = asyncio.run(classroom(server.base, n, seed=seed, reconnect=fault, during=kill_one if fault else None))
        stop.set()
        watcher.join()
        tally.peak_rss = tally_holder.peak_rss
    return label, tally


async def join_wave(base: str, n: int, seed: int, *, shared: bool = False, extra: str = "") -> tuple[float, float]:
    """n sessions join at once (page load, websocket, first run) and leave: (p50, max) seconds.
    Each session opens a link of its own, or with ``shared`` all open the first one (a class
    given its teacher's link); ``extra`` is added to every link's query string."""
    start, joins = asyncio.Event(), []

    async def one(i: int) -> None:
        s = Session(base)
        url = link(random.Random(seed * 1000 + (0 if shared else i))) + extra
        await start.wait()
        t0 = time.perf_counter()
        await s.connect()
        r = await s.rerun(url)
        joins.append(time.perf_counter() - t0)
        if not r.ok:
            raise RuntimeError(r.error or "join failed")
        await s.close()

    tasks = [asyncio.create_task(one(i)) for i in range(n)]
    await asyncio.sleep(0.05)  # every session waits at the gate before any starts
    start.set()
    await asyncio.gather(*tasks)
    return pct(joins, .5), max(joins)


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU time the processes have used (Linux /proc; 0 where unreadable)."""
    total = 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


async def messages_per_run(base: str, seed: int) -> int:
    """How many messages a new session's first run of a benchmark link gets."""
    s = Session(base)
    await s.connect()
    r = await s.rerun(link(random.Random(seed)))
    await s.close()
    return r.messages


def join_rounds(n: int, rounds: int, seed: int,
                against: Path | None = None) -> tuple[dict[str, list[tuple[float, float, float]]], int]:
    """Waves of n joins on servers up for the whole run: the floor page, a second floor
    page (what the ratio reads between two identical servers: its noise), attnviz and,
    with ``against``, attnviz from that other checkout; the floor page once more with as
    many messages per run as attnviz's (``MATCHED``: its extra elements); and attnviz once
    more with one link for the whole class (``SHARED``). Each round visits them in a
    rotated order, so that no wave always follows the same one. Returns ({row: [(p50, max,
    server CPU seconds per join)] per round}, the extra elements of the matched floor)."""
    kinds = {"floor": Server("floor"), "floor again": Server("floor"), "attnviz": Server("app")}
    if against is not None:
        kinds["against"] = Server("app", root=against)
    with contextlib.ExitStack() as stack:
        servers = {name: stack.enter_context(server) for name, server in kinds.items()}
        for server in servers.values():
            asyncio.run(join_wave(server.base, 2, seed + 99))  # a served first page for each
        extra = max(0, asyncio.run(messages_per_run(servers["attnviz"].base, seed))
                    - asyncio.run(messages_per_run(servers["floor"].base, seed)))
        plan = [(name, name, False, "") for name in kinds]  # (row, server, shared, added to the links)
        plan += [(MATCHED, "floor", False, f"&elements={extra}"), (SHARED, "attnviz", True, "")]
        out: dict[str, list[tuple[float, float, float]]] = {row: [] for row, *_rest in plan}
        for r in range(rounds):
            k = r % len(plan)
            for row, name, shared, added in plan[k:] + plan[:k]:
                server = servers[name]
                c0 = cpu_seconds(server.pids())
                # The same links for each server, and a link of the round's own for the shared wave
                # (its result is not cached yet when the class opens it).
                p50, most = asyncio.run(join_wave(server.base, n, seed + r + (rounds if shared else 0),
                                                  shared=shared, extra=added))
                out[row].append((p50, most, (cpu_seconds(server.pids()) - c0) / n))
                time.sleep(0.5)
    return out, extra


def pct(xs: list[float], q: float) -> float:
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def print_setups(args: argparse.Namespace) -> None:
    """The rerun cost and the classroom table: every setup with its edits."""
    plan = [("floor page, 1 process", Server("floor"), 30, False),
            ("attnviz, 1 process", Server("app"), 30, False)]
    if not args.quick:
        plan += [("floor page, 1 process", Server("floor"), 100, False),
                 ("attnviz, 1 process", Server("app"), 100, False),
                 ("attnviz, make serve (2 replicas)", Server("serve", 2), 60, False),
                 ("attnviz, 2 replicas, one killed at 8 s", Server("serve", 2), 60, True)]
    print("One rerun, one session alone (64 tokens × 8 heads, p50 of 30):", file=sys.stderr)
    costs = {name: rerun_cost(Server(kind)) for name, kind in (("floor page", "floor"), ("explorer", "app"))}
    print("| page | rerun that recomputes | rerun that changes only the head | KiB per rerun |")
    print("|---|---:|---:|---:|")
    for name, (new, view, size) in costs.items():
        print(f"| {name} | {new * 1e3:.1f} ms | {view * 1e3:.1f} ms | {size / 1024:,.0f} |", flush=True)
    print()
    rows = []
    for label, server, n, fault in plan:
        print(f"running: {label}, {n} sessions ...", file=sys.stderr, flush=True)
        rows.append((n, *run_setup(label, server, n, seed=args.seed, fault=fault)))
    floors = {n: t for n, label, t in rows if label.startswith("floor")}  # each setup against the floor's
    print("| setup | sessions | join p50 | join max | edit p50 | edit p95 | edit max | KiB per rerun | errors "
          "| peak RSS | join p50 / floor | edit p95 / floor |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n, label, t in rows:
        floor = floors.get(n, rows[0][2])  # the floor with as many sessions (else the first one)
        extra = ""
        if t.reconnects or t.lost:
            extra = f" ({len(t.reconnects)} reconnected, max {max(t.reconnects, default=0):.1f} s; {t.lost} lost)"
        print(f"| {label}{extra} | {n} | {pct(t.joins, .5):.2f} s | {max(t.joins, default=float('nan')):.2f} s "
              f"| {pct(t.edits, .5):.3f} s | {pct(t.edits, .95):.3f} s "
              f"| {max(t.edits, default=float('nan')):.2f} s "
              f"| {statistics.mean(t.bytes) / 1024 if t.bytes else 0:,.0f} | {len(t.errors)} "
              f"| {t.peak_rss / 2**20:,.0f} MiB | {pct(t.joins, .5) / pct(floor.joins, .5):.2f} "
              f"| {pct(t.edits, .95) / pct(floor.edits, .95):.2f} |", flush=True)
        for e in sorted(set(t.errors))[:3]:
            print(f"  error: {e}", file=sys.stderr)


def print_join_rounds(args: argparse.Namespace) -> None:
    """The table of joins alone (and, with --against, the change against its base)."""
    print()
    print(f"Joins alone: {args.join_rounds} rounds of sessions joining at once on the floor page, on a second "
          "floor server and on attnviz" + (f" and on attnviz at {args.against}" if args.against else "") +
          " (the same links for each, in a rotated order); the median of the rounds' p50s, and each round's "
          "ratio to that round's floor. The second floor's ratio is what the measure reads between two "
          "identical servers. The floor with as many messages per run as attnviz's (small Markdown "
          "elements added) shows what the element count costs by itself; the last row is a class given "
          "one link, its teacher's: every session opens the same one (a new one each round), so the "
          "first computes it and the others share it:")
    print()
    print("| sessions | server | join p50 | join max | server CPU per join | join p50 / floor | each round |")
    print("|---:|---|---:|---:|---:|---:|---|")
    paired = []
    for n in (30,) if args.quick else (30, 100):
        print(f"running: {args.join_rounds} rounds of {n} joins ...", file=sys.stderr, flush=True)
        waves, extra = join_rounds(n, args.join_rounds, args.seed, args.against)
        f50 = statistics.median(p for p, _m, _c in waves["floor"])
        for name, got in waves.items():
            p50 = statistics.median(p for p, _m, _c in got)
            each = " ".join(f"{g[0] / f[0]:.2f}" for f, g in zip(waves["floor"], got, strict=True))
            label = f"attnviz at {args.against}" if name == "against" else name
            if name == MATCHED:
                label += f" ({extra} more elements)"
            print(f"| {n} | {label} | {p50:.3f} s | {statistics.median(m for _p, m, _c in got):.3f} s "
                  f"| {statistics.median(c for _p, _m, c in got) * 1e3:.1f} ms | {p50 / f50:.2f} | {each} |",
                  flush=True)
        if "against" in waves:
            ratios = [a[0] / b[0] for a, b in zip(waves["attnviz"], waves["against"], strict=True)]
            cpu = [a[2] / b[2] for a, b in zip(waves["attnviz"], waves["against"], strict=True) if b[2] > 0]
            paired.append((n, statistics.median(ratios), ratios, statistics.median(cpu) if cpu else float("nan")))
    for n, mid, ratios, cpu in paired:
        print(f"\n{n} sessions, this checkout's join p50 over {args.against}'s, round by round: median "
              f"{mid:.3f} ({' '.join(f'{r:.2f}' for r in ratios)}); its server CPU per join over theirs: "
              f"median {cpu:.3f}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="only the floor and one process with 30 sessions")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--join-rounds", type=int, default=7,
                    help="rounds of joins per size for the join table, on the floor and attnviz (0: none)")
    ap.add_argument("--joins-only", action="store_true", help="only the join table (no classroom setups)")
    ap.add_argument("--against", type=Path, metavar="DIR",
                    help="another checkout of attnviz (e.g. a git worktree of a change's base) that joins in the "
                         "same rounds: its row, and each round's ratio of this checkout to it")
    args = ap.parse_args()
    if args.against is not None and not (args.against / "ui" / "server.py").is_file():
        sys.exit(f"bench_classroom: {args.against} is not a checkout of attnviz (no ui/server.py)")
    if not args.joins_only:
        print_setups(args)
    if args.join_rounds:
        print_join_rounds(args)


if __name__ == "__main__":
    main()
