import math
import os

import torch

os.environ.setdefault("STREAMLIT_BROWSER_GATHER_USAGE_STATS", "false")
# One thread per worker where the suite runs on several (pytest-xdist sets PYTEST_XDIST_WORKER): the workers
# are already as many as the cores, and more threads than cores slow every one of them.
torch.set_num_threads(1 if os.environ.get("PYTEST_XDIST_WORKER") else max(1, min(2, os.cpu_count() or 1)))


import sys  # noqa: E402

import pytest  # noqa: E402

from attnviz.models import registry  # noqa: E402


def pytest_collection_modifyitems(config, items):
    """``@pytest.mark.minilm``: the test needs MiniLM's files (the registry package); without
    them it is skipped, and the reason says how to install them. The one marker for it: the
    house test checks that every test that runs MiniLM carries it (tests/test_house.py)."""
    if registry.MINILM in registry.available_models():
        return
    skip = pytest.mark.skip(reason=f"MiniLM's files are not installed: {registry.INSTALL}")
    for item in items:
        if "minilm" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _fresh_app_caches():
    """The app's caches are process-wide (as on a server); tests that patch the
    computation must not see another test's cached results."""
    mod = sys.modules.get("ui.compute")
    if mod is not None:
        mod.RESULTS.clear()
        mod.FIGURES.clear()
    yield


@pytest.fixture(scope="session")
def learned_defaults(tmp_path_factory):
    """Watch it learn's default training and its one-layer control, trained once per test run (every
    worker's session reads the same) as the worker trains them (``_train_to_files``, in this process, one thread):
    a runs folder holding their records and weights, as a server's replays read them.
    {"dir": the folder, "keys": [default, control], "records": [default, control]}."""
    import json
    from dataclasses import asdict

    from filelock import FileLock

    from attnviz.learn.worker import _train_to_files, key_of
    from attnviz.views.learn import default_trainings

    # Trained once for the whole run: where the suite runs on several workers (pytest-xdist), their temporary
    # folders share a parent, and the first worker to need the trainings makes them there while the others wait.
    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    folder = root / "learn-runs"
    keys = [key_of(settings) for settings in default_trainings()]
    with FileLock(str(root / "learn-runs.lock")):
        if not (folder / "trained").exists():
            folder.mkdir(exist_ok=True)
            threads = torch.get_num_threads()
            try:
                for settings, key in zip(default_trainings(), keys, strict=True):
                    _train_to_files("learn", asdict(settings), str(folder), key)
            finally:
                torch.set_num_threads(threads)  # the worker's function sets one thread
            (folder / "trained").touch()
    return {"dir": folder, "keys": keys,
            "records": [json.loads((folder / f"{k}.json").read_text(encoding="utf-8")) for k in keys]}


@pytest.fixture(scope="session")
def looked_default(tmp_path_factory):
    """The vision-language page's default training of the model that learns to look (``LookSettings()``), trained
    once per test run into the folder ``learned_defaults`` uses, as the worker trains it (one thread), under a lock
    of its own: while one worker trains Watch it learn's, another may train this one. {"dir", "key", "record"}."""
    import json
    from dataclasses import asdict

    from filelock import FileLock

    from attnviz import limits
    from attnviz.learn.look import LookSettings
    from attnviz.learn.worker import _train_to_files, key_of

    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    folder = root / "learn-runs"
    key = key_of(LookSettings())
    with FileLock(str(root / "looked.lock")):
        folder.mkdir(exist_ok=True)
        if not (folder / "looked").exists():
            threads, most = torch.get_num_threads(), limits.MAX_LEARN_SECONDS
            limits.MAX_LEARN_SECONDS = math.inf  # the goals are in steps: no clock here (a busy machine is slow)
            try:
                _train_to_files("look", asdict(LookSettings()), str(folder), key)
            finally:
                torch.set_num_threads(threads)
                limits.MAX_LEARN_SECONDS = most
            (folder / "looked").touch()
    return {"dir": folder, "key": key, "record": json.loads((folder / f"{key}.json").read_text(encoding="utf-8"))}


@pytest.fixture
def small_caches(monkeypatch):
    """Every shared cache bounded again by its share of a 4 MB ``ATTNVIZ_CACHE_MB`` (``tests.support.budget``):
    {name: cache}; emptied before and after, its bound given back."""
    from tests.support import budget

    yield from budget.small_caches(monkeypatch)
