"""Attention files: ``save_attention`` and ``load_attention``, safetensors or npz, never pickle.

- ``.safetensors``: one tensor "attention", float32 (layers, H, L, S); the metadata holds
  "format" = "attnviz-attention-1" and "tokens" / "source_tokens" as JSON lists of strings
  (and any ``meta`` given, as strings).
- ``.npz`` (``np.savez_compressed``): arrays "attention", "tokens" and "source_tokens"
  (unicode), and "meta" (a JSON string). Read with ``allow_pickle=False``.

Loading checks sizes and shapes from the header before decoding anything: the upload size
against ``limits.MAX_UPLOAD_BYTES`` (bytes or a file object), the declared array against
``limits.MAX_TOKENS`` and ``limits.memory_budget_bytes()``; then that the declared size
matches the data (a lying header), that nothing is cut short (a truncated file), and last
the values and tokens through ``normalise``. ``.pt``, ``.pth``, ``.bin``, ``.pkl`` and
``.pickle`` are refused: unpickling runs code.
"""

from __future__ import annotations

import io
import json
import os
import struct
import zipfile
from pathlib import Path

import numpy as np

from attnviz import limits
from attnviz.atomic import write_atomic
from attnviz.inputs.handover import Attention, normalise

FORMAT = "attnviz-attention-1"
PICKLE_SUFFIXES = (".pt", ".pth", ".bin", ".pkl", ".pickle")
SUFFIXES = (".safetensors", ".npz")
MAX_HEADER_BYTES = 1 << 20  # a safetensors JSON header of one tensor and its tokens
_ST_DTYPES = {"F16": np.dtype("<f2"), "F32": np.dtype("<f4"), "F64": np.dtype("<f8")}
_NPZ_MEMBERS = ("attention", "tokens", "source_tokens", "meta")


def _mb(n: int) -> str:
    return f"{n / 2**20:,.1f} MB"


def _refuse_pickle(name: str) -> None:
    if Path(name).suffix.lower() in PICKLE_SUFFIXES:
        raise ValueError(
            f"{name}: {Path(name).suffix} files are pickles, and loading a pickle runs code, so attnviz never loads "
            "one. Convert it where you trust it: `from attnviz.notebook import save_attention; "
            "save_attention('attention.safetensors', torch.load(path), tokens)` (or a .npz path).")


def _kind(name: str) -> str:
    _refuse_pickle(name)
    suffix = Path(name).suffix.lower()
    if suffix not in SUFFIXES:
        raise ValueError(f"{name}: unknown attention file type {suffix or '(none)'!r}; use .safetensors or .npz.")
    return suffix


def save_attention(path, attention, tokens, *, source_tokens=None, meta=None) -> Attention:
    """Write ``attention`` (any shape ``normalise`` accepts) and its tokens to ``path``
    (.safetensors or .npz), atomically; returns the checked ``Attention`` written."""
    kind = _kind(str(path))
    a = normalise(attention, tokens, source_tokens=source_tokens, signed=getattr(attention, "signed", False))
    meta = {str(k): v if isinstance(v, str) else json.dumps(v) for k, v in (meta or {}).items()}
    reserved = {"format", "tokens", "source_tokens"} & set(meta)
    if reserved:
        raise ValueError(f"meta may not set {sorted(reserved)}: attnviz writes those.")
    if kind == ".safetensors":
        from safetensors.numpy import save

        header = {**meta, "format": FORMAT, "tokens": json.dumps(a.tokens, ensure_ascii=False),
                  "source_tokens": json.dumps(a.source_tokens, ensure_ascii=False)}
        data = save({"attention": a.weights}, metadata=header)
    else:
        buf = io.BytesIO()
        np.savez_compressed(buf, attention=a.weights, tokens=np.array(a.tokens, dtype=np.str_),
                            source_tokens=np.array(a.source_tokens, dtype=np.str_),
                            meta=np.array(json.dumps({**meta, "format": FORMAT}), dtype=np.str_))
        data = buf.getvalue()
    write_atomic(path, data)
    return a


