"""Watch it learn (app_pages/watch_it_learn.py) through AppTest, on the session's trained default model: below
which heads carry the repeat, the page finds and names the induction circuit by the numbers, and says that the
one-layer control has no later head to compose with."""

from __future__ import annotations

import pytest

from tests.support.apphelp import app, figures, no_errors

PAGE = "app_pages/watch_it_learn.py"


@pytest.fixture(autouse=True)
def trained(learned_defaults, monkeypatch):
    monkeypatch.setenv("ATTNVIZ_LEARN_DIR", str(learned_defaults["dir"]))  # the session's trained model


def test_the_circuit_found_by_the_numbers_is_named_on_the_page():
    at = app(page=PAGE, timeout=180)
    no_errors(at)
    assert "The circuit, found by the numbers" in [h.value for h in at.subheader]
    text = " ".join(m.value for m in at.markdown).replace("\\", "")
    assert "L1 H0 brings back" in text and "It reads L0 H" in text and "through its keys" in text
    assert "The one-layer control:" in text and "no later head to compose with" in text
    titles = [f["layout"]["title"]["text"] for f in figures(at)]
    assert any(t.startswith("the circuit found by the numbers") for t in titles)
