"""Image patches, audio frames and graph nodes as tokens: extraction, masks, parity, bad input."""

from __future__ import annotations

import io
import struct
import wave
import zlib

import numpy as np
import pytest
import torch
from torch import nn

from attnviz import inputs as I
from attnviz import limits
from attnviz.analysis.verify import verify_result
from attnviz.core.masks import to_torch_mha_mask
from attnviz.models.random import RandomLayer
from attnviz.run.run import run

from .apphelp import app, figures, no_errors, shown


def test_patches_equal_the_tutorials_unfold_and_keep_channels_apart():
    gray = torch.rand(2, 1, 12, 12)
    ours, nH, nW = I.image_patches(gray, 4, 4)
    assert (nH, nW) == (3, 3)
    torch.testing.assert_close(ours, I.patches_like_the_tutorial(gray, 4, 4), rtol=0, atol=0)  # one channel
    rgb = torch.rand(1, 3, 8, 8)
    ours, _, _ = I.image_patches(rgb, 4, 4)
    first = rgb[0, :, :4, :4].reshape(-1)  # the top-left patch, every channel
    torch.testing.assert_close(ours[0, 0], first)
    assert not torch.equal(I.patches_like_the_tutorial(rgb, 4, 4)[0, 0], first)  # the tutorial's view mixes them
    overlap, nH, nW = I.image_patches(rgb, 4, 2)
    assert (nH, nW) == (3, 3) and overlap.shape == (1, 9, 48)


def test_the_graph_mask_is_the_adjacency_plus_the_identity():
    n, edges, notes = I.parse_edges("0-1, 1-2\n3 1")
    assert n == 4 and edges == [(0, 1), (1, 2), (1, 3)] and not notes
    g = I.graph_input(n, edges, 16, 0, "adjacency")
    expected = torch.eye(4, dtype=torch.bool)
    for a, b in edges:
        expected[a, b] = expected[b, a] = True
    assert torch.equal(g.mask, expected)
    assert I.graph_input(n, edges, 16, 0, "none").mask is None
    r = run(g, RandomLayer(16, 2), keep_steps=True)
    assert r.mask_name == "adjacency"
    assert (r.weights[0][:, ~expected] == 0).all()  # non-neighbours get exactly nothing


@pytest.mark.parametrize("kind", ["image", "audio", "graph"])
def test_attention_over_other_inputs_matches_pytorch(kind):
    if kind == "image":
        inp = I.image_input(I.sample_image("shapes"), 8, 8, 32, 1, "window2d", 1)
        assert torch.equal(inp.mask, I.patch_mask("window2d", *inp.meta["grid"], 1))
    elif kind == "audio":
        inp = I.audio_input(*I.sample_audio("two-tones"), 256, 128, 32, 1)
    else:
        inp = I.graph_input(*I.parse_edges(I.preset_edges("star"))[:2], 32, 1, "adjacency")
    r = run(inp, RandomLayer(32, 4, seed=1), keep_steps=True)
    mha = nn.MultiheadAttention(32, 4, batch_first=True)
    with torch.no_grad():
        mha.in_proj_weight.copy_(r.model.in_proj_weight)
        mha.in_proj_bias.copy_(r.model.in_proj_bias)
        mha.out_proj.weight.copy_(r.model.out_proj.weight)
        mha.out_proj.bias.copy_(r.model.out_proj.bias)
        m = None if r.mask is None else to_torch_mha_mask(r.mask)
        out, w = mha(r.embeddings, r.embeddings, r.embeddings, attn_mask=m, average_attn_weights=False)
    torch.testing.assert_close(r.weights, w, rtol=0, atol=1e-5)
    torch.testing.assert_close(r.output, out, rtol=0, atol=1e-5)
    assert verify_result(r).passed


def test_without_projections_attention_is_plain_similarity():
    inp = I.graph_input(*I.parse_edges("0-1")[:2], 8, 0, "none")
    r = run(inp, RandomLayer(8, 1, projections=False), keep_steps=True)
    x = inp.x[0]  # (L, E)
    expected = torch.softmax(x @ x.T / 8**0.5, -1)
    torch.testing.assert_close(r.weights[0, 0], expected, rtol=0, atol=1e-6)


