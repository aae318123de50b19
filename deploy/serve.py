"""Serve attnviz from several processes behind HAProxy: ``make serve``.

    python deploy/serve.py [--replicas N] [--port PORT] [--bind ADDRESS]
    python deploy/serve.py --proxy-for app:8501 --replicas 8   # compose/Kubernetes: HAProxy only

Starts N Streamlit processes (``python -m ui.server``) on 127.0.0.1:PORT+1 …
PORT+N, waits until each answers ``/_stcore/health``, then runs HAProxy on
ADDRESS:PORT in front of them with cookie affinity, health checks and websocket
pass-through (``deploy/haproxy.cfg.in``). A replica that exits is started again;
while it is down HAProxy sends its students to the others, and since every setting
is in the URL, a reconnected session rebuilds its view there.

Ctrl-C (or SIGTERM) stops everything. Needs Debian's ``haproxy`` (``make serve``
installs it).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE = Path(__file__).resolve().parent / "haproxy.cfg.in"
HOW_TO_GET_HAPROXY = "haproxy not found: install Debian's package with `sudo apt-get install -y haproxy`."


def haproxy_config(port: int, replica_ports: list[int], bind: str = "127.0.0.1", host: str = "127.0.0.1") -> str:
    """Fixed replicas on this machine, each with its own cookie value."""
    servers = "\n".join(f"    server r{i} {host}:{p} check cookie r{i}" for i, p in enumerate(replica_ports, 1))
    return TEMPLATE.read_text().format(bind=bind, port=port, servers=servers, cookie_extra="", resolvers="")


def haproxy_config_for_service(port: int, service: str, most: int, bind: str = "0.0.0.0") -> str:
    """Replicas found by DNS (``service`` = "app:8501" in compose or Kubernetes): up to
    ``most`` servers from one name, with cookies derived from each server's address."""
    servers = f"    server-template r 1-{most} {service} check resolvers dns init-addr none"
    resolvers = "    dynamic-cookie-key attnviz\n"
    return TEMPLATE.read_text().format(
        bind=bind, port=port, servers=servers, cookie_extra=" dynamic", resolvers=resolvers,
    ) + "\nresolvers dns\n    parse-resolv-conf\n    hold valid 5s\n"


def healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/_stcore/health", timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


def start_replica(port: int, log_dir: Path) -> subprocess.Popen:
    log = open(log_dir / f"replica-{port}.log", "ab")  # noqa: SIM115 - lives as long as the process
    cmd = [sys.executable, "-m", "ui.server", "--server.port", str(port), "--server.address", "127.0.0.1"]
    return subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def wait_healthy(ports: list[int], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    pending = set(ports)
    while pending:
        pending = {p for p in pending if not healthy(f"http://127.0.0.1:{p}")}
        if pending and time.monotonic() > deadline:
            raise SystemExit(f"serve: replicas on ports {sorted(pending)} did not start; see their logs.")
        time.sleep(0.3)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="attnviz: N Streamlit replicas behind HAProxy.")
    ap.add_argument("--replicas", type=int, default=int(os.environ.get("REPLICAS") or os.cpu_count() or 1))
    ap.add_argument("--port", type=int, default=int(os.environ.get("PORT") or 8501))
    ap.add_argument("--bind", default=os.environ.get("BIND", "0.0.0.0"),
                    help="address HAProxy listens on (replicas always listen on 127.0.0.1)")
    ap.add_argument("--log-dir", type=Path, default=None, help="replica logs (default: a temporary folder)")
    ap.add_argument("--proxy-for", metavar="HOST:PORT", default=None,
                    help="only run HAProxy, for replicas that DNS finds under HOST (compose, Kubernetes)")
    ap.add_argument("--print-config", action="store_true", help="print HAProxy's configuration and exit")
    args = ap.parse_args(argv)
    if not 1 <= args.replicas <= 64:
        print("serve: --replicas must be between 1 and 64.", file=sys.stderr)
        return 2
    if not 1 <= args.port <= 65535 - args.replicas:
        print(f"serve: --port must leave room for {args.replicas} replica ports above it.", file=sys.stderr)
        return 2
    if args.proxy_for:
        cfg_text = haproxy_config_for_service(args.port, args.proxy_for, args.replicas, bind=args.bind)
    else:
        cfg_text = haproxy_config(args.port, [args.port + i for i in range(1, args.replicas + 1)], bind=args.bind)
    if args.print_config:
        print(cfg_text)
        return 0
    haproxy = shutil.which("haproxy") or ("/usr/sbin/haproxy" if Path("/usr/sbin/haproxy").exists() else None)
    if haproxy is None:
        print(f"serve: {HOW_TO_GET_HAPROXY}", file=sys.stderr)
        return 2

    work = Path(tempfile.mkdtemp(prefix="attnviz-serve-"))
    cfg = work / "haproxy.cfg"
    cfg.write_text(cfg_text)
    if args.proxy_for:  # the replicas are other containers: HAProxy is all this process runs
        os.execv(haproxy, [haproxy, "-f", str(cfg), "-db"])
    log_dir = args.log_dir or work
    log_dir.mkdir(parents=True, exist_ok=True)
    ports = [args.port + i for i in range(1, args.replicas + 1)]

    replicas = {p: start_replica(p, log_dir) for p in ports}
    proxy: subprocess.Popen | None = None
    stopping = False

    def stop(*_):
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        wait_healthy(ports)
        proxy = subprocess.Popen([haproxy, "-f", str(cfg), "-db"], start_new_session=True)
        print(f"serve: {args.replicas} replicas on 127.0.0.1:{ports[0]}–{ports[-1]} behind "
              f"http://{args.bind}:{args.port} (logs in {log_dir})", flush=True)
        while not stopping:
            if proxy.poll() is not None:
                print(f"serve: haproxy exited with code {proxy.returncode}.", file=sys.stderr)
                return 1
            for port, proc in list(replicas.items()):
                if proc.poll() is not None:  # died: HAProxy routes around it; start it again
                    print(f"serve: replica on port {port} exited ({proc.returncode}); restarting it.",
                          file=sys.stderr, flush=True)
                    replicas[port] = start_replica(port, log_dir)
            time.sleep(0.5)
        return 0
    finally:
        for proc in [proxy, *replicas.values()]:
            if proc is not None and proc.poll() is None:
                proc.terminate()
        for proc in [proxy, *replicas.values()]:
            if proc is not None:
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