def _check_declared(name: str, shape, itemsize: int) -> int:
    """Bounds from a header's declared shape, before decoding: returns the declared bytes."""
    if not isinstance(shape, (list, tuple)) or not all(isinstance(n, int) and n >= 0 for n in shape):
        raise ValueError(f"{name}: the header's shape {shape!r} is not a list of sizes.")
    if not 2 <= len(shape) <= 5:
        raise ValueError(f"{name}: the header declares {len(shape)} dimensions {list(shape)}; attention has 2 to 5.")
    for n, side in ((shape[-2], "L (queries)"), (shape[-1], "S (keys)")):
        if n > limits.MAX_TOKENS:
            raise ValueError(f"{name}: the header declares {n} tokens along {side}, over the bound of "
                             f"{limits.MAX_TOKENS} (limits.MAX_TOKENS).")
    count = int(np.prod(shape, dtype=object))
    decoded, budget = count * max(itemsize, 4), limits.memory_budget_bytes()
    if decoded > budget:
        raise ValueError(f"{name}: the header declares shape {list(shape)}, {_mb(decoded)} decoded, over the memory "
                         f"budget of {_mb(budget)} (ATTNVIZ_MEMORY_BUDGET_MB); nothing was decoded.")
    return count * itemsize


def _tokens(name: str, raw, what: str):
    if raw is None:
        return None
    try:
        tokens = json.loads(raw) if isinstance(raw, str) else raw
    except json.JSONDecodeError:
        raise ValueError(f"{name}: the {what} metadata is not JSON.") from None
    if not isinstance(tokens, list) or not all(isinstance(t, str) for t in tokens):
        raise ValueError(f"{name}: the {what} metadata is not a list of strings.")
    return tokens


def _check_tokens(name: str, tokens, source_tokens, shape) -> None:
    L, S = shape[-2], shape[-1]
    if tokens is not None and len(tokens) != L:
        raise ValueError(f"{name}: the file's tokens ({len(tokens)}) do not match its attention's L = {L} queries.")
    if source_tokens is not None and len(source_tokens) != S:
        raise ValueError(f"{name}: the file's source_tokens ({len(source_tokens)}) do not match its attention's "
                         f"S = {S} keys.")


