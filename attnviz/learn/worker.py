"""Trainings run in worker processes, keyed on their settings, shared by every session.

A server's sessions share one process and its GIL, so a training never runs in a request
thread: ``Trainings.start(settings)`` starts it in a worker process of its own
(``python -m attnviz.learn.worker``, at most ``limits.MAX_TRAININGS`` at once, one per
core; a fresh interpreter rather than multiprocessing's spawn, which would re-import the
server's main module) and returns its key, a hash of the validated settings. Thirty
students who open the teacher's link ask for the same key and watch one training. Its
output goes to ``<key>.log``, never to the server's own streams. The worker appends each checkpoint as a JSON line to
``<dir>/<key>.jsonl``, then writes the whole record to ``<key>.json`` and the trained
weights to ``<key>.safetensors`` (never a pickle); a finished run is kept, so a later open
replays it at once. ``stop(key)`` leaves a ``<key>.stop`` file that the worker checks at
each checkpoint.

One training of a key at a time, whichever process asks: a worker holds ``<key>.lock`` (``flock``) while it
writes the key's files, and a server that finds it held (another replica's worker, on a shared runs folder)
starts none and reads the files as they grow. Without it, every replica of ``make serve`` started the defaults
at launch into the same files, and a fresh server that started while another's training ran trained it again.

A worker that has ended is let go at the next look at the trainings (``start``, ``busy``,
``progress``): its process reaped and dropped, so a server keeps only those running. What it
ended with is in its files: its record, or, where it failed, a ``<key>.failed`` file with the
last line of its output, written as it is let go (a fresh start of that training removes it).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
import threading
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

from attnviz import cache, limits
from attnviz.jobs import refusal
from attnviz.learn.look import LookSettings, train_settings
from attnviz.learn.train import LearnSettings, train

try:
    import fcntl
except ImportError:  # not POSIX: no lock across processes (a server's own registry still starts a key once)
    fcntl = None

# The trainings a worker runs, by name: (their settings' class, the function that trains them, called
# ``(settings, on_checkpoint, stop=, keep=)``): Watch it learn's induction model, and the model that learns to look.
TRAINERS = {"learn": (LearnSettings, train), "look": (LookSettings, train_settings)}
RUNS_ENV = "ATTNVIZ_LEARN_DIR"


def runs_dir() -> Path:
    d = Path(os.environ.get(RUNS_ENV, "").strip() or Path(tempfile.gettempdir()) / "attnviz-learn")
    d.mkdir(parents=True, exist_ok=True)
    return d


def trainer_of(settings) -> str:
    """The name in ``TRAINERS`` of the training ``settings`` describe."""
    return next(name for name, (cls, _train) in TRAINERS.items() if isinstance(settings, cls))


def key_of(settings) -> str:
    values = asdict(settings)
    trainer = trainer_of(settings)
    named = values if trainer == "learn" else {trainer: values}  # Watch it learn's keys as they always were
    return hashlib.sha256(json.dumps(named, sort_keys=True).encode()).hexdigest()[:24]


@contextmanager
def _key_lock(base: Path, wait: bool):
    """Hold ``<key>.lock`` while the block writes the key's files: yields True, or False where another process
    holds it and ``wait`` is off. The lock ends with the process that holds it, however it ends."""
    if fcntl is None:
        yield True
        return
    with open(base.with_suffix(".lock"), "a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def training_elsewhere(folder: Path, key: str) -> bool:
    """Another process trains ``key`` in ``folder`` now (it holds the key's lock). Never creates a file: a key
    no one has trained (any link can name one) has no lock file, and is trained nowhere."""
    path = folder / f"{key}.lock"
    if fcntl is None or not path.exists():
        return False
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing the descriptor lets go of a lock taken on it
    return False


def _train_to_files(trainer: str, settings: dict, folder: str, key: str, wait: bool = False) -> str:
    """In the worker process: train, streaming checkpoints, then keep the record and weights. Where another
    process trains the same key in the same folder: nothing (``wait`` off, the worker's way: that one's files are
    read), or, with ``wait``, wait for it and use what it kept."""
    base = Path(folder) / key
    with _key_lock(base, wait) as mine:
        if not mine:
            return "running elsewhere"
        if wait and base.with_suffix(".json").exists() and base.with_suffix(".safetensors").exists():
            return json.loads(base.with_suffix(".json").read_text(encoding="utf-8"))["status"]  # trained meanwhile
        return _train_holding_lock(trainer, settings, base)


def _train_holding_lock(trainer: str, settings: dict, base: Path) -> str:
    import torch
    from safetensors.torch import save_file

    torch.set_num_threads(1)  # one core per training; deterministic whatever the machine
    lines = base.with_suffix(".jsonl")
    lines.unlink(missing_ok=True)
    kept: list = []
    with open(lines, "a", encoding="utf-8") as out:
        def on_checkpoint(record: dict) -> None:
            out.write(json.dumps(record) + "\n")
            out.flush()

        cls, training = TRAINERS[trainer]
        record = training(cls(**settings), on_checkpoint, stop=lambda: base.with_suffix(".stop").exists(),
                          keep=kept)
    weights = {name: t.detach().contiguous() for name, t in kept[0].state_dict().items()}
    save_file(weights, str(base.with_suffix(".safetensors.tmp")))
    os.replace(base.with_suffix(".safetensors.tmp"), base.with_suffix(".safetensors"))
    tmp = base.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(record), encoding="utf-8")
    os.replace(tmp, base.with_suffix(".json"))
    base.with_suffix(".stop").unlink(missing_ok=True)
    return record["status"]


def trained_weights(settings) -> Path:
    """The weights of ``settings``' training, from the runs folder (the server's worker trains the
    defaults at start); trained here now, deterministically on one thread, where no one has."""
    import torch

    settings.validate()
    key = key_of(settings)
    path = runs_dir() / f"{key}.safetensors"
    if not path.exists():
        threads = torch.get_num_threads()
        try:
            _train_to_files(trainer_of(settings), asdict(settings), str(runs_dir()), key, wait=True)
        finally:
            torch.set_num_threads(threads)
    return path


@dataclass
class Progress:
    checkpoints: list[dict]
    done: bool
    status: str  # "running", "done", "stopped at step …", "diverged …", or an error
    record: dict | None = None  # the whole record, once done


class Trainings:
    """The process-wide registry of trainings (one per server process)."""

    def __init__(self) -> None:
        self._jobs: dict[str, subprocess.Popen] = {}  # the workers running (and those ended since the last look)
        self._lock = threading.Lock()

    def _reap(self) -> None:
        """Let go of every worker that has ended (the caller holds the lock): ``poll`` has reaped its process
        and its output file is closed, so nothing of it is held here; a failure is left in ``<key>.failed``,
        where ``progress`` reads it."""
        for key, job in list(self._jobs.items()):
            code = job.poll()
            if code is None:
                continue
            del self._jobs[key]
            if code != 0:
                base = Path(job.args[-2]) / key  # the folder it was started with (its command's last but one)
                log = base.with_suffix(".log")
                lines = log.read_text(encoding="utf-8", errors="replace").strip().splitlines() if log.exists() else []
                base.with_suffix(".failed").write_text(f"failed: {(lines or ['no output'])[-1][:200]}",
                                                       encoding="utf-8")

    def start(self, settings, *, again: bool = False) -> str:
        """The training of ``settings``: started unless it runs or ran already (``again``: a training
        that ran is run again, live: its record goes and its checkpoints come anew; its weights stay
        until the new ones replace them, the same numbers, since a training is seeded); ``ValueError``
        for bad settings or when every worker is busy with other trainings."""
        settings.validate()
        key = key_of(settings)
        folder = runs_dir()
        with self._lock:
            self._reap()
            if key in self._jobs or training_elsewhere(folder, key):  # running, here or in another process
                return key
            if (folder / f"{key}.json").exists():
                if not again:
                    return key
                (folder / f"{key}.json").unlink(missing_ok=True)
                (folder / f"{key}.jsonl").unlink(missing_ok=True)
            running = self.busy()
            if running >= limits.MAX_TRAININGS:  # the kind's share (limits.JOB_SHARES["training"])
                raise refusal("training", running)
            (folder / f"{key}.stop").unlink(missing_ok=True)
            (folder / f"{key}.failed").unlink(missing_ok=True)  # an earlier try's failure: this one is tried anew
            with open(folder / f"{key}.log", "wb") as log:
                job = self._jobs[key] = subprocess.Popen(
                    [sys.executable, "-m", "attnviz.learn.worker", trainer_of(settings), json.dumps(asdict(settings)),
                     str(folder), key],
                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        # Reaped as soon as it ends, not at the next look: a server no page asks (the defaults trained at start)
        # kept its finished workers as defunct processes.
        threading.Thread(target=self._reap_when_done, args=(job,), daemon=True, name=f"reap-{key}").start()
        return key

    def _reap_when_done(self, job: subprocess.Popen) -> None:
        job.wait()
        with self._lock:
            self._reap()

    def free(self) -> bool:
        """A worker is free for another training."""
        with self._lock:
            return self.busy() < limits.MAX_TRAININGS

    def busy(self) -> int:
        """Trainings running now (the caller holds the lock)."""
        self._reap()
        return len(self._jobs)

    def progress(self, key: str) -> Progress:
        with self._lock:  # watching a training is a look at them all: whichever ended is let go
            self._reap()
            running = key in self._jobs
        folder = runs_dir()
        base = folder / key
        done_file = base.with_suffix(".json")
        if done_file.exists():
            record = finished_record(done_file)
            return Progress(record["checkpoints"], True, record["status"], record)
        running = running or training_elsewhere(folder, key)  # a replay (above) needs no look at the lock
        checkpoints = []
        lines = base.with_suffix(".jsonl")
        if lines.exists():
            for line in lines.read_text(encoding="utf-8").splitlines():
                try:
                    checkpoints.append(json.loads(line))
                except ValueError:  # the line being written
                    break
        failed = base.with_suffix(".failed")
        if not running and failed.exists():
            return Progress(checkpoints, True, failed.read_text(encoding="utf-8", errors="replace"))
        # A job that ended well but left no record here (its folder was emptied or changed): not started.
        return Progress(checkpoints, False, "running" if running else "not started")

    def stop(self, key: str) -> None:
        (runs_dir() / f"{key}.stop").touch()

    def weights_file(self, key: str) -> Path | None:
        path = runs_dir() / f"{key}.safetensors"
        return path if path.exists() else None


TRAININGS = Trainings()
RECORDS = cache.named("results")  # the finished records, parsed: among the pages' numbers (limits.CACHE_SHARES)


def finished_record(done_file: Path) -> dict:
    """A finished training's record, parsed once per file and kept in the shared results (bounded in bytes). The
    default's is 3.8 MB of JSON, 0.18 s to parse, and Watch it learn looks at its trainings several times a run:
    parsed at each look, a rerun with nothing changed spent about a second on it. Keyed on the file's size and
    time of change, so a record written again (its folder emptied and the key trained anew) is read again. The
    record is shared by every session: read it, never change it."""
    stat = done_file.stat()
    return RECORDS.get_or_compute(("training-record", str(done_file), stat.st_mtime_ns, stat.st_size),
                                  lambda: json.loads(done_file.read_text(encoding="utf-8")))


if __name__ == "__main__":  # the worker process: python -m attnviz.learn.worker TRAINER SETTINGS FOLDER KEY
    _train_to_files(sys.argv[1], json.loads(sys.argv[2]), sys.argv[3], sys.argv[4])
