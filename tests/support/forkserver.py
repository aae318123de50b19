"""Fresh ``python -m ui.server`` processes without paying the launcher's imports for each one.

    python -m tests.support.forkserver      # one line per server on stdin: [its streamlit options, its log file]

A server's start is about 3.4 s of CPU, 3.1 s of it the launcher's imports (torch, Streamlit, pandas, Plotly,
every view) and ``ui.server.preload``; the laptop layout test starts a fresh server for each page (20). This
process does the imports and the warm-up once, then forks a child for each line it reads, which runs the rest of
the launcher (``ui.server.serve``): the default trainings' check, the collector's settings and Streamlit itself.
Everything a session meets (Streamlit's runtime, its pages, the sessions, the shared results, the trainings'
registry) is made in the child after the fork, as in a process started anew; what the child shares with the others
is what ``ui.server.main`` has done before it calls ``serve``. It writes each child's pid on stdout.

Only for servers with the environment of the process that starts this one (the settings read at import stay as
they were read here), and with no thread but the main one before a fork (checked; torch on one thread here, each
child on the count it is asked for). ``Forked`` stands for a child
where a test holds a ``subprocess.Popen``: ``poll``, ``terminate``, ``kill``, ``wait``, ``stderr``.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path


class Forked:
    """A child of the fork server, as a test handles a ``subprocess.Popen`` of a server. It is not this process's
    child (the fork server's, which lets the kernel reap it), so it is watched through ``/proc``."""

    def __init__(self, pid: int, log: Path) -> None:
        self.pid, self.args, self.returncode, self._log = pid, ["forkserver", str(pid)], None, log

    @property
    def stderr(self) -> io.BytesIO:
        """What the child wrote (stdout and stderr), as a Popen's ``stderr`` pipe reads: ``wait_healthy`` shows it
        when the server does not start."""
        return io.BytesIO(self._log.read_bytes() if self._log.exists() else b"")

    def poll(self) -> int | None:
        """None while the child runs; then 0 (its exit status went to the fork server, which let the kernel reap
        it: what it printed says why it ended)."""
        if self.returncode is None:
            try:
                state = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except (FileNotFoundError, ProcessLookupError):
                state = "gone"
            if state in ("gone", "Z", "X"):
                self.returncode = 0
        return self.returncode

    def _signal(self, sig: int) -> None:
        try:
            os.kill(self.pid, sig)
        except ProcessLookupError:
            pass

    def terminate(self) -> None:
        self._signal(signal.SIGTERM)

    def kill(self) -> None:
        self._signal(signal.SIGKILL)

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(self.args, timeout)
            time.sleep(0.05)
        return self.returncode


class ForkServer:
    """The fork server, started with this process's environment; ``start(argv, log)`` → ``Forked``, a server whose
    torch runs ``threads`` threads.

    The fork server itself runs torch on one thread: a thread pool OpenMP had started there would be a pool of
    threads the child does not have (a forked child's first parallel product hung on two threads); the child sets
    its own count after the fork."""

    def __init__(self, threads: int) -> None:
        root = Path(__file__).resolve().parents[2]
        self.threads = threads
        self._proc = subprocess.Popen([sys.executable, "-m", "tests.support.forkserver"], cwd=root,
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                      env={**os.environ, "OMP_NUM_THREADS": "1"})

    def start(self, argv: list[str], log: Path) -> Forked:
        log.touch()  # the child writes it; a failed start is read from it
        self._proc.stdin.write(json.dumps([argv, str(log), self.threads]) + "\n")
        self._proc.stdin.flush()
        line = self._proc.stdout.readline()
        if not line.strip().isdigit():
            raise RuntimeError(f"the fork server did not start a server: {line.strip() or 'it exited'}")
        return Forked(int(line), log)

    def close(self) -> None:
        self._proc.stdin.close()
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()


def _child(argv: list[str], log: str, threads: int) -> None:
    """In the forked child: ``threads`` torch threads (its own processes, training workers, get the same), a session
    of its own, no stdin, stdout and stderr to ``log``; then the launcher."""
    import torch

    from ui import server

    os.environ["OMP_NUM_THREADS"] = str(threads)
    torch.set_num_threads(threads)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # its own children (training workers) are waited for
    os.setsid()
    null = os.open(os.devnull, os.O_RDONLY)
    out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(null, 0)
    os.dup2(out, 1)
    os.dup2(out, 2)
    code = 1
    try:
        server.serve(argv)
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else 1
    finally:
        os._exit(code)


def main() -> None:
    import torch

    from ui import server

    sys.path.insert(0, str(server.APP.parent))  # as ui.server.main
    server.preload()
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps the children
    for line in sys.stdin:
        argv, log, threads = json.loads(line)
        # a thread alive at the fork would leave the child its locks, held by no one
        assert threading.active_count() == 1 and torch.get_num_threads() == 1, threading.enumerate()
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            _child(argv, log, threads)
        print(pid, flush=True)


if __name__ == "__main__":
    main()
