"""attnviz.inputs.attention_file: attention files (safetensors, npz) round-trip; pickles, lying headers, huge
shapes, NaN and object arrays are refused before anything is decoded."""

from __future__ import annotations

import io
import json
import struct
import zipfile

import numpy as np
import pytest
import torch

from attnviz import limits
from attnviz import notebook as nb
from attnviz.inputs import attention_file as files
from tests.support.weights import LAYERS, TOKENS, H, W, weights


def safetensors_bytes(header: dict, data: bytes) -> bytes:
    raw = json.dumps(header).encode()
    return struct.pack("<Q", len(raw)) + raw + data


def npz_bytes(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buf.getvalue()


def npy(shape, dtype="<f4", data: bytes | None = None) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": dtype, "fortran_order": False, "shape": tuple(shape)})
    return buf.getvalue() + (data if data is not None else b"")


def good_header(shape, nbytes, tokens=None):
    meta = {"format": files.FORMAT, **({"tokens": json.dumps(tokens)} if tokens is not None else {})}
    return {"__metadata__": meta, "attention": {"dtype": "F32", "shape": shape, "data_offsets": [0, nbytes]}}


@pytest.mark.parametrize("ext", ["safetensors", "npz"])
def test_attention_files_round_trip(tmp_path, ext):
    cross = weights(q=2, k=3)
    path = tmp_path / f"run.{ext}"
    nb.save_attention(path, tuple(torch.from_numpy(cross[i]).unsqueeze(0) for i in range(LAYERS)), ["a", "b"],
                      source_tokens=["x", "y", "中文"], meta={"model": "tiny", "step": 3})
    for source in (path, str(path), path.read_bytes(), io.BytesIO(path.read_bytes())):
        a = nb.load_attention(source, name=None if not isinstance(source, bytes) else path.name)
        np.testing.assert_array_equal(a.weights, cross)
        assert (a.tokens, a.source_tokens) == (["a", "b"], ["x", "y", "中文"])
    if ext == "safetensors":
        from safetensors import safe_open

        with safe_open(str(path), "numpy") as f:
            meta = f.metadata()
            assert f.get_tensor("attention").dtype == np.float32
        assert meta["format"] == "attnviz-attention-1" and json.loads(meta["tokens"]) == ["a", "b"]
    else:
        with np.load(path, allow_pickle=False) as f:
            assert f["tokens"].dtype.kind == "U" and f["attention"].shape == (LAYERS, H, 2, 3)


@pytest.mark.parametrize("ext", files.PICKLE_SUFFIXES)
def test_pickle_formats_are_refused_with_how_to_convert(tmp_path, ext):
    message = r"pickles, and loading a pickle runs code.*save_attention\("
    path = tmp_path / f"attention{ext}"
    path.write_bytes(b"\x80\x04K\x01.")  # a pickle: never opened
    with pytest.raises(ValueError, match=message):
        nb.load_attention(path)
    with pytest.raises(ValueError, match=message):
        nb.load_attention(b"\x80\x04K\x01.", name=f"upload{ext}")
    with pytest.raises(ValueError, match=message):
        nb.save_attention(path, W, TOKENS)


def test_a_lying_safetensors_header_is_refused():
    data = np.full((1, 1, 2, 2), 0.5, dtype="<f4").tobytes()
    claims_less = good_header([1, 1, 2, 2], 8)
    with pytest.raises(ValueError, match=r"lying header: shape \[1, 1, 2, 2\] of F32 needs 16 bytes.*span 8"):
        nb.load_attention(safetensors_bytes(claims_less, data[:8]), name="a.safetensors")
    with pytest.raises(ValueError, match="lying header: the file holds 32 bytes of data, the header declares 16"):
        nb.load_attention(safetensors_bytes(good_header([1, 1, 2, 2], 16), data * 2), name="a.safetensors")
    with pytest.raises(ValueError, match="the header claims .* bytes, over"):
        nb.load_attention(struct.pack("<Q", 2**40) + b"{}", name="a.safetensors")


def test_a_lying_npz_header_is_refused():
    member = npy((1, 1, 4, 4), data=np.full(8, 0.25, dtype="<f4").tobytes())  # declares 16 floats, holds 8
    with pytest.raises(ValueError, match=r"lying header: attention.npy declares float32 \(1, 1, 4, 4\) \(64 bytes\)"):
        nb.load_attention(npz_bytes({"attention.npy": member}), name="a.npz")


@pytest.mark.parametrize("ext", ["safetensors", "npz"])
def test_a_truncated_file_is_refused(tmp_path, ext):
    path = tmp_path / f"a.{ext}"
    nb.save_attention(path, W, TOKENS)
    data = path.read_bytes()
    with pytest.raises(ValueError, match="truncated"):
        nb.load_attention(data[:-10], name=path.name)
    with pytest.raises(ValueError, match="truncated"):
        nb.load_attention(data[:5], name=path.name)


def test_a_header_declaring_a_huge_shape_is_refused_before_decoding(monkeypatch):
    decoded = []
    real = files.np.frombuffer
    monkeypatch.setattr(files.np, "frombuffer", lambda *a, **k: decoded.append(1) or real(*a, **k))
    shape = [64, 64, 2048, 2048]
    nbytes = 64 * 64 * 2048 * 2048 * 4  # consistent offsets: only the budget can refuse it
    with pytest.raises(ValueError, match=r"declares shape \[64, 64, 2048, 2048\], 65,536.0 MB decoded, over the"):
        nb.load_attention(safetensors_bytes(good_header(shape, nbytes), b"\0" * 64), name="huge.safetensors")
    with pytest.raises(ValueError, match="over the memory budget"):
        nb.load_attention(npz_bytes({"attention.npy": npy(shape, data=b"\0" * 64)}), name="huge.npz")
    with pytest.raises(ValueError, match="4096 tokens along L"):
        nb.load_attention(safetensors_bytes(good_header([1, 1, 4096, 4], 4096 * 16), b""), name="long.safetensors")
    assert not decoded


def test_uploads_over_the_limit_are_refused(monkeypatch):
    monkeypatch.setattr(limits, "MAX_UPLOAD_BYTES", 100)
    with pytest.raises(ValueError, match="over the limit of"):
        nb.load_attention(b"\0" * 101, name="a.npz")
    with pytest.raises(ValueError, match="over the limit of"):
        nb.load_attention(io.BytesIO(b"\0" * 500))


def test_nan_in_a_file_is_refused():
    from safetensors.numpy import save

    bad = W.copy()
    bad[0, 1, 2, 3] = np.nan
    st = save({"attention": bad}, metadata={"format": files.FORMAT, "tokens": json.dumps(TOKENS)})
    with pytest.raises(ValueError, match=r"bad.safetensors: attention contains NaN .*layer 0, head 1, query 2, key 3"):
        nb.load_attention(st, name="bad.safetensors")
    buf = io.BytesIO()
    np.savez_compressed(buf, attention=bad)
    with pytest.raises(ValueError, match="bad.npz: attention contains NaN"):
        nb.load_attention(buf.getvalue(), name="bad.npz")


def test_tokens_that_do_not_match_the_file_are_refused():
    from safetensors.numpy import save

    st = save({"attention": W}, metadata={"format": files.FORMAT, "tokens": json.dumps(TOKENS[:3])})
    with pytest.raises(ValueError, match=r"the file's tokens \(3\) do not match its attention's L = 4 queries"):
        nb.load_attention(st, name="a.safetensors")
    buf = io.BytesIO()
    np.savez_compressed(buf, attention=W, tokens=np.array(TOKENS), source_tokens=np.array(TOKENS + ["x"]))
    with pytest.raises(ValueError, match=r"source_tokens \(5\) do not match its attention's S = 4 keys"):
        nb.load_attention(buf.getvalue(), name="a.npz")
    not_strings = save({"attention": W}, metadata={"tokens": json.dumps([1, 2, 3, 4])})
    with pytest.raises(ValueError, match="not a list of strings"):
        nb.load_attention(not_strings, name="a.safetensors")


def test_object_arrays_in_an_npz_are_refused_without_unpickling():
    buf = io.BytesIO()
    np.savez(buf, attention=W, tokens=np.array(TOKENS, dtype=object))
    with pytest.raises(ValueError, match="need pickle: refused"):
        nb.load_attention(buf.getvalue(), name="a.npz")
