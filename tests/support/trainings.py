"""The session's trainings (Watch it learn's default and its control; the model that learns to look's default),
made once per test run in a runs folder every worker reads, as a server's worker trains them (one thread).

``learned(root)`` and ``looked(root)`` train under a file lock of their own, unless a marker says it is done, and
return what the fixtures of ``tests/conftest.py`` give. ``start(root, which)`` runs them in a background process
(``python -m tests.support.trainings ROOT WHICH``) as soon as a worker collects a test that needs them: they train
while the first tests run, and a fixture that needs one waits on its lock only for what is left. Started once per
run (a file made exclusively says so)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = {"learned_defaults": "learn", "looked_default": "look"}
UNCLOCKED = ("ATTNVIZ_MAX_LEARN_SECONDS", "inf")  # attnviz.limits.max_learn_seconds: no clock


@contextmanager
def unclocked():
    """A training's goals are in steps, not seconds: no clock while the suite trains (a busy machine is slow: on a
    loaded 2-core machine Watch it learn's default stopped at step 550 of 2,000 on the 120 s limit, and every
    test that reads it failed). ``tests/conftest.py`` sets the same for every process the suite starts (servers,
    their training workers); this holds where a test has changed it. The worker's function sets one thread; the
    caller's count comes back after."""
    import torch

    threads, before = torch.get_num_threads(), os.environ.get(UNCLOCKED[0])
    os.environ[UNCLOCKED[0]] = UNCLOCKED[1]
    try:
        yield
    finally:
        torch.set_num_threads(threads)
        if before is None:
            os.environ.pop(UNCLOCKED[0], None)
        else:
            os.environ[UNCLOCKED[0]] = before


def learned(root: Path) -> dict:
    """{"dir": the runs folder, "keys": [default, control], "records": [default, control]}."""
    from filelock import FileLock

    from attnviz.learn.worker import _train_to_files, key_of
    from attnviz.views.learn import default_trainings

    folder = root / "learn-runs"
    keys = [key_of(settings) for settings in default_trainings()]
    with FileLock(str(root / "learn-runs.lock")):
        if not (folder / "trained").exists():
            folder.mkdir(exist_ok=True)
            with unclocked():
                for settings, key in zip(default_trainings(), keys, strict=True):
                    _train_to_files("learn", asdict(settings), str(folder), key, wait=True)
            (folder / "trained").touch()
    return {"dir": folder, "keys": keys,
            "records": [json.loads((folder / f"{k}.json").read_text(encoding="utf-8")) for k in keys]}


def looked(root: Path) -> dict:
    """{"dir": the runs folder, "key", "record"} of ``LookSettings()``'s training."""
    from filelock import FileLock

    from attnviz.learn.look import LookSettings
    from attnviz.learn.worker import _train_to_files, key_of

    folder = root / "learn-runs"
    key = key_of(LookSettings())
    with FileLock(str(root / "looked.lock")):
        folder.mkdir(exist_ok=True)
        if not (folder / "looked").exists():
            with unclocked():
                _train_to_files("look", asdict(LookSettings()), str(folder), key, wait=True)
            (folder / "looked").touch()
    return {"dir": folder, "key": key, "record": json.loads((folder / f"{key}.json").read_text(encoding="utf-8"))}


TRAIN = {"learn": learned, "look": looked}


def start(root: Path, which: str) -> subprocess.Popen | None:
    """The background process that trains ``which`` into ``root``, or None where one was started already."""
    try:
        fd = os.open(root / f"started-{which}", os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return None
    os.close(fd)
    return subprocess.Popen([sys.executable, "-m", "tests.support.trainings", str(root), which], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})


if __name__ == "__main__":
    TRAIN[sys.argv[2]](Path(sys.argv[1]))