def _read_safetensors(name: str, f, size: int) -> tuple[np.ndarray, list | None, list | None]:
    if size < 8:
        raise ValueError(f"{name}: truncated: {size} bytes, shorter than the 8-byte header length.")
    (n,) = struct.unpack("<Q", f.read(8))
    if n > MAX_HEADER_BYTES:
        raise ValueError(f"{name}: the header claims {n:,} bytes, over the {MAX_HEADER_BYTES:,} an attention file's "
                         "header needs: not an attnviz attention file (or a lying header).")
    if 8 + n > size:
        raise ValueError(f"{name}: truncated: the header claims {n:,} bytes but only {size - 8:,} follow its length.")
    try:
        header = json.loads(f.read(n).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise ValueError(f"{name}: the safetensors header is not valid JSON (not a safetensors file?).") from None
    if not isinstance(header, dict):
        raise ValueError(f"{name}: the safetensors header is not a JSON object.")
    meta = header.pop("__metadata__", None) or {}
    if set(header) != {"attention"}:
        raise ValueError(f"{name}: expected one tensor named 'attention'; the file holds {sorted(header) or 'none'}.")
    entry = header["attention"]
    if not isinstance(entry, dict):
        raise ValueError(f"{name}: the header's 'attention' entry is not an object.")
    dtype = _ST_DTYPES.get(entry.get("dtype"))
    if dtype is None:
        raise ValueError(f"{name}: the 'attention' tensor's dtype {entry.get('dtype')!r} is not one of "
                         f"{', '.join(_ST_DTYPES)}.")
    if meta.get("format", FORMAT) != FORMAT:
        raise ValueError(f"{name}: format {meta.get('format')!r} is not {FORMAT!r}.")
    shape = entry.get("shape")
    declared = _check_declared(name, shape, dtype.itemsize)
    offsets = entry.get("data_offsets")
    if (not isinstance(offsets, list) or len(offsets) != 2 or not all(isinstance(o, int) for o in offsets)
            or not 0 <= offsets[0] <= offsets[1]):
        raise ValueError(f"{name}: the header's data_offsets {offsets!r} are not [begin, end].")
    begin, end = offsets
    if end - begin != declared or begin != 0:
        raise ValueError(f"{name}: lying header: shape {shape} of {entry['dtype']} needs {declared:,} bytes, but its "
                         f"data_offsets {offsets} span {end - begin:,}.")
    held = size - 8 - n
    if held < end:
        raise ValueError(f"{name}: truncated: the header declares {end:,} bytes of data, the file holds {held:,}.")
    if held > end:
        raise ValueError(f"{name}: lying header: the file holds {held:,} bytes of data, the header declares {end:,}.")
    tokens, source_tokens = _tokens(name, meta.get("tokens"), "tokens"), _tokens(name, meta.get("source_tokens"),
                                                                                  "source_tokens")
    _check_tokens(name, tokens, source_tokens, shape)
    raw = f.read(end)
    if len(raw) != end:
        raise ValueError(f"{name}: truncated: read {len(raw):,} of {end:,} bytes of data.")
    return np.frombuffer(raw, dtype=dtype).reshape(shape), tokens, source_tokens


def _npy_header(name: str, member: str, m) -> tuple[tuple, bool, np.dtype]:
    try:
        version = np.lib.format.read_magic(m)
        if version == (1, 0):
            return np.lib.format.read_array_header_1_0(m)
        if version == (2, 0):
            return np.lib.format.read_array_header_2_0(m)
    except ValueError as e:
        raise ValueError(f"{name}: {member}.npy has no valid .npy header ({e}).") from None
    raise ValueError(f"{name}: {member}.npy is .npy version {version}; attnviz reads 1.0 and 2.0.")


def _read_npz(name: str, f) -> tuple[np.ndarray, list | None, list | None]:
    try:
        zf = zipfile.ZipFile(f)
    except zipfile.BadZipFile:
        raise ValueError(f"{name}: truncated or not an .npz file: its zip directory cannot be read.") from None
    with zf:
        infos = {Path(i.filename).stem: i for i in zf.infolist()}
        unknown = sorted(set(infos) - set(_NPZ_MEMBERS))
        if unknown or "attention" not in infos or any(not i.filename.endswith(".npy") for i in infos.values()):
            raise ValueError(f"{name}: expected the arrays {', '.join(_NPZ_MEMBERS)} (attention required); the file "
                             f"holds {sorted(i.filename for i in zf.infolist())}.")
        headers = {}
        for member, info in infos.items():  # every header first: nothing is decoded yet
            with zf.open(info) as m:
                shape, fortran, dtype = _npy_header(name, member, m)
                offset = m.tell()
            if dtype.hasobject:
                raise ValueError(f"{name}: {member}.npy holds Python objects, which need pickle: refused.")
            if member == "attention":
                if dtype.kind != "f":
                    raise ValueError(f"{name}: attention.npy has dtype {dtype}; attention is floating point.")
                declared = _check_declared(name, list(shape), dtype.itemsize)
            else:
                if dtype.kind != "U" or len(shape) > 1:
                    raise ValueError(f"{name}: {member}.npy must be a 1-d unicode array, not {dtype} {shape}.")
                declared = int(np.prod(shape, dtype=object)) * dtype.itemsize
                if declared > limits.memory_budget_bytes():
                    raise ValueError(f"{name}: {member}.npy declares {_mb(declared)}, over the memory budget.")
            if info.file_size != offset + declared:
                raise ValueError(f"{name}: lying header: {member}.npy declares {dtype} {tuple(shape)} ({declared:,} "
                                 f"bytes) but its zip entry holds {info.file_size - offset:,} bytes of data.")
            headers[member] = (shape, fortran, dtype, offset, declared, info)
        arrays = {}
        for member, (shape, fortran, dtype, offset, declared, info) in headers.items():
            try:
                with zf.open(info) as m:
                    m.read(offset)
                    raw = m.read(declared)
            except (zipfile.BadZipFile, EOFError, OSError, ValueError) as e:
                raise ValueError(f"{name}: truncated or corrupt: {member}.npy cannot be read ({e}).") from None
            if len(raw) != declared:
                raise ValueError(f"{name}: truncated: {member}.npy holds {len(raw):,} of {declared:,} bytes.")
            arrays[member] = np.frombuffer(raw, dtype=dtype).reshape(shape, order="F" if fortran else "C")
    tokens = [str(t) for t in arrays["tokens"]] if "tokens" in arrays else None
    source_tokens = [str(t) for t in arrays["source_tokens"]] if "source_tokens" in arrays else None
    if "meta" in arrays:
        try:
            fmt = json.loads(str(arrays["meta"])).get("format", FORMAT)
        except (json.JSONDecodeError, AttributeError):
            raise ValueError(f"{name}: meta.npy is not a JSON object.") from None
        if fmt != FORMAT:
            raise ValueError(f"{name}: format {fmt!r} is not {FORMAT!r}.")
    _check_tokens(name, tokens, source_tokens, arrays["attention"].shape)
    return arrays["attention"], tokens, source_tokens


def _sniff(head: bytes) -> str:
    return ".npz" if head[:4] == b"PK\x03\x04" else ".safetensors"


def _open(path_or_bytes, name):
    """(binary file, size, display name, kind); uploads checked against MAX_UPLOAD_BYTES."""
    if isinstance(path_or_bytes, (str, os.PathLike)):
        path = Path(path_or_bytes)
        label = name or path.name
        kind = _kind(str(name or path))
        if not path.is_file():
            raise ValueError(f"{label}: no such file.")
        return open(path, "rb"), path.stat().st_size, label, kind
    if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
        data = bytes(path_or_bytes)
    elif hasattr(path_or_bytes, "read"):  # a file object: an upload (e.g. Streamlit's UploadedFile)
        name = name or getattr(path_or_bytes, "name", None)
        data = path_or_bytes.read(limits.MAX_UPLOAD_BYTES + 1)
    else:
        raise ValueError(f"load_attention takes a path, bytes or a binary file, not {type(path_or_bytes).__name__}.")
    label = str(name) if name else "upload"
    if name:
        _refuse_pickle(str(name))
    if len(data) > limits.MAX_UPLOAD_BYTES:
        raise ValueError(f"{label}: the upload is over the limit of {_mb(limits.MAX_UPLOAD_BYTES)} "
                         "(limits.MAX_UPLOAD_BYTES).")
    kind = _kind(str(name)) if name else _sniff(data)
    return io.BytesIO(data), len(data), label, kind


def load_attention(path_or_bytes, name=None, *, signed: bool = False) -> Attention:
    """An attention file (a path, its bytes or a binary file object; ``name`` gives an
    upload's file name) -> a checked ``Attention``. Every problem is a ``ValueError``
    that names the file and what is wrong."""
    f, size, label, kind = _open(path_or_bytes, name)
    with f:
        w, tokens, source_tokens = _read_safetensors(label, f, size) if kind == ".safetensors" else _read_npz(label, f)
    try:
        return normalise(w, tokens, source_tokens=source_tokens, signed=signed)
    except ValueError as e:
        raise ValueError(f"{label}: {e}") from None
