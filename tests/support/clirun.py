"""The command line run in this process, as ``python -m attnviz`` runs it: (exit code, stdout, stderr).

A new process per call paid 3-9 s of imports (torch, transformers) before its first line of work,
about a fifth of the suite's time. ``attnviz.cli.main`` catches every error itself and prints one line
(``attnviz/__main__.py`` only passes its code to ``sys.exit``), so a run here meets the same code; each
command's test module still runs one case as a real process (``run_process``), for what only a
process shows (the interpreter's own output, the exit status through ``sys.exit``).
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

from attnviz import cli

ROOT = Path(__file__).resolve().parent.parent.parent


def run_cli(*args: str, cwd: str | Path | None = None, env: dict | None = None) -> tuple[int, str, str]:
    """``attnviz.cli.main(args)`` here, in ``cwd`` with ``env`` added to the environment (both restored)."""
    out, err = io.StringIO(), io.StringIO()
    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    try:
        os.environ.update(env or {})
        if cwd is not None:
            os.chdir(cwd)
        with redirect_stdout(out), redirect_stderr(err):
            try:
                code = cli.main([str(a) for a in args])
            except SystemExit as e:  # argparse's own exit, as the process would end
                code = e.code if isinstance(e.code, int) else 1
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
    return code, out.getvalue(), err.getvalue()


def run_process(*args: str, cwd: str | Path | None = None, env: dict | None = None) -> tuple[int, str, str]:
    """``python -m attnviz args`` as a process of its own (offline, this checkout first on the path)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", **(env or {})}
    p = subprocess.run([sys.executable, "-m", "attnviz", *map(str, args)], capture_output=True, text=True, cwd=cwd,
                       timeout=300, env=env)
    return p.returncode, p.stdout, p.stderr
