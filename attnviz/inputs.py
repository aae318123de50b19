"""Beyond text: image patches, audio frames and graph nodes as the tokens of attention.

Attention is the same formula on any set of vectors. Each input kind here turns its
data into the same small record (``VectorInput``: one label and one vector per token,
and an optional structural mask), knowing nothing about attention; ``compute_vectors``
then runs the same ``MultiHeadAttention`` on it as the text pipeline does.

- **Image patches**, as in the source tutorial (section 10):
  ``image.unfold(2, p, s).unfold(3, p, s)`` → (B, C, nH, nW, p, p), then each patch
  flattened. The tutorial's ``.contiguous().view(B, -1, C*p*p)`` is right for one
  channel only: with C > 1 it strings together values of different patches; here the
  channels are moved behind the patch grid first (``patches_like_the_tutorial`` keeps
  its exact code for the comparison). Tokens: a seeded linear projection of each
  flattened patch plus 2-D sinusoidal positions.
- **Audio frames**: the log-magnitude spectrum (``torch.stft``) of each frame, projected.
- **Graph nodes**: degree plus a seeded embedding; the adjacency matrix with self-loops
  is the attention mask (graph attention), or no mask, for contrast.

Every input is untrusted: sizes are checked before decoding, and bounds come from
``attnviz.limits``.
"""

from __future__ import annotations

import io
import math
import re
import time
import wave
from dataclasses import dataclass, field

import numpy as np
import torch

from . import limits
from .devices import resolve_device
from .embeddings import sinusoidal_positions
from .i18n import _
from .multihead import MultiHeadAttention
from .pipeline import AttentionConfig, AttentionResult, _to_cpu

IMAGE_SAMPLES = ("shapes", "checkerboard", "stripes")
AUDIO_SAMPLES = ("tone-chirp-tone", "two-tones", "clicks")
GRAPH_PRESETS = ("path", "star", "grid", "two-communities")
PATCH_MASKS = ("none", "causal", "window2d")
GRAPH_MASKS = ("adjacency", "none")


@dataclass
class VectorInput:
    kind: str  # "image", "audio", "graph"
    labels: list[str]  # one per token
    x: torch.Tensor  # (L, E) the tokens' vectors
    mask: torch.Tensor | None = None  # (L, L) bool, True = may attend (structural: a graph)
    meta: dict = field(default_factory=dict)  # kind-specific: grid shape, frame times, edges
    notes: list[str] = field(default_factory=list)


def _projection(n_in: int, d_model: int, seed: int, salt: int) -> torch.Tensor:
    """A seeded (n_in, d_model) projection with unit-variance outputs for unit inputs."""
    gen = torch.Generator().manual_seed(int(seed) * 1_000_003 + salt)
    return torch.randn(n_in, d_model, generator=gen) / math.sqrt(max(1, n_in))


def _standardise(x: torch.Tensor) -> torch.Tensor:
    """Zero mean, unit variance per feature over the tokens (an all-equal feature stays 0)."""
    return (x - x.mean(0)) / x.std(0, unbiased=False).clamp_min(1e-6)


# --- images -----------------------------------------------------------------------------


def sample_image(name: str, size: int = 64) -> np.ndarray:
    """A built-in picture drawn in code, (H, W, 3) float in [0, 1]."""
    y, x = np.mgrid[0:size, 0:size] / size
    img = np.ones((size, size, 3))
    if name == "shapes":  # two red squares and a blue disc on white: repeated shapes attend to each other
        for x0, y0 in ((0.1, 0.1), (0.6, 0.6)):
            box = (x >= x0) & (x < x0 + 0.25) & (y >= y0) & (y < y0 + 0.25)
            img[box] = (0.85, 0.15, 0.1)
        disc = (x - 0.75) ** 2 + (y - 0.25) ** 2 < 0.15**2
        img[disc] = (0.1, 0.3, 0.9)
    elif name == "checkerboard":
        board = ((x * 8).astype(int) + (y * 8).astype(int)) % 2 == 0
        img[board] = 0.1
    elif name == "stripes":
        img[..., 0] = 0.5 + 0.5 * np.sin(2 * np.pi * 4 * x)
        img[..., 1] = 0.5 + 0.5 * np.sin(2 * np.pi * 2 * y)
        img[..., 2] = 0.4
    else:
        raise ValueError(f"Unknown sample image {name!r}; choose one of {', '.join(IMAGE_SAMPLES)}.")
    return img.astype(np.float32)


