import os
from pathlib import Path

import torch

os.environ.setdefault("STREAMLIT_BROWSER_GATHER_USAGE_STATS", "false")
# Trainings are judged by their steps, not by a clock: on a slow or loaded machine the app's 120 s limit stopped
# Watch it learn's default half-way (every process the suite starts inherits this; tests/support/trainings.py).
os.environ.setdefault("ATTNVIZ_MAX_LEARN_SECONDS", "inf")
# The packaged SmolLM2 (538 MB once de-quantized) is left out of the models the app offers, so that the pages that
# open on it (Patching, Circuit, the Logit lens) open on the tiny model in every test but the real model's own
# module, which offers it again and loads it once for the run (tests/models/test_packaged_smollm2.py).
os.environ.setdefault("ATTNVIZ_PACKAGED", "minilm-l6")
# One thread per worker where the suite runs on several (pytest-xdist sets PYTEST_XDIST_WORKER): the workers
# are already as many as the cores, and more threads than cores slow every one of them.
torch.set_num_threads(1 if os.environ.get("PYTEST_XDIST_WORKER") else max(1, min(2, os.cpu_count() or 1)))


import functools  # noqa: E402
import sys  # noqa: E402

import pytest  # noqa: E402


def _scan_components_once() -> None:
    """Streamlit looks for installed custom components at the first run of every ``AppTest`` (a server does it once,
    at start): it reads the metadata of every installed package, about 130 here, 0.3-0.7 s of CPU each time, and the
    in-process page tests make hundreds of ``AppTest``s (the sidebar module: 41, three quarters of its CPU). The
    packages do not change during a run, so the test process reads them once and hands each ``AppTest`` the same
    list (a copy). A server the suite starts still reads them itself."""
    from streamlit.components.v2 import manifest_scanner

    scan = functools.cache(manifest_scanner.scan_component_manifests)
    manifest_scanner.scan_component_manifests = lambda max_workers=None: list(scan())


_scan_components_once()


_TRAINING = []  # the background trainings this process started


def _longest_first(items) -> None:
    """The modules that drive Chromium first (they wait on servers and pages, and are the longest), those of them
    that read the session's trainings after the others (the trainings run meanwhile), then every other module in
    its own order; a module's tests keep theirs. The workers take modules in this order (``make test`` runs
    pytest-xdist with ``--no-loadscope-reorder``, which would put the modules with the most tests first), so the
    long ones start early and the short ones fill the end."""
    from tests.support import trainings

    rank: dict = {}
    for item in items:
        browser = item.get_closest_marker("browser") is not None
        trained = any(name in item.fixturenames for name in trainings.FIXTURES)
        here = 0 if browser and not trained else 1 if browser else 2
        module = item.nodeid.split("::")[0]
        rank[module] = min(rank.get(module, 2), here)
    items.sort(key=lambda item: rank[item.nodeid.split("::")[0]])  # stable: a module's own order is kept


def pytest_sessionstart(session):
    """Every process the suite starts (the servers, their training workers, the CLI's) keeps its trainings in the
    run's own runs folder, the one the session's trainings fill (``learned_defaults``), not in the machine's
    (``/tmp/attnviz-learn``): there, on a fresh machine, every server started the defaults at launch while the
    first one's training still ran. A test that needs a folder of its own sets it."""
    folder = _runs_root(session.config._tmp_path_factory) / "learn-runs"
    folder.mkdir(parents=True, exist_ok=True)
    os.environ["ATTNVIZ_LEARN_DIR"] = str(folder)


