"""Attention files in the app and the CLI: every explorer view, the downloads, bad files."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from attnviz import save_attention
from attnviz.views.attention_file import file_run, sample_file
from attnviz.views.catalogue import views_on
from tests.support.apphelp import app, figures

VIEWS = views_on("attention-file")


def _file(tmp_path, layers=2, H=3, L=5):
    w = torch.softmax(torch.randn(layers, H, L, L, generator=torch.Generator().manual_seed(0)), -1).numpy()
    path = tmp_path / "a.safetensors"
    save_attention(path, w, [f"t{i}" for i in range(L)])
    return path, w


def test_a_file_run_holds_exactly_the_files_weights(tmp_path):
    path, w = _file(tmp_path)
    r = file_run(path.read_bytes(), "a.safetensors", layer=1)
    np.testing.assert_array_equal(r.weights[0].numpy(), w[1])
    np.testing.assert_array_equal(r.layer_weights[:, 0].numpy(), w)
    assert r.layers == 2 and r.heads == 3 and r.tokens[0] == [f"t{i}" for i in range(5)] and not r.notes
    with pytest.raises(ValueError, match="Layer 2 does not exist"):
        file_run(path.read_bytes(), "a.safetensors", layer=2)


@pytest.mark.parametrize("view", VIEWS)
def test_every_explorer_view_draws_the_sample(view):
    at = app(f"view={view}&head=1", page="app_pages/attention_file.py", timeout=120)
    assert not at.exception and not at.error
    if view == "table":
        assert len(at.dataframe) == 1
    elif view in ("norms", "neurons"):  # weights alone: said plainly, never the weights drawn in their place
        assert not figures(at) and any("weights only" in i.value or "query and key vectors" in i.value
                                       for i in at.info)
    else:
        assert figures(at)


def test_pickles_are_refused_and_bad_files_get_a_message(tmp_path):
    with pytest.raises(ValueError, match="runs code"):
        file_run(b"\x80\x04junk", "model.pt")
    data, _name = sample_file()
    with pytest.raises(ValueError):
        file_run(data[: len(data) // 2], "cut.safetensors")  # truncated


def test_the_cli_renders_a_file(tmp_path):
    from attnviz import cli

    path, w = _file(tmp_path)
    out = tmp_path / "run.json"
    assert cli.main(["render", "--attention", str(path), "--layer", "1", "--view", "model", "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    assert np.allclose(np.array(data["weights"])[0], w[1]) and data["config"]["kind"] == "attention file"
    assert cli.main(["render", "--attention", str(path), "--view", "grid", "--out", str(tmp_path / "g.html")]) == 0


def test_the_cli_refuses_a_pickle_in_one_line(tmp_path, capsys):
    from attnviz import cli

    bad = tmp_path / "m.pth"
    bad.write_bytes(b"\x80\x04junk")
    assert cli.main(["render", "--attention", str(bad), "--out", str(tmp_path / "x.png")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "runs code" in err[0]