def _too_big(data: bytes) -> None:
    if len(data) > limits.MAX_UPLOAD_BYTES:
        raise ValueError(_("The file has {mb} MB; the limit is {limit} MB.").format(
            mb=f"{len(data) / 2**20:.1f}", limit=f"{limits.MAX_UPLOAD_BYTES / 2**20:.0f}"))


def _claims(pixels: str) -> ValueError:
    return ValueError(_("The image claims {pixels} pixels; the limit is {limit} pixels (it was not decoded).").format(
        pixels=pixels, limit=f"{limits.MAX_IMAGE_PIXELS:,}"))


def read_image(data: bytes) -> tuple[np.ndarray, list[str]]:
    """A PNG or JPEG upload as (H, W, 3) float in [0, 1], shrunk to at most
    ``limits.IMAGE_SIDE`` pixels a side. The header's size is checked before any pixel
    is decoded, so a small file that claims 50,000 × 50,000 pixels costs nothing."""
    from PIL import Image, UnidentifiedImageError

    _too_big(data)
    try:
        img = Image.open(io.BytesIO(data))  # reads the header only
    except Image.DecompressionBombError:  # Pillow's own guard, far above ours: same answer
        w, h = _png_size(data) or (0, 0)
        raise _claims(f"{w:,} × {h:,}" if w else "> 178,956,970") from None
    except (UnidentifiedImageError, OSError):
        raise ValueError(_("That file is not a PNG or JPEG image.")) from None
    if img.format not in ("PNG", "JPEG"):
        raise ValueError(_("That file is a {format} image; upload a PNG or JPEG.").format(format=img.format))
    w, h = img.size
    if w * h > limits.MAX_IMAGE_PIXELS:
        raise _claims(f"{w:,} × {h:,}")
    notes = []
    try:
        img.draft("RGB", (limits.IMAGE_SIDE, limits.IMAGE_SIDE))  # JPEG: decode at a smaller scale
        img = img.convert("RGB")
        if max(img.size) > limits.IMAGE_SIDE:
            notes.append(_("The image ({w} × {h}) is shown at most {side} pixels a side.").format(
                w=w, h=h, side=limits.IMAGE_SIDE))
            img.thumbnail((limits.IMAGE_SIDE, limits.IMAGE_SIDE))
    except (OSError, Image.DecompressionBombError, ValueError) as e:
        raise ValueError(_("The image could not be decoded: {error}.").format(error=e)) from None
    return np.asarray(img, dtype=np.float32) / 255.0, notes


def _png_size(data: bytes) -> tuple[int, int] | None:
    """Width and height from a PNG's IHDR chunk, without decoding anything."""
    if data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR" and len(data) >= 24:
        return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    return None


def patches_like_the_tutorial(image: torch.Tensor, patch_size: int, stride: int) -> torch.Tensor:
    """The source tutorial's code, verbatim: right for one channel (see the module doc)."""
    B, C, H, W = image.shape
    patches = image.unfold(2, patch_size, stride).unfold(3, patch_size, stride)
    patches = patches.contiguous().view(B, -1, C * patch_size**2)
    return patches


def image_patches(image: torch.Tensor, patch_size: int, stride: int) -> tuple[torch.Tensor, int, int]:
    """(B, C, H, W) -> (B, nH·nW, C·p·p) in raster order, and (nH, nW)."""
    B, C, H, W = image.shape
    if patch_size < 1 or stride < 1:
        raise ValueError(_("Patch size and stride must be at least 1 pixel."))
    if patch_size > min(H, W):
        raise ValueError(_("A {p}-pixel patch is larger than the image ({w} × {h}); choose at most {most}.").format(
            p=patch_size, w=W, h=H, most=min(H, W)))
    patches = image.unfold(2, patch_size, stride).unfold(3, patch_size, stride)  # (B, C, nH, nW, p, p)
    nH, nW = patches.shape[2], patches.shape[3]
    patches = patches.permute(0, 2, 3, 1, 4, 5).reshape(B, nH * nW, C * patch_size**2)  # (B, N, C·p·p)
    return patches, nH, nW


def positions_2d(nH: int, nW: int, d_model: int) -> torch.Tensor:
    """2-D sinusoidal positions: half the features encode the row, half the column: (nH·nW, E)."""
    half = d_model // 2
    rows = sinusoidal_positions(nH, half)  # (nH, E/2)
    cols = sinusoidal_positions(nW, d_model - half)  # (nW, E/2)
    return torch.cat([rows.repeat_interleave(nW, 0), cols.repeat(nH, 1)], dim=1)  # (nH·nW, E)


