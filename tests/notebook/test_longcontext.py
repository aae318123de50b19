"""attnviz.long_view in a notebook: the small multiples, the chosen head and a policy's strip, offline."""

from __future__ import annotations

import pytest

import attnviz

TEXT = "the cat sat on the mat because it was tired " * 10


def test_long_view_returns_its_figures_offline():
    shown = attnviz.long_view("random", TEXT, blocks=10, head=2, policy="streaming", ratio=0.5, html_action="return")
    assert len(shown.figures) == 3
    assert "layer 0, head 2" in shown.figures[1].layout.title.text
    assert "streaming, 50% evicted" in shown.figures[2].layout.title.text
    assert '<script src="http' not in shown.data


def test_long_view_refuses_a_head_that_does_not_exist():
    with pytest.raises(ValueError, match="Layer 0, head 9 does not exist"):
        attnviz.long_view("random", TEXT, head=9, html_action="return")
