"""A Streamlit client without a browser: Streamlit's own websocket protocol.

It does what the browser does for a session, minus the drawing: load the page over
HTTP (which gives a proxy the chance to set its affinity cookie), open
``/_stcore/stream`` with that cookie, and send ``rerun_script`` back-messages that
carry the page's query string, reading forward-messages until the run's
``script_finished``. Used by the classroom benchmark and the ``make serve`` tests.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import time
import urllib.request
from dataclasses import dataclass, field
from http.cookies import SimpleCookie
from pathlib import Path

import websockets
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg


def run(coro):
    """``asyncio.run(coro)`` on a thread of its own: in the test process, the session's Chromium (its Playwright
    driver, tests/conftest.py ``browser``) keeps an event loop running in the main thread, where asyncio.run
    refuses to start another."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


FINISHED_OK = {ForwardMsg.FINISHED_SUCCESSFULLY, ForwardMsg.FINISHED_FRAGMENT_RUN_SUCCESSFULLY}


@dataclass
class RunReport:
    seconds: float
    bytes: int
    ok: bool
    error: str = ""
    elements: int = 0
    charts: int = 0  # Plotly charts among the elements
    messages: int = 0  # every message of the run, script_finished included
    alerts: list[str] = field(default_factory=list)  # the bodies of st.error/warning/info/success
    progress: list[str] = field(default_factory=list)  # the texts of its progress bars
    # The page asked for another run (st.rerun: a model it waited for is ready), with no exception.
    rerun: bool = False


@dataclass
class Session:
    """One browser tab's worth of Streamlit session."""

    base: str  # http://127.0.0.1:8501
    cookies: dict[str, str] = field(default_factory=dict)
    ws: object = None
    server_session_id: str = ""

    def _load_page(self) -> None:
        """GET / as a browser does first; keep the cookies the server (or proxy) sets."""
        req = urllib.request.Request(self.base + "/")
        if self.cookies:
            req.add_header("Cookie", "; ".join(f"{k}={v}" for k, v in self.cookies.items()))
        with urllib.request.urlopen(req, timeout=30) as r:
            r.read()
            for header in r.headers.get_all("Set-Cookie") or []:
                c = SimpleCookie()
                c.load(header)
                self.cookies.update({k: m.value for k, m in c.items()})

    async def connect(self) -> None:
        await asyncio.to_thread(self._load_page)
        url = self.base.replace("http://", "ws://", 1) + "/_stcore/stream"
        headers = {"Cookie": "; ".join(f"{k}={v}" for k, v in self.cookies.items())} if self.cookies else {}
        self.ws = await websockets.connect(url, subprotocols=["streamlit"], additional_headers=headers,
                                           max_size=None, open_timeout=30, ping_interval=None)

    async def close(self) -> None:
        if self.ws is not None:
            await self.ws.close()
            self.ws = None

    async def rerun(self, query_string: str, *, timeout: float = 120.0, page: str = "") -> RunReport:
        """Run the page (``page``: its URL path, "" the default page) with ``query_string``; wait for
        the run to finish."""
        msg = BackMsg()
        msg.rerun_script.query_string = query_string
        msg.rerun_script.page_name = page
        t0 = time.perf_counter()
        await self.ws.send(msg.SerializeToString())
        received, elements, error, charts, messages, alerts, progress = 0, 0, "", 0, 0, [], []
        deadline = t0 + timeout
        while True:
            remaining = deadline - time.perf_counter()
            if remaining <= 0:
                return RunReport(time.perf_counter() - t0, received, False, "timed out", elements, charts, messages,
                                 alerts, progress)
            data = await asyncio.wait_for(self.ws.recv(), remaining)
            received += len(data)
            messages += 1
            fwd = ForwardMsg()
            fwd.ParseFromString(data)
            kind = fwd.WhichOneof("type")
            if kind == "new_session":
                self.server_session_id = fwd.new_session.initialize.session_id or self.server_session_id
            elif kind == "delta" and fwd.delta.WhichOneof("type") == "new_element":
                elements += 1
                el = fwd.delta.new_element
                if el.WhichOneof("type") == "exception":
                    error = error or f"exception: {el.exception.message}"
                charts += el.WhichOneof("type") == "plotly_chart"
                if el.WhichOneof("type") == "progress":
                    progress.append(el.progress.text)
                if el.WhichOneof("type") == "alert":
                    alerts.append(el.alert.body)
            elif kind == "script_finished":
                ok = fwd.script_finished in FINISHED_OK and not error
                rerun = fwd.script_finished == ForwardMsg.FINISHED_EARLY_FOR_RERUN and not error
                return RunReport(time.perf_counter() - t0, received, ok, error, elements, charts, messages, alerts,
                                 progress, rerun)
            elif kind == "session_event" and fwd.session_event.WhichOneof("type") == "script_compilation_exception":
                error = "compile error"


def server_pid(port: int) -> int:
    """The Streamlit process listening on ``port``, found by its command line."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(b"streamlit" in c or b"ui.server" in c for c in cmd) and str(port).encode() in cmd:
            return int(pid)
    raise LookupError(f"no Streamlit process on port {port}")


def rss_bytes(pid: int) -> int:
    """Resident memory of ``pid`` (0 once it has exited)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def free_port_block(n: int = 0) -> int:
    """A port p with p … p+n all free on 127.0.0.1 (a server and n replicas above it)."""
    import socket

    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = s.getsockname()[1]
        if base + n > 65000:
            continue
        try:
            for p in range(base, base + n + 1):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", p))
            return base
        except OSError:
            continue
    raise RuntimeError("no free block of ports on 127.0.0.1")


def wait_healthy(base: str, proc, timeout: float = 180) -> None:
    """Until ``base``/_stcore/health answers 200; ``RuntimeError`` (with the process's
    stderr, when captured) if ``proc`` exits or the time runs out."""
    import urllib.request

    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(base + "/_stcore/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            err = proc.stderr.read().decode(errors="replace") if proc.poll() is not None and proc.stderr else ""
            raise RuntimeError(f"{base} did not start: {err[-2000:]}")
        time.sleep(0.3)
