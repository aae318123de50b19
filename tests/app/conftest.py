"""The whole app's shared fixtures: a module's server (``python -m ui.server`` on a free port) and its
Chromium. A module that needs a server of its own (model folders, a trained runs folder) defines its own
``server``, which wins over this one."""

from __future__ import annotations

import pytest

from tests.support.browserkit import launch, streamlit_server


@pytest.fixture(scope="module")
def server():
    with streamlit_server() as base:
        yield base


@pytest.fixture(scope="module")
def browser():
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install -r requirements-test.txt (playwright)")
    with sync_api.sync_playwright() as p:
        b = launch(p)
        yield b
        b.close()
