"""`make serve REPLICAS=2`: two Streamlit processes behind HAProxy, on free ports.

Sessions spread over both replicas by cookie, /_stcore/health answers through the
proxy, and a session whose replica is killed carries on on the other one after
reconnecting, with its view rebuilt from its URL.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import urllib.request
from pathlib import Path

import pytest
import websockets

from tests.support import stclient
from tests.support.stclient import Session, free_port_block, server_pid, wait_healthy

ROOT = Path(__file__).resolve().parents[2]
HAPROXY = next((p for p in ("/usr/sbin/haproxy", "/usr/bin/haproxy") if os.path.exists(p)), None)
pytestmark = pytest.mark.skipif(
    HAPROXY is None, reason="haproxy not found: `sudo apt-get install -y haproxy` (`make serve` and .ci/run do)")


def get(url: str) -> tuple[int, str]:
    with urllib.request.urlopen(url, timeout=5) as r:
        return r.status, r.read().decode()


@pytest.fixture(scope="module")
def served():
    port = free_port_block(2)
    proc = subprocess.Popen(["make", "-s", "serve", "REPLICAS=2", f"PORT={port}", "BIND=127.0.0.1"], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(base, proc, 180)
    except RuntimeError:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
        raise
    yield base, port
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)


def test_health_answers_through_the_proxy(served):
    base, _ = served
    assert get(base + "/_stcore/health") == (200, "ok")


def test_sessions_spread_over_both_replicas_and_survive_a_killed_one(served):
    base, port = served

    async def scenario():
        sessions = [Session(base) for _ in range(6)]
        for s in sessions:
            await s.connect()
        first = [await s.rerun(f"text=replica+test+{i}&heads=2&mask=causal") for i, s in enumerate(sessions)]
        assert all(r.ok for r in first), first
        replicas = {s.cookies.get("ATTNVIZ_REPLICA") for s in sessions}
        assert replicas == {"r1", "r2"}, replicas  # both replicas received sessions

        victim = next(s for s in sessions if s.cookies["ATTNVIZ_REPLICA"] == "r1")
        os.kill(server_pid(port + 1), signal.SIGKILL)
        with pytest.raises((OSError, websockets.exceptions.ConnectionClosed)):  # the replica is gone
            await victim.rerun("text=after+the+kill&heads=2")

        async def reconnect(after: float) -> Session:
            """What the browser does: reload the page with the dead replica's cookie."""
            await asyncio.sleep(after)
            s = Session(base, cookies={"ATTNVIZ_REPLICA": "r1"})
            await s.connect()
            return s

        # Reloads spread over the seconds in which HAProxy marks the replica down (two failed checks, 1 s
        # apart): a reload that is being retried at that moment must still reach the other replica.
        reloads = await asyncio.gather(*(reconnect(0.25 * k) for k in range(12)))
        assert [s.cookies["ATTNVIZ_REPLICA"] for s in reloads] == ["r2"] * 12
        await victim.close()
        await victim.connect()
        again = await victim.rerun("text=after+the+kill&heads=2")
        assert again.ok and victim.cookies["ATTNVIZ_REPLICA"] == "r2", (again, victim.cookies)
        for s in [*sessions, *reloads]:
            await s.close()

    stclient.run(scenario())


@pytest.mark.parametrize("args", [["--replicas", "2", "--port", "9400"],
                                  ["--proxy-for", "app:8501", "--replicas", "16", "--port", "8501"]])
def test_haproxy_accepts_both_generated_configurations(tmp_path, args):
    """make serve's (fixed replicas) and compose/Kubernetes' (replicas found by DNS)."""
    import sys

    cfg = subprocess.run([sys.executable, str(ROOT / "deploy" / "serve.py"), *args, "--print-config"],
                         capture_output=True, text=True, check=True).stdout
    assert "cookie ATTNVIZ_REPLICA insert" in cfg and "httpchk GET /_stcore/health" in cfg and "timeout tunnel" in cfg
    assert "balance source" not in cfg  # never by client address: a classroom shares one
    (tmp_path / "h.cfg").write_text(cfg)
    check = subprocess.run([HAPROXY, "-c", "-f", str(tmp_path / "h.cfg")], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr


def test_the_docker_image_copies_what_exists():
    """No Docker daemon here: check that every COPY source is in the repository."""
    lines = (ROOT / "Dockerfile").read_text().splitlines()
    for line in lines:
        if line.startswith("COPY "):
            for src in line.split()[1:-1]:
                assert (ROOT / src).exists(), src
    compose = (ROOT / "compose.yaml").read_text()
    assert "--proxy-for" in compose and "app:8501" in compose
