"""python -m attnviz render: formats, views, reproducibility, --from-url, bad input, batches."""

import json
from pathlib import Path

import pytest

from attnviz import cli
from attnviz.cli import render as cli_render
from attnviz.plots import export
from attnviz.views.catalogue import FIGURE_VIEWS
from attnviz.views.state import ViewState
from tests.support.apphelp import app, figures
from tests.support.clirun import run_cli, run_process

HAS_CHROMIUM = export.find_chromium() is not None
NEEDS_CHROMIUM = pytest.mark.skipif(not HAS_CHROMIUM, reason=export.HOW_TO_GET_CHROMIUM)
SMALL = ["--text", "I love AI", "--heads", "2", "--d-model", "16", "--mask", "causal"]


def run(*args, cwd=None, process=False):
    """(exit code, stdout, stderr) of ``render args``: in this process, or as one (``process``)."""
    return (run_process if process else run_cli)("render", *args, cwd=cwd)


@pytest.mark.parametrize("view", FIGURE_VIEWS)
@pytest.mark.parametrize("fmt", ["html", "json", "csv"])
def test_every_view_in_text_formats_is_byte_identical_on_rerun(tmp_path, view, fmt):
    a, b = tmp_path / f"a.{fmt}", tmp_path / f"b.{fmt}"
    for out in (a, b):
        assert cli.main(["render", *SMALL, "--view", view, "--query", "1", "--out", str(out)]) == 0
    assert a.read_bytes() == b.read_bytes() and a.stat().st_size > 100
    if fmt == "json":
        data = json.loads(a.read_text())
        assert data["tokens"] == [["I", "love", "AI"]] and len(data["weights"][0]) == 2
    if fmt == "csv":
        assert a.read_text().splitlines()[0] == "sequence,head,query_pos,query,key_pos,key,weight"
        assert len(a.read_text().splitlines()) == 1 + 2 * 3 * 3
    if fmt == "html":
        html = a.read_text()
        assert "<script src=\"http" not in html and "attnviz-figure" in html  # plotly.js inline: offline
        assert len(html) > 1_000_000


@NEEDS_CHROMIUM
def test_every_view_as_png_and_svg_in_one_batch_twice(tmp_path):
    lines = ['[defaults]', 'text = "I love AI"', 'heads = 2', 'd_model = 16', 'mask = "causal"', 'width = 500',
             'height = 400']
    for view in FIGURE_VIEWS:
        for fmt in ("png", "svg"):
            lines += ["[[figure]]", f'out = "{view}.{fmt}"', f'view = "{view}"']
    lines += ["[[figure]]", 'out = "scaled.png"', "scale = 2.0", 'theme = "dark"', 'colors = "Magma"']
    spec = tmp_path / "figs.toml"
    spec.write_text("\n".join(lines))
    first = {}
    for round_ in range(2):
        code, _, err = run("--spec", str(spec))
        assert code == 0, err
        for view in FIGURE_VIEWS:
            for fmt in ("png", "svg"):
                data = (tmp_path / f"{view}.{fmt}").read_bytes()
                assert data[:4] == b"\x89PNG" if fmt == "png" else b"<svg" in data[:200]
                if round_ == 0:
                    first[view, fmt] = data
                else:
                    assert data == first[view, fmt], f"{view}.{fmt} differs between runs"
    import struct

    width, height = struct.unpack(">II", (tmp_path / "scaled.png").read_bytes()[16:24])
    assert (width, height) == (1000, 800)  # 500 x 400 at scale 2


def test_from_url_equals_the_apps_figure():
    query = "text=I+love+AI&heads=2&d_model=32&mask=window&window=1&seed=4&view=head&head=1&colors=Cividis"
    at = app(query)
    app_fig = figures(at)[0]  # the selected view, alone
    state = cli.state_from({}, from_url="http://localhost:8501/?" + query)
    from ui import compute as C

    # The same figure, as the app sends it to be drawn once (its template written in: tests/test_drawn_once.py).
    fig = cli_render.figure_for(cli.RenderJob(state, Path("x.png")))
    cli_fig = json.loads(C._to_json(C.drawn_once(C.plain_dict(fig)), validate=False))
    for part in ("width", "height"):
        app_fig["layout"].pop(part, None)
        cli_fig["layout"].pop(part, None)
    assert cli_fig == app_fig


