"""The whole app's shared fixtures: a module's server (``python -m ui.server`` on a free port) and one with the
session's trainings. A module that needs a server of its own (model folders, a trained runs folder) defines its own
``server``, which wins over this one. Chromium is the test process's (``browser``, tests/conftest.py)."""

from __future__ import annotations

import pytest

from tests.support.browserkit import streamlit_server


@pytest.fixture(scope="module")
def server():
    with streamlit_server() as base:
        yield base


@pytest.fixture(scope="module")
def trained_server(learned_defaults, looked_default):
    """The app with the session's trainings on disk (Watch it learn's and the model that learns to look's): the
    pages that show them replay them, and the server starts no training of its own while the pages are measured."""
    with streamlit_server(env={"ATTNVIZ_LEARN_DIR": str(looked_default["dir"])}) as base:
        yield base
