import os

import torch

os.environ.setdefault("STREAMLIT_BROWSER_GATHER_USAGE_STATS", "false")
torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))


import sys  # noqa: E402

import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def _fresh_app_caches():
    """The app's caches are process-wide (as on a server); tests that patch the
    computation must not see another test's cached results."""
    mod = sys.modules.get("ui.compute")
    if mod is not None:
        mod.RESULTS.clear()
        mod.FIGURES.clear()
    yield
