"""The image, audio and graph pages, in the app and the CLI: defaults, bad uploads and links, the projections switch."""

from __future__ import annotations

import io

import numpy as np
import pytest

from attnviz import limits
from tests.support.apphelp import app, figures, no_errors, shown
from tests.support.uploads import png_header_only, upload, wav_bytes


@pytest.mark.parametrize("page, n", [("image_patches", 3), ("audio_frames", 2), ("graph_nodes", 2)])
def test_each_page_runs_with_its_defaults(page, n):
    at = app("", page=f"app_pages/{page}.py", timeout=120)
    no_errors(at)
    assert len(figures(at)) == n and any("Verified against" in s.value for s in at.success)


@pytest.mark.parametrize("page, data, words", [
    ("image_patches", b"plain text", "not a PNG or JPEG"),
    ("image_patches", png_header_only(50_000, 50_000), "claims 50,000"),
    ("audio_frames", b"plain text", "not a WAV"),
    ("audio_frames", b"\0" * (limits.MAX_UPLOAD_BYTES + 1), "the limit is 5 MB"),
])
def test_each_page_says_what_is_wrong_with_a_bad_upload(monkeypatch, page, data, words):
    upload(monkeypatch, data, "x")
    at = app("", page=f"app_pages/{page}.py")
    assert not at.exception
    assert any(words in e.value for e in at.error), [e.value for e in at.error]


def test_an_uploaded_image_and_an_hour_long_wav(monkeypatch):
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray((np.random.default_rng(0).random((600, 400, 3)) * 255).astype(np.uint8)).save(buf, "PNG")
    upload(monkeypatch, buf.getvalue(), "photo.png")
    at = app("patch=32&stride=32", page="app_pages/image_patches.py")
    no_errors(at)
    assert any("shown at most 256 pixels" in i.value for i in at.info)
    upload(monkeypatch, wav_bytes(3600), "long.wav")
    at = app("", page="app_pages/audio_frames.py")
    no_errors(at)
    assert any("first 10 s" in i.value for i in at.info)


@pytest.mark.parametrize("query, words", [("patch=100", "larger than the image"),
                                          ("edges=0-1,1-2000", "names node 2000"), ("edges=0-1,x", "not of the form")])
def test_bad_settings_from_a_link(query, words):
    page = "app_pages/graph_nodes.py" if "edges" in query else "app_pages/image_patches.py"
    at = app(query, page=page)
    assert not at.exception
    msgs = [e.value for e in at.error] + [shown(w.value) for w in at.warning]
    assert any(words in m for m in msgs), msgs


def test_cli_renders_each_page_from_a_file_or_a_sample(tmp_path):
    from attnviz import cli

    img = tmp_path / "p.png"
    from PIL import Image

    Image.fromarray(np.zeros((40, 40, 3), dtype=np.uint8)).save(img)
    assert cli.main(["render", "--image", str(img), "--patch", "8", "--view", "grid", "--out",
                     str(tmp_path / "i.json")]) == 0
    wav = tmp_path / "s.wav"
    wav.write_bytes(wav_bytes(1.0, rate=8000, width=2))
    assert cli.main(["render", "--audio", str(wav), "--frame", "256", "--hop", "128", "--out",
                     str(tmp_path / "a.json")]) == 0
    assert cli.main(["render", "--edges", "0-1,1-2", "--out", str(tmp_path / "g.json")]) == 0
    import json

    assert json.loads((tmp_path / "g.json").read_text())["tokens"] == [["node 0", "node 1", "node 2"]]
    assert len(json.loads((tmp_path / "a.json").read_text())["tokens"][0]) == 1 + (8000 - 256) // 128


@pytest.mark.parametrize("page", ["image_patches", "audio_frames", "graph_nodes"])
def test_the_projections_switch_reruns_each_page(page):
    """The page's run is cached on its settings: the Q/K/V switch is one of them."""
    from tests.support.apphelp import heatmaps, z

    def grid(at):
        fig = next(f for f in figures(at) if f["layout"]["title"]["text"].startswith("attention weights per head"))
        return np.nan_to_num(z(heatmaps(fig)[0]))

    at = app("heads=4", page=f"app_pages/{page}.py", timeout=120)
    plain = grid(at)
    at.toggle(key="input_projections").set_value(True).run()
    no_errors(at)
    assert not np.allclose(grid(at), plain)