def test_theme_and_colours_reach_the_figure():
    state = cli.state_from({"colors": "Magma", "view": "grid"})
    dark = cli_render.figure_for(cli.RenderJob(state, Path("x.png"), theme="dark"))
    light = cli_render.figure_for(cli.RenderJob(state, Path("x.png")))
    assert dark.layout.template.layout.paper_bgcolor != light.layout.template.layout.paper_bgcolor
    assert dark.layout.coloraxis.colorscale[0][1] == light.layout.coloraxis.colorscale[0][1] == "#010004"  # Magma


def test_flags_override_the_url():
    state = cli.state_from({"heads": 8}, from_url="?heads=2&mask=none")
    assert state == ViewState.of(heads=8, mask="none")


@pytest.mark.parametrize(
    "args, words",
    [
        (["--view", "radar", "--out", "x.png"], 'view="radar"'),
        (["--out", "x.gif"], "Unknown output format"),
        (["--heads", "3", "--out", "x.json"], 'heads="3" does not divide'),
        (["--window", "-1", "--out", "x.json"], 'window="-1"'),
        (["--text", "", "--out", "x.json"], "empty"),
        (["--text", "   ", "--out", "x.json"], "empty"),
        (["--out", "/no/such/dir/x.json"], "does not exist"),
        (["--heads", "two", "--out", "x.json"], "invalid int value"),
        (["--theme", "neon", "--out", "x.html"], "theme"),
        (["--device", "cuda:3", "--out", "x.json"], "not available"),
        (["--spec", "missing.toml"], "does not exist"),
        ([], "Give --out"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, words):
    code, out, err = run(*args, cwd=tmp_path)
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and words in err and "Traceback" not in err
    assert not [p for p in tmp_path.iterdir() if p.name != "missing.toml"]  # nothing left behind


def test_a_links_warning_is_a_builds_error_worded_from_its_values():
    with pytest.raises(cli.UsageError) as e:
        cli.state_from({"seed": "x"})
    assert str(e.value) == 'Setting seed="x" is not a number.'
    with pytest.raises(cli.UsageError) as e:
        cli.state_from({}, from_url="?device=tpu")  # a value this machine does not offer: what it offers
    assert str(e.value).startswith('Setting device="tpu" is not available here (available: cpu')


def test_unwritable_output(tmp_path):
    """A path under a regular file cannot be created, by root either (CI runs as root)."""
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    code, _, err = run(*SMALL, "--out", str(blocker / "x.json"), process=True)  # once as a process of its own
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert blocker.read_text() == "not a folder"


def test_cli_selection_errors_name_the_problem(tmp_path):
    code, _, err = run("--text", "I love AI", "--query", "9", "--view", "query", "--out", str(tmp_path / "q.png"))
    assert code == 2 and "Query position 9 is past the last token (2)." in err and "Traceback" not in err
    code, _, err = run("--text", "I love AI", "--seq", "1", "--out", str(tmp_path / "q.json"))
    assert code == 2 and "Sentence 2 does not exist" in err
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("args, words", [
    (["--heads", "512"], 'heads="512" must be between 1 and 64'),
    (["--d-model", "4096"], 'd_model="4096" must be one of'),
    (["--pad-to", "100000"], 'pad_to="100000" must be between 0 and 2048'),
    (["--text", "a\nb\nc\nd\ne\nf\ng\nh\ni\nj\nk\nl\nm\nn\no\np\nq"], "the limit is 16"),
])
def test_bounds_are_the_same_as_the_apps(tmp_path, args, words):
    args = [a.replace("\\n", "\n") for a in args]
    code, _, err = run(*args, "--out", str(tmp_path / "x.json"))
    assert code == 2 and words in err, err


def test_a_link_to_a_page_renders_that_pages_figure(tmp_path):
    cross = "http://localhost:8501/cross-attention?text=I+love+AI&source=a+b+c+d&mask=causal"
    out = tmp_path / "cross.json"
    assert cli.main(["render", "--from-url", cross, "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["source_tokens"] == [["a", "b", "c", "d"]] and data["config"]["mask"] == "padding"
    state = cli.state_from({}, from_url=cross)
    fig = cli_render.figure_for(cli.RenderJob(state, Path("x.png"), page="cross-attention"))
    assert fig.layout.title.text == "cross-attention weights per head"
    from tests.support.apphelp import grid_heads

    assert [len(b["x"]) for b in grid_heads(json.loads(fig.to_json()))] == [4] * 4
    lab = cli.RenderJob(cli.state_from({}, from_url="/mask-lab?masks=none,causal&heads=2&head=1"), Path("x.png"),
                  page="mask-lab")
    titles = [a.text for a in cli_render.figure_for(lab).layout.annotations]
    assert titles == ["mask: none", "mask: causal"]


def test_without_chromium_images_fail_with_advice_but_text_formats_work(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(export, "find_chromium", lambda: None)
    assert cli.main(["render", *SMALL, "--out", str(tmp_path / "x.png")]) == 2
    err = capsys.readouterr().err
    assert "apt-get install -y chromium" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "x.png").exists()
    assert cli.main(["render", *SMALL, "--out", str(tmp_path / "x.html")]) == 0


def test_console_script_is_declared():
    import tomllib

    meta = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    assert meta["project"]["scripts"]["attnviz"] == "attnviz.cli:main"


def test_the_norms_and_neuron_views_put_their_numbers_in_the_json(tmp_path):
    """--view norms: the weighted norms (A · ‖v W_O^h‖) and the knock-out per head; --view
    neurons: q, k, q∘k and the sum that is q·k, for the chosen head and query."""
    import numpy as np

    from attnviz import AttentionConfig, compute
    from attnviz.analysis.contributions import weighted_norms

    out = tmp_path / "norms.json"
    assert cli.main(["render", *SMALL, "--view", "norms", "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    norms, weights = np.array(data["view"]["norms"]), np.array(data["weights"])[0]  # (H, L, S)
    ratio = np.divide(norms, weights, out=np.zeros_like(norms), where=weights > 1e-6)
    for h in range(2):  # every row of a head scales the same key by the same norm
        visible = weights[h] > 1e-6
        per_key = [set(np.round(ratio[h][visible[:, j], j], 4)) for j in range(weights.shape[-1])]
        assert all(len(s) <= 1 for s in per_key)
    ko = data["view"]["knock_out"]
    assert ko["ablation"] == "head output set to zero before W_O" and len(ko["moved"]) == 2
    r = compute(AttentionConfig(text="I love AI", num_heads=2, d_model=16, mask="causal"))
    assert np.allclose(norms, weighted_norms(r.parts, r.weights)[0].numpy(), atol=1e-6)
    out = tmp_path / "neurons.json"
    assert cli.main(["render", *SMALL, "--view", "neurons", "--head", "1", "--query", "1", "--out", str(out)]) == 0
    v = json.loads(out.read_text())["view"]
    assert v["head"] == 1 and v["query"] == 1
    assert np.allclose(v["sum_of_q_times_k"], v["q_dot_k"], atol=1e-5)
    assert np.allclose(np.array(v["q_times_k"]), np.array(v["q"])[None, :] * np.array(v["k"]), atol=1e-6)


def test_a_file_without_values_is_refused_for_the_norms_in_one_line(tmp_path, capsys):
    import numpy as np

    from attnviz.inputs.attention_file import save_attention

    path = tmp_path / "a.safetensors"
    save_attention(path, np.full((1, 2, 3, 3), 1 / 3, dtype=np.float32), ["a", "b", "c"])
    for view in ("norms", "neurons"):
        code = cli.main(["render", "--attention", str(path), "--view", view, "--out", str(tmp_path / "x.json")])
        err = capsys.readouterr().err.strip()
        assert code != 0 and len(err.splitlines()) == 1 and "Traceback" not in err
        assert "weights only" in err or "query and key vectors" in err


def test_roles_and_flow_json_hold_the_scores_and_the_flow(tmp_path, capsys):
    from attnviz.limits import MAX_FLOW_TOKENS

    roles, flow = tmp_path / "r.json", tmp_path / "f.json"
    assert cli.main(["render", *SMALL, "--view", "roles", "--out", str(roles)]) == 0
    assert cli.main(["render", *SMALL, "--view", "flow", "--out", str(flow)]) == 0
    s = json.loads(roles.read_text())["head_scores"]
    assert set(s) >= {"previous_token", "first_token", "self", "induction", "entropy"}
    assert len(s["self"]) == 1 and len(s["self"][0]) == 2  # one layer × two heads
    f = json.loads(flow.read_text())["attention_flow"]
    assert len(f) == 3 and abs(f[0][0] - 1.0) < 1e-9  # causal: the first token only reaches itself
    code = cli.main(["render", "--text", " ".join(["w"] * (MAX_FLOW_TOKENS + 1)), "--view", "flow",
                     "--out", str(tmp_path / "x.json")])
    err = capsys.readouterr().err
    assert code == 2 and not (tmp_path / "x.json").exists()
    assert str(MAX_FLOW_TOKENS) in err and len(err.strip().splitlines()) == 1