def pytest_collection_modifyitems(config, items):
    """The session's trainings start in the background as soon as a collected test needs one
    (``tests/support/trainings.py``). ``@pytest.mark.minilm``: the test needs MiniLM's files (the registry
    package); without them it is skipped, and the reason says how to install them; ``@pytest.mark.smollm2`` alike,
    for SmolLM2's GGUF file. The one marker for it: the
    house test checks that every test that runs MiniLM carries it (tests/test_house.py)."""
    from tests.support import trainings

    _longest_first(items)
    needed = set() if config.option.collectonly else {
        which for item in items for name, which in trainings.FIXTURES.items() if name in item.fixturenames}
    for which in sorted(needed):
        proc = trainings.start(_runs_root(config._tmp_path_factory), which)
        if proc is not None:
            _TRAINING.append(proc)
    from attnviz.models import packaged

    for marker, name, install in (("minilm", packaged.MINILM, packaged.INSTALL),
                                  ("smollm2", packaged.SMOLLM2, packaged.SMOL_INSTALL)):
        if packaged.installed(name):
            continue
        skip = pytest.mark.skip(reason=f"{name}'s files are not installed: {install}")
        for item in items:
            if marker in item.keywords:
                item.add_marker(skip)


def pytest_sessionfinish(session, exitstatus):
    """The trainings this process started end with it: a run stopped early (-x, Ctrl-C) stops them, any other
    waits for them (they end within a couple of minutes of the start, and a worker that is done may have started
    what another still waits on)."""
    stopped = session.shouldstop or session.shouldfail or exitstatus == pytest.ExitCode.INTERRUPTED
    for proc in _TRAINING:
        if stopped and proc.poll() is None:
            proc.kill()
        proc.wait()
    _wait_for_jobs()


def _wait_for_jobs(timeout: float = 120) -> None:
    """The background jobs a test left running (a page's sweep, started by its first run, needed by no later
    one) end before the process does: a process that exits while a job's thread is inside torch is aborted by
    torch's own threads ("terminate called without an active exception", exit status 134)."""
    jobs = sys.modules.get("attnviz.jobs")
    if jobs is None:
        return
    for kind in list(jobs.REGISTRY.values()):
        for job in kind.jobs():
            job.done.wait(timeout)


@pytest.fixture(autouse=True)
def _fresh_app_caches():
    """The app's caches are process-wide (as on a server); tests that patch the
    computation must not see another test's cached results."""
    mod = sys.modules.get("ui.compute")
    if mod is not None:
        mod.RESULTS.clear()
        mod.FIGURES.clear()
    yield


def _runs_root(factory) -> Path:
    """Where the session's trainings live: the workers' temporary folders share a parent (pytest-xdist), so the
    whole run trains them once there; in one process, its own temporary folder."""
    base = factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@pytest.fixture(scope="session")
def learned_defaults(tmp_path_factory):
    """Watch it learn's default training and its one-layer control, trained once per test run as the worker trains
    them (``tests/support/trainings.py``). {"dir": the folder, "keys": [default, control], "records": [...]}."""
    from tests.support import trainings

    return trainings.learned(_runs_root(tmp_path_factory))


@pytest.fixture(scope="session")
def looked_default(tmp_path_factory):
    """The vision-language page's default training of the model that learns to look (``LookSettings()``), trained
    once per test run into the folder ``learned_defaults`` uses. {"dir", "key", "record"}."""
    from tests.support import trainings

    return trainings.looked(_runs_root(tmp_path_factory))


@pytest.fixture(scope="session")
def browser(tmp_path_factory):
    """The test process's Chromium: a profile on disk (``browserkit.Profile``), whose ``new_context`` and ``tab`` give
    a test its tabs. One for every module the process runs, with one Playwright driver: a module's own launched a
    Node driver, Chromium's processes and a renderer whose first page load compiled Streamlit's scripts anew, 1–1.5 s
    of CPU a module (measured, docs/testing.md); and the sync API allows one driver a thread."""
    from tests.support.browserkit import Profile

    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install -r requirements-test.txt (playwright)")
    with sync_api.sync_playwright() as p:
        b = Profile(p, tmp_path_factory.mktemp("chromium-profile"))
        yield b
        b.close()


@pytest.fixture
def small_caches(monkeypatch):
    """Every shared cache bounded again by its share of a 4 MB ``ATTNVIZ_CACHE_MB`` (``tests.support.budget``):
    {name: cache}; emptied before and after, its bound given back."""
    from tests.support import budget

    yield from budget.small_caches(monkeypatch)