def image_input(image: np.ndarray, patch_size: int, stride: int, d_model: int, seed: int) -> VectorInput:
    t = torch.from_numpy(np.ascontiguousarray(image)).permute(2, 0, 1).unsqueeze(0)  # (1, C, H, W)
    patches, nH, nW = image_patches(t, patch_size, stride)  # (1, N, C·p·p)
    n = nH * nW
    if n > limits.MAX_PATCHES:
        raise ValueError(_("{nH} × {nW} = {n} patches; the limit is {limit}. Use a larger patch or stride.").format(
            nH=nH, nW=nW, n=n, limit=limits.MAX_PATCHES))
    flat = patches[0]  # (N, C·p·p)
    x = _standardise(flat) @ _projection(flat.shape[1], d_model, seed, 1) + positions_2d(nH, nW, d_model)
    labels = [f"r{r}c{c}" for r in range(nH) for c in range(nW)]
    return VectorInput("image", labels, x.to(torch.float32), None,
                       {"grid": (nH, nW), "patch": patch_size, "stride": stride, "size": image.shape[:2]})


def patch_mask(kind: str, nH: int, nW: int, k: int = 1) -> torch.Tensor | None:
    """none; causal in raster order; or window2d: patches within k rows and k columns."""
    n = nH * nW
    if kind == "none":
        return None
    if kind == "causal":
        return torch.ones(n, n, dtype=torch.bool).tril()
    if kind == "window2d":
        r = torch.arange(n) // nW
        c = torch.arange(n) % nW
        return ((r[:, None] - r[None]).abs() <= k) & ((c[:, None] - c[None]).abs() <= k)  # (N, N)
    raise ValueError(f"Unknown patch mask {kind!r}; choose one of {', '.join(PATCH_MASKS)}.")


# --- audio ------------------------------------------------------------------------------