@pytest.mark.parametrize("n, frame, hop", [(8000, 256, 128), (1000, 256, 100), (256, 256, 1), (4096, 512, 512)])
def test_the_frame_count_follows_from_length_frame_and_hop(n, frame, hop):
    samples = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    assert I.frame_count(n, frame, hop) == 1 + (n - frame) // hop
    assert I.spectrogram(samples, frame, hop).shape == (1 + (n - frame) // hop, frame // 2 + 1)


def png_header_only(width: int, height: int) -> bytes:
    """A PNG whose header claims width × height but whose data is a few bytes."""
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(b"\0" * 16)) + chunk(b"IEND", b""))


def wav_bytes(seconds: float, rate: int = 1000, width: int = 1) -> bytes:
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(width)
        w.setframerate(rate)
        w.writeframes(bytes(int(rate * seconds) * width))
    return buf.getvalue()


def test_a_decompression_bomb_is_refused_from_its_header():
    with pytest.raises(ValueError, match="claims 50,000 × 50,000 pixels.*not decoded"):
        I.read_image(png_header_only(50_000, 50_000))


@pytest.mark.parametrize("data, words", [(b"not an image at all", "not a PNG or JPEG"),
                                         (b"GIF89a" + b"\0" * 30, "not a PNG or JPEG"),
                                         (b"\0" * (limits.MAX_UPLOAD_BYTES + 1), "the limit is 5 MB")])
def test_files_that_are_not_images(data, words):
    with pytest.raises(ValueError, match=words):
        I.read_image(data)


def test_an_hour_long_wav_is_capped_and_says_so():
    data = wav_bytes(3600, rate=1000)  # 3.6 MB: under the upload cap
    samples, rate, notes = I.read_wav(data)
    assert len(samples) == limits.MAX_AUDIO_SECONDS * rate and "3600.0 s" in notes[0] and "first 10 s" in notes[0]
    with pytest.raises(ValueError, match="not a WAV"):
        I.read_wav(b"RIFF....WAVEfmt junk")


def test_a_patch_larger_than_the_image():
    with pytest.raises(ValueError, match="larger than the image"):
        I.image_input(I.sample_image("shapes", 32), 48, 48, 16, 0)


@pytest.mark.parametrize("text, words", [("0-1, 1-1000000000", "names node 1000000000"),
                                         ("0-1\nfoo", "Edge 2 .* is not of the form"), ("", "empty")])
def test_bad_edge_lists(text, words):
    with pytest.raises(ValueError, match=words):
        I.parse_edges(text)


def test_self_loops_and_repeats_are_dropped_with_a_note():
    n, edges, notes = I.parse_edges("0-1, 1-1, 1-0, 2-1")
    assert edges == [(0, 1), (1, 2)] and any("Self-loop 1-1" in x for x in notes) and any("twice" in x for x in notes)


@pytest.mark.parametrize("page, n", [("image_patches", 3), ("audio_frames", 2), ("graph_nodes", 2)])
def test_each_page_runs_with_its_defaults(page, n):
    at = app("", page=f"app_pages/{page}.py", timeout=120)
    no_errors(at)
    assert len(figures(at)) == n and any("Verified against" in s.value for s in at.success)


def upload(monkeypatch, data: bytes, name: str) -> None:
    import ui.widgets

    monkeypatch.setattr(ui.widgets, "uploaded_bytes", lambda *a, **k: (data, name))


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
    from .apphelp import heatmaps, z

    def grid(at):
        fig = next(f for f in figures(at) if f["layout"]["title"]["text"] == "attention weights per head")
        return np.nan_to_num(z(heatmaps(fig)[0]))

    at = app("heads=4", page=f"app_pages/{page}.py", timeout=120)
    plain = grid(at)
    at.toggle(key="input_projections").set_value(True).run()
    no_errors(at)
    assert not np.allclose(grid(at), plain)
