"""A link renders what the app shows: ``render --from-url`` of every page's own address, and ``render --page P``
with no other flag, succeed for all nineteen pages, on the model the app opens each on (``models_for``);
a model the page cannot run, named by a flag, stops the build with the reason."""

from __future__ import annotations

import json

import pytest

from attnviz import cli
from attnviz.models import open as open_model
from attnviz.views.catalogue import PAGES, models_for
from tests.support.clirun import run_cli


@pytest.fixture(autouse=True)
def trained(learned_defaults, looked_default, monkeypatch):
    monkeypatch.setenv("ATTNVIZ_LEARN_DIR", str(learned_defaults["dir"]))  # the session's trained models


@pytest.mark.parametrize("entry", PAGES, ids=lambda p: p.name)
def test_the_apps_own_address_of_every_page_renders(entry, tmp_path):
    out = tmp_path / "page.json"
    assert cli.main(["render", "--from-url", f"http://localhost:8501/{entry.path}", "--out", str(out)]) == 0
    record = json.loads(out.read_text(encoding="utf-8"))
    assert record  # the page's numbers (or its run's), not an empty file
    model = models_for(entry)[0]
    shown = json.dumps(record)
    assert f'"{model}"' in shown or model == "random"  # its own model, named in its numbers


@pytest.mark.parametrize("entry", [p for p in PAGES if p.reads_residual], ids=lambda p: p.name)
def test_a_page_alone_renders_on_its_own_model_and_refuses_one_it_cannot_run(entry, tmp_path):
    assert cli.main(["render", "--page", entry.name, "--out", str(tmp_path / "a.json")]) == 0
    code, _out, err = run_cli("render", "--page", entry.name, "--model", "random", "--out", "b.json", cwd=tmp_path)
    why = open_model("random").why_not(entry.needs)  # the random layer's kind's words for what the page needs
    assert why.startswith(("is the random layer: it has no unembedding", "has no next token to patch toward"))
    assert code == 2 and f"random {why}" in err and len(err.strip().splitlines()) == 1