def sample_audio(name: str, rate: int = 8000) -> tuple[np.ndarray, int]:
    """A built-in sound synthesised in code: (samples,) float in [-1, 1], and its rate."""
    seg = int(0.4 * rate)
    t = np.arange(seg) / rate
    tone = np.sin(2 * np.pi * 440 * t)
    if name == "tone-chirp-tone":  # the repeated tone should attend to itself across the chirp
        chirp = np.sin(2 * np.pi * (300 * t + 0.5 * (2500 - 300) / 0.4 * t**2))
        wave_ = np.concatenate([tone, chirp, tone])
    elif name == "two-tones":
        wave_ = np.concatenate([tone, np.sin(2 * np.pi * 1200 * t), tone, np.sin(2 * np.pi * 1200 * t)])
    elif name == "clicks":
        wave_ = np.zeros(3 * seg)
        wave_[:: rate // 10] = 1.0
    else:
        raise ValueError(f"Unknown sample sound {name!r}; choose one of {', '.join(AUDIO_SAMPLES)}.")
    fade = np.minimum(1, np.minimum(np.arange(len(wave_)), np.arange(len(wave_))[::-1]) / (0.01 * rate))
    return (0.8 * wave_ * fade).astype(np.float32), rate


def read_wav(data: bytes) -> tuple[np.ndarray, int, list[str]]:
    """A WAV upload (PCM, 8/16/32-bit, any channels, mixed to mono), its first
    ``limits.MAX_AUDIO_SECONDS`` seconds only: an hour-long file is never read whole."""
    _too_big(data)
    try:
        with wave.open(io.BytesIO(data), "rb") as w:
            rate, channels, width, total = w.getframerate(), w.getnchannels(), w.getsampwidth(), w.getnframes()
            if not 1000 <= rate <= 192_000 or channels < 1 or width not in (1, 2, 4):
                raise ValueError(f"unsupported WAV ({rate} Hz, {channels} channels, {8 * width}-bit)")
            keep = min(total, int(limits.MAX_AUDIO_SECONDS * rate))
            raw = w.readframes(keep)
    except (wave.Error, EOFError, ValueError) as e:
        raise ValueError(_("That file is not a WAV this page can read ({error}); upload a PCM WAV.").format(
            error=e)) from None
    dtype = {1: np.uint8, 2: np.int16, 4: np.int32}[width]
    samples = np.frombuffer(raw[: len(raw) // (width * channels) * width * channels], dtype=dtype)
    samples = samples.reshape(-1, channels).mean(axis=1)
    scale = {1: 128.0, 2: 32768.0, 4: 2147483648.0}[width]
    samples = ((samples - 128.0) if width == 1 else samples) / scale
    notes = []
    if total > keep:
        notes.append(_("The recording lasts {total} s; the first {kept} s are used.").format(
            total=f"{total / rate:.1f}", kept=f"{limits.MAX_AUDIO_SECONDS:.0f}"))
    if len(samples) == 0:
        raise ValueError(_("The WAV file holds no samples."))
    return samples.astype(np.float32), rate, notes


def frame_count(n_samples: int, frame: int, hop: int) -> int:
    """Frames of ``frame`` samples every ``hop`` samples, none past the end."""
    return 0 if n_samples < frame else 1 + (n_samples - frame) // hop


def spectrogram(samples: np.ndarray, frame: int, hop: int) -> torch.Tensor:
    """Log-magnitude spectrum of each frame: (frames, frame // 2 + 1)."""
    if not 16 <= frame <= 8192 or not 1 <= hop <= frame:
        raise ValueError(_("The frame must be 16–8192 samples and the hop between 1 and the frame length."))
    n = frame_count(len(samples), frame, hop)
    if n == 0:
        raise ValueError(_("The sound ({n} samples) is shorter than one frame ({frame} samples).").format(
            n=len(samples), frame=frame))
    if n > limits.MAX_FRAMES:
        raise ValueError(_("{n} frames; the limit is {limit}. Use a longer hop.").format(n=n, limit=limits.MAX_FRAMES))
    spec = torch.stft(torch.from_numpy(samples), n_fft=frame, hop_length=hop, window=torch.hann_window(frame),
                      center=False, return_complex=True)  # (F, frames)
    return torch.log1p(spec.abs()).T.contiguous()  # (frames, F)


def audio_input(samples: np.ndarray, rate: int, frame: int, hop: int, d_model: int, seed: int) -> VectorInput:
    spec = spectrogram(samples, frame, hop)  # (frames, F)
    x = _standardise(spec) @ _projection(spec.shape[1], d_model, seed, 2) + sinusoidal_positions(len(spec), d_model)
    labels = [f"{i * hop / rate:.2f}s" for i in range(len(spec))]
    return VectorInput("audio", labels, x.to(torch.float32), None,
                       {"spectrogram": spec, "rate": rate, "frame": frame, "hop": hop})


# --- graphs -----------------------------------------------------------------------------


def preset_edges(name: str) -> str:
    if name == "path":
        return ", ".join(f"{i}-{i + 1}" for i in range(7))
    if name == "star":
        return ", ".join(f"0-{i}" for i in range(1, 8))
    if name == "grid":
        edges = [(r * 3 + c, r * 3 + c + 1) for r in range(3) for c in range(2)]
        edges += [(r * 3 + c, (r + 1) * 3 + c) for r in range(2) for c in range(3)]
        return ", ".join(f"{a}-{b}" for a, b in edges)
    if name == "two-communities":
        a = [(i, j) for i in range(5) for j in range(i + 1, 5)]
        b = [(i, j) for i in range(5, 10) for j in range(i + 1, 10)]
        return ", ".join(f"{i}-{j}" for i, j in [*a, *b, (4, 5)])
    raise ValueError(f"Unknown graph {name!r}; choose one of {', '.join(GRAPH_PRESETS)}.")


_EDGE = re.compile(r"^\s*(\d{1,12})\s*(?:-|–|,|\s)\s*(\d{1,12})\s*$")


def parse_edges(text: str) -> tuple[int, list[tuple[int, int]], list[str]]:
    """"0-1, 1-2" or one "a b" per line -> (node count, undirected edges, notes).

    Nodes are 0 … n−1. A malformed item or a node past the bound raises ``ValueError``
    naming it; a self-loop or a repeated edge is dropped with a note (self-loops are
    always part of the attention mask).
    """
    items = [it for it in re.split(r"[,;\n]", text) if it.strip()]
    if len(text) > limits.MAX_TEXT_CHARS:
        raise ValueError(_("The edge list has {n} characters; the limit is {limit}.").format(
            n=f"{len(text):,}", limit=f"{limits.MAX_TEXT_CHARS:,}"))
    if not items:
        raise ValueError(_("The edge list is empty: type edges like 0-1, 1-2."))
    edges, seen, notes = [], set(), []
    for k, item in enumerate(items, 1):
        m = _EDGE.match(item)
        if not m:
            raise ValueError(_("Edge {k} ({item}) is not of the form a-b with node numbers, like 0-1.").format(
                k=k, item=repr(item.strip()[:30])))
        a, b = int(m.group(1)), int(m.group(2))
        for node in (a, b):
            if node >= limits.MAX_GRAPH_NODES:
                raise ValueError(_("Edge {k} names node {node}; nodes are numbered 0 to {last}.").format(
                    k=k, node=node, last=limits.MAX_GRAPH_NODES - 1))
        if a == b:
            notes.append(_("Self-loop {a}-{b} dropped: every node already attends to itself.").format(a=a, b=b))
            continue
        key = (min(a, b), max(a, b))
        if key in seen:
            notes.append(_("Edge {a}-{b} is listed twice; kept once.").format(a=a, b=b))
            continue
        seen.add(key)
        edges.append(key)
    n = max((max(e) for e in edges), default=max(int(_EDGE.match(items[0]).group(1)), 0)) + 1
    return n, edges, notes


def adjacency(n: int, edges: list[tuple[int, int]]) -> torch.Tensor:
    """The adjacency matrix with self-loops, as a bool mask (True = may attend): (n, n)."""
    a = torch.eye(n, dtype=torch.bool)
    for i, j in edges:
        a[i, j] = a[j, i] = True
    return a


def graph_input(n: int, edges: list[tuple[int, int]], d_model: int, seed: int, mask_kind: str) -> VectorInput:
    if mask_kind not in GRAPH_MASKS:
        raise ValueError(f"Unknown graph mask {mask_kind!r}; choose one of {', '.join(GRAPH_MASKS)}.")
    adj = adjacency(n, edges)
    degree = (adj.sum(1) - 1).to(torch.float32)  # (n,)
    gen = torch.Generator().manual_seed(int(seed) * 1_000_003 + 3)
    own = torch.randn(n, d_model, generator=gen)  # each node's seeded embedding
    deg_dir = torch.randn(d_model, generator=gen)  # one direction that carries the degree
    x = own + (degree - degree.mean()).unsqueeze(1) * deg_dir
    return VectorInput("graph", [f"node {i}" for i in range(n)], x, adj if mask_kind == "adjacency" else None,
                       {"edges": edges, "n": n, "degree": degree.tolist()})


# --- attention over any of them ---------------------------------------------------------


def compute_vectors(inp: VectorInput, *, num_heads: int, d_model: int, seed: int = 0, device: str = "cpu",
                    mask: torch.Tensor | None = None, projections: bool = True,
                    description: str = "") -> AttentionResult:
    """Multi-head self-attention over ``inp``'s vectors, with the same module, masks,
    budget and result as text. ``mask`` (L, L) bool is combined with ``inp.mask``."""
    t0 = time.perf_counter()
    L, E = inp.x.shape
    config = AttentionConfig(text=description or f"{inp.kind}: {L} tokens", num_heads=num_heads, d_model=d_model,
                             mask="none", seed=seed, device=device, positional=False, projections=projections)
    config.validate()
    if E != d_model:
        raise ValueError(f"The input vectors have width {E}, the model {d_model}.")
    limits.check_budget(limits.RunSize(1, num_heads, L, L, d_model))
    full = inp.mask if mask is None else (mask if inp.mask is None else mask & inp.mask)  # (L, L)
    gen = torch.Generator().manual_seed(int(seed))
    model = MultiHeadAttention(d_model, num_heads, generator=gen)
    if not projections:
        model.identity_()
    dev = resolve_device(device)
    x = inp.x.unsqueeze(0)  # (1, L, E)
    with torch.no_grad():
        steps = model.to(dev).steps(x.to(dev), attn_mask=None if full is None else full.to(dev))
    timings = {"attention": (time.perf_counter() - t0) * 1e3}
    return AttentionResult(
        config=config, tokens=[list(inp.labels)], source_tokens=[list(inp.labels)], lengths=[L], source_lengths=[L],
        embeddings=x, source_embeddings=x, mask=full, steps=_to_cpu(steps), model=model.cpu(), device=str(dev),
        timings_ms=timings, notes=list(inp.notes),
    )  # fmt: skip
