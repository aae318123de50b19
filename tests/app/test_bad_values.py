"""A bad value in a field or a link never hides a page: on each page that reads a typed value (a mask list, a
source text, a graph's edges, a sentence), a link holding a bad one opens the page with a warning that names the
setting, its first chart drawn, and no error. (Patching's, Circuit's and the Logit lens' prompts, answers and
edges: their own tests; Watch it learn's knock-out and sequence, whose training a test process does not run: the
URL parser's warnings, tests/app/test_fuzz.py.)"""

from __future__ import annotations

import pytest

from tests.support.apphelp import app, figures, warnings_shown

CASES = [
    ("app_pages/mask_lab.py", "masks", "nope,causal"),
    ("app_pages/cross_attention.py", "source", "  "),
    ("app_pages/graph_nodes.py", "edges", "0-99,x-y"),
    ("app_pages/step_by_step.py", "text", " "),
    ("app_pages/long_sequences.py", "text", " "),
]


@pytest.mark.parametrize("page, name, value", CASES, ids=[f"{p.split('/')[1][:-3]}-{n}" for p, n, _v in CASES])
def test_a_bad_value_falls_back_with_a_warning_and_the_page_stays(page, name, value):
    at = app(f"{name}={value}", page=page, timeout=120)
    assert not at.exception and not at.error
    assert any(f"URL parameter {name}=" in w for w in warnings_shown(at)), warnings_shown(at)
    assert figures(at)  # its charts, on the value it fell back to
