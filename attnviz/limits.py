"""Every bound of attnviz, in one place.

The URL parser, the sidebar widgets, the CLI and the Python API all read these
numbers, so a value refused (or clamped, with a message) by one door is refused by
every door. The memory budget is checked *before* anything is allocated: a run's
size is known from (lines, heads, query length, key length, width) alone.

Two bounds are read from the environment when the process starts, so a server can
be sized without editing code:

- ``ATTNVIZ_MEMORY_BUDGET_MB`` (default 448): the most one run may hold.
- ``ATTNVIZ_CACHE_MB`` (default 512): the most the shared caches hold, all of them together
  (``CACHE_SHARES``: results, figures, finished jobs, the Q/K map's runs, lookups, the random layers).

The defaults keep a 2-core, 4 GB server inside its memory with a classroom on it:
about 0.5 GB for Python, torch and Streamlit, at most two runs computing at once
(``MAX_CONCURRENT_RUNS``, 2 × 0.45 GB), and the cache (0.5 GB): under 2 GB.

A run keeps every intermediate (scores, scaled, masked, weights, dropout) when they fit
the budget. When only the weights fit, it keeps those ("lean": the explorer and the
cross-attention page work; the step-by-step, mask-lab, gradients and verify pages say
which sizes they can show). That is how 2048 tokens × 16 heads fit: 268 MB of weights.

May import: attnviz.i18n.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from attnviz.i18n import _

MAX_TOKENS = 2048  # tokens per line (queries or keys)
MAX_LINES = 16  # lines of a padded batch
MAX_TEXT_CHARS = 20_000  # characters of the text box (and of a URL's text=)
MAX_HEADS = 64
# A GGUF file's header, checked before any tensor is read (attnviz.models.gguf): the largest vocabulary (Gemma's
# 262,144 tokens fit) and context length it may claim; its weights are bounded by ATTNVIZ_MAX_MODEL_MB.
MAX_GGUF_VOCAB = 262_144
MAX_GGUF_CONTEXT = 1_048_576
MAX_GENERATE = 32  # tokens a causal LM generates greedily in one request
MAX_LAYERS = 64  # a pretrained model's layers a link may name (the model itself bounds it further)
D_MODELS = (8, 16, 32, 64, 128, 256, 512)  # the widths offered everywhere
MAX_D_MODEL = D_MODELS[-1]
MAX_SEED = 2**31 - 1
MAX_WINDOW = MAX_TOKENS
MAX_DROPOUT = 0.9
MAX_CONCURRENT_RUNS = 2  # computations at once in one server process (one per core here)
# Page runs take turns, one at a time per process (ui/admission.py); a run that holds its
# turn longer than this goes on beside the queue, so no run waits longer behind another.
PAGE_LEASE_S = 0.1
# Other inputs (image patches, audio frames, graph nodes)
MAX_UPLOAD_BYTES = 5 * 2**20  # an uploaded image or WAV (also Streamlit's server.maxUploadSize)
MAX_IMAGE_PIXELS = 40_000_000  # what an image's header may claim, checked before decoding
IMAGE_SIDE = 256  # images are shrunk to at most this many pixels a side
MAX_PATCHES = 1024
MAX_PATCH = 128  # an image patch's side and stride, in pixels
MAX_PATCH_REACH = 32  # window2d: rows and columns a patch reaches
MAX_AUDIO_SECONDS = 10.0  # longer recordings: the first seconds only, and the page says so
MAX_FRAMES = 1024
FRAME_SAMPLES = (16, 8192)  # an audio frame's length, in samples
MAX_GRAPH_NODES = 64
# The long-sequence page: the text repeated up to this many tokens, on the tiled path past
# what the memory budget lets the naive path hold; the cost sweep runs at these lengths.
MAX_LONG_TOKENS = 8192
LONG_LENGTHS = (128, 256, 512, 1024, 2048, 4096, 8192)
MAX_BLOCK = 1024  # a tile's rows or columns
# Long contexts (attnviz.analysis.longcontext): a model's own attention, tile by tile, never L × L. Its own
# bound, four times the Long sequences page's: that page holds every query's output and times the naive path,
# this one holds O(L·d) numbers per layer. The model's own positions bound it further (the smaller counts).
MAX_MODEL_LONG_TOKENS = 32_768
MAX_LONG_TEXT_BYTES = 1 * 2**20  # the text, before it is tokenized (32k tokens of English are ~150 KB)
LONG_BLOCKS = 256  # blocks per side of a long overview, by default
MAX_LONG_BLOCKS = 1024  # blocks per side of a long overview
MAX_LONG_RATIO = 0.99  # the fraction of a KV cache a policy may evict (kvpress: [0, 1))
MAX_LONG_WINDOW = 128  # a close-up's rows and columns
MAX_SPARSE_TOKENS = 2048  # sparse patterns compare against full attention (its weights held)
MAX_LOW_RANK_TOKENS = 512  # the SVD of every head's weights: O(L³)
# Vision-language attention (attnviz.analysis.vlattention): each picture, bounded in bytes and in the pixels its
# header claims before it is decoded (PNG or JPEG); the prompt in characters; the answer in tokens.
MAX_VL_IMAGE_BYTES = MAX_UPLOAD_BYTES  # the page's upload, the CLI's --image and the API's, alike
MAX_VL_IMAGE_PIXELS = 40_000_000
MAX_VL_IMAGES = 8
MAX_VL_PROMPT_CHARS = 8_000
MAX_VL_GENERATE = 256
# Watch it learn: the tiny model trained on the page, in a worker process.
MAX_LEARN_LAYERS = 3
MAX_LEARN_HEADS = 8
LEARN_WIDTHS = (16, 32, 64)
MAX_LEARN_STEPS = 5000
LEARN_EVERY = 50  # steps between checkpoints
MAX_LEARN_SECONDS = 120.0  # a training stops there, whatever its steps (ATTNVIZ_MAX_LEARN_SECONDS: max_learn_seconds)
# The tiny vision-language model (attnviz.learn.look): its steps by default (about 30 s on this project's 2-core
# machine) and between checkpoints.
LOOK_STEPS = 1200
LOOK_EVERY = 100

# The Q/K map (attnviz.analysis.qkmap): a corpus of sentences, one a line, each token's query
# and key of one head projected into one 2-D map. Pasted lines and an uploaded .txt are
# bounded before anything runs; the corpus is run in batches that each fit the memory budget.
MAX_CORPUS_LINES = 500  # sentences
MAX_CORPUS_LINE_CHARS = 300  # characters of one sentence
MAX_CORPUS_BYTES = 256 * 2**10  # an uploaded .txt
MAX_CORPUS_TOKENS = 8000  # real tokens over the whole corpus: a map has twice as many points
QK_BATCH = 64  # sentences per forward pass at most (fewer when the budget says so)
QK_OVERVIEW_POINTS = 400  # points drawn per head in the overview (every point is in its map's numbers)

# An attention run keeps, per (sequence, head, query, key): the scores, the scaled
# scores, the masked scores, the weights and the weights after dropout (float32), and
# the bool mask. Everything else (embeddings, Q/K/V, outputs) grows with L·E only.
_PER_CELL_BYTES = 5 * 4 + 1
_LEAN_CELL_BYTES = 4 + 1  # the weights, computed in place, and the mask
_PER_TOKEN_WIDTH_BYTES = 10 * 4  # X, Q, K, V, their copies on the way, joined, output


def _env_mb(name: str, default: int, lowest: float = 1) -> float:
    """A size in MB from the environment (fractions allowed), or ``default``."""
    raw = os.environ.get(name, "").strip()
    try:
        value = float(raw) if raw else default
    except ValueError:
        value = default
    return max(lowest, value) if math.isfinite(value) else default


def memory_budget_bytes() -> int:
    return int(_env_mb("ATTNVIZ_MEMORY_BUDGET_MB", 448) * 2**20)


def max_model_bytes() -> int:
    """The most weight bytes a model folder may hold to be loaded (``ATTNVIZ_MAX_MODEL_MB``,
    default 1024): checked from the files' sizes before anything is read."""
    return int(_env_mb("ATTNVIZ_MAX_MODEL_MB", 1024, lowest=0) * 2**20)


def max_loaded_bytes() -> int:
    """The most weight bytes all loaded models of one process may hold together
    (``ATTNVIZ_MAX_LOADED_MB``, default 2048): loading one more unloads the least recently
    used others until it fits."""
    return int(_env_mb("ATTNVIZ_MAX_LOADED_MB", 2048, lowest=0) * 2**20)


def cache_budget_bytes() -> int:
    return int(_env_mb("ATTNVIZ_CACHE_MB", 512) * 2**20)


def max_learn_seconds() -> float:
    """The seconds a training may run before it stops, whatever its steps (``ATTNVIZ_MAX_LEARN_SECONDS``, default
    ``MAX_LEARN_SECONDS``; ``inf``: no clock, as the test suite runs them, whose goals are in steps, on a machine of
    any speed). Read at each training's start, in the worker process too (it inherits the environment)."""
    raw = os.environ.get("ATTNVIZ_MAX_LEARN_SECONDS", "").strip()
    try:
        value = float(raw) if raw else MAX_LEARN_SECONDS
    except ValueError:
        return MAX_LEARN_SECONDS
    return value if value > 0 else MAX_LEARN_SECONDS


# Every byte-bounded cache of a process (``attnviz.cache.named``), by name: its share of
# ``ATTNVIZ_CACHE_MB``, so that all of them together hold at most that (the shares add up to 1). Everything a
# server keeps between requests is in one of them, or among the loaded models, bounded apart by
# ``ATTNVIZ_MAX_LOADED_MB`` ("models"). The MB are at the default budget (512 MB).
CACHE_SHARES = {
    # Runs, traces and the pages' numbers (attnviz.run.run.RESULTS), finished trainings' records among them
    # (attnviz.learn.worker.finished_record): 307 MB, so that the largest run the bounds accept (2048 tokens × 16
    # heads at d_model 512: 296 MB with its weights) is kept for its reruns.
    "results": 0.60,
    "figures": 0.10,  # the app's frozen figures (ui.compute.FIGURES), sized by their JSON: 51 MB
    # Finished background jobs' results, every kind together (attnviz.jobs): 77 MB. A patching sweep of a
    # GPT-2-small at 128 tokens keeps its two prompts' weights, (12, 12, 128, 128) float32 each: 19 MB both; a long
    # context's overviews are 0.5 MB per layer × head at 256 blocks (72 MB for GPT-2-small's 144 heads).
    "jobs": 0.15,
    # The Q/K map's corpus runs: every head's q and k at one layer (38 MB): the shipped corpus on a 768-wide
    # model is about 16 MB, the longest corpus (MAX_CORPUS_TOKENS) on MiniLM 25 MB.
    "qk-runs": 0.075,
    # Small tables looked up on every request: token and n-gram embeddings, position encodings, split texts,
    # the sessions' settings, models' config facts, kinds and probe sentences (26 MB): at d_model 64 a vector is
    # 0.6 KB, at 512 4 KB.
    "lookups": 0.05,
    "layers": 0.025,  # the random layers drawn: d_model 64 is 66 KB, so about 190; the widest (512) 4.2 MB
}


def cache_bytes(name: str) -> int:
    """The bytes cache ``name`` may hold: the loaded models' bound for "models", else its share of the cache
    budget (``CACHE_SHARES``)."""
    return max_loaded_bytes() if name == "models" else int(cache_budget_bytes() * CACHE_SHARES[name])


def heads_divide(d_model: int, heads: int) -> bool:
    """Each of ``heads`` heads gets d_model / heads features: the one rule, read by the layer's check
    (``core.multihead``), the link parser, the sidebar, the CLI and the trained model's settings."""
    return d_model % heads == 0


def head_choices(d_model: int, limit: int = MAX_HEADS) -> list[int]:
    """Head counts that divide ``d_model`` (``heads_divide``)."""
    return [h for h in range(1, min(d_model, limit) + 1) if heads_divide(d_model, h)]


def fit_heads(d_model: int, wanted: int) -> int:
    """The one re-fit rule: where ``wanted`` heads do not divide ``d_model``, the most that do, up to ``wanted``
    (a link's width under the default head count, the sidebar's width changed under the chosen one)."""
    return max(h for h in head_choices(d_model) if h <= max(1, int(wanted)))


@dataclass(frozen=True)
class RunSize:
    """What one run holds: N sequences, H heads, L queries, S keys, width E."""

    N: int
    H: int
    L: int
    S: int
    E: int

    @property
    def bytes(self) -> int:
        """Every intermediate kept."""
        cells = self.N * self.H * self.L * self.S
        return cells * _PER_CELL_BYTES + self.N * (self.L + self.S) * self.E * _PER_TOKEN_WIDTH_BYTES

    @property
    def lean_bytes(self) -> int:
        """The weights only."""
        cells = self.N * self.H * self.L * self.S
        return cells * _LEAN_CELL_BYTES + self.N * (self.L + self.S) * self.E * _PER_TOKEN_WIDTH_BYTES


def _mb(n: int) -> str:
    return f"{n / 2**20:,.0f} MB"


def longest_that_fits(N: int, H: int, E: int, budget: int, *, lean: bool = False) -> int:
    """The largest square length (L = S) whose run fits ``budget`` bytes (0 if none)."""
    lo, hi = 0, MAX_TOKENS
    while lo < hi:
        mid = (lo + hi + 1) // 2
        size = RunSize(N, H, mid, mid, E)
        if (size.lean_bytes if lean else size.bytes) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return lo


def plan(size: RunSize, budget: int | None = None) -> str:
    """"full" (every step kept) or "lean" (the weights only) for a run of ``size``;
    ``ValueError`` naming what to reduce when not even the weights fit."""
    budget = memory_budget_bytes() if budget is None else budget
    if size.bytes <= budget:
        return "full"
    if size.lean_bytes <= budget:
        return "lean"
    fits = longest_that_fits(size.N, size.H, size.E, budget, lean=True)
    fits_one = longest_that_fits(1, size.H, size.E, budget, lean=True)
    hint = (_("with {lines} line(s) and {heads} heads, texts up to {fits} tokens fit").format(
                lines=size.N, heads=size.H, fits=fits) if fits else
            _("even one token per line does not fit with {lines} line(s) and {heads} heads").format(
                lines=size.N, heads=size.H))
    if size.N > 1 and fits_one > fits:
        hint += _("; one line of up to {fits} tokens fits").format(fits=fits_one)
    raise ValueError(_(
        "This run would hold about {mb} of attention weights ({N} × {H} heads × {L} × {S}), over this server's "
        "budget of {budget}. Use fewer lines, fewer heads, a shorter text or a smaller pad-to: {hint}.").format(
        mb=_mb(size.lean_bytes), N=size.N, H=size.H, L=size.L, S=size.S, budget=_mb(budget), hint=hint))


def check_budget(size: RunSize, budget: int | None = None) -> None:
    """Raise ``ValueError`` unless ``size`` fits with *every step* kept (the teaching
    pages), naming the sizes that do."""
    budget = memory_budget_bytes() if budget is None else budget
    if size.bytes <= budget:
        return
    fits = longest_that_fits(size.N, size.H, size.E, budget)
    raise ValueError(_(
        "This page keeps every intermediate step: at {L} × {S} tokens with {H} heads and {N} line(s) that is about "
        "{mb}, over this server's budget of {budget}. Up to {fits} tokens fit here with these heads and lines; the "
        "explorer shows longer texts.").format(L=size.L, S=size.S, H=size.H, N=size.N, mb=_mb(size.bytes),
                                               budget=_mb(budget), fits=fits))

# Patching: a prompt (clean or corrupted) in characters, and an answer or wrong token as typed.
MAX_PROMPT_CHARS = 2_000
MAX_TOKEN_CHARS = 64
# A prompt's tokens, whatever the model's positions: the residual sweep runs one patched copy of
# the prompt per token at every layer, so its work grows with the square of the tokens.
MAX_PATCH_TOKENS = 128
# Tokens of patched runs in one batch (rows × prompt tokens): one batch is one turn on the compute
# workers, under a second for a GPT-2-small on 2 cores however long the sweep (bench_patching --server).
PATCH_BATCH_TOKENS = 512
# The logit lens (attnviz.analysis.lens): a text's tokens, each position read at every point of the residual stream
# (2 per layer) through the whole unembedding, so its work is points × tokens × width × vocabulary (a GPT-2-small
# at 256 tokens: 25 × 256 rows of 50,257 logits, computed a memory budget's worth at a time); the top tokens kept.
MAX_LENS_TOKENS = 256
MAX_LENS_TOP = 100
# A tuned lens's folder (tuned-lens 0.2.0's format), read before anything is decoded: its config.json, and its
# params.pt, which holds (width² + width) numbers per layer: at most that in float32 for the model it is read for,
# plus this much for the file's own structure.
MAX_LENS_CONFIG_BYTES = 64 * 2**10
LENS_FILE_SLACK_BYTES = 2**20
# Training a tuned lens (attnviz.analysis.tunedlens): the corpus's tokens whose residual streams are held (every
# layer's, float32: a GPT-2-small holds 13 × 768 × 4 bytes a token, 160 MB at this bound, fewer where the memory
# budget says so), the tokens of one step, and its steps.
LENS_TRAIN_TOKENS = 4096
LENS_BATCH_TOKENS = 256
LENS_STEPS = (1, 5000)


def max_lens_bytes(layers: int, width: int) -> int:
    """The most bytes a tuned lens's params.pt may hold for a model of ``layers`` layers and ``width``."""
    return layers * (width * width + width) * 4 + LENS_FILE_SLACK_BYTES


# Edge attribution's integration points (EAP-IG: the gradient averaged over `steps` points between
# the corrupted and the clean run; Hanna et al. 2024 use 5 to 100). Each point is a forward and backward
# pass (EAP-IG-activations: one per node and point), batched PATCH_BATCH_TOKENS tokens at a time.
EAP_STEPS = (1, 256)
# The Circuit page: the edges its attribution graph draws (of 32,491 on a GPT-2 small), and the
# tokens of patched runs (rows × prompt tokens) its exact sweep of every head-to-head path may take:
# about 70,000 for a 6-layer × 8-head model at 24 tokens (seconds), 690,000 for a GPT-2 small
# (minutes: its page shows the attribution graph and the top edges' exact effects instead).
MAX_EDGES_DRAWN = 200
MAX_EXACT_SWEEP_TOKENS = 250_000
# Background jobs (attnviz.jobs), per kind: (running at once, waiting beyond those, finished ones
# kept to answer whoever asks again). A kind's jobs run on at most `running` threads, which end when
# no job waits; past running + waiting a new job is refused with "the server is busy, try again
# shortly". A model's load has its own share, so it never waits behind sweeps. Every share's threads
# together: the most a server adds for jobs. The finished ones kept are bounded twice: at most `kept`
# of a kind, and the results of every kind together in bytes, by CACHE_SHARES["jobs"] (least recently
# asked for leave first). A training (Watch it learn) is a process, not a thread: one per core, none
# waiting; its record is a file, so none is kept here, and its process is let go once it ends.
JOB_SHARES = {
    "load": (2, 8, 64),  # model folders read from disk: I/O-bound, two at once
    "patching": (2, 14, 16),  # sweeps: each takes the compute workers one batch at a time
    "qk-overview": (1, 4, 8),  # every head of a layer projected (t-SNE is the slow part)
    # One attention at 32k tokens on a 24-layer × 14-head model holds ~0.2 GB of overviews at 256 blocks (more
    # than CACHE_SHARES["jobs"] keeps: the page says so, and 64 blocks fit), so a handful, not dozens (attentions
    # and policies together).
    "long-context": (1, 6, 4),
    "long-cost": (1, 6, 8),  # the Long sequences page's cost sweep (seconds at L = 8192)
    "circuit": (1, 6, 8),
    "edge-attribution": (1, 6, 8),  # the Circuit page's every-edge scores: seconds on a GPT-2 small
    # The Logit lens page's tuned lenses trained here: 200 steps take half a minute on a GPT-2 small, and each
    # holds LENS_TRAIN_TOKENS tokens' residual streams while it trains; a finished one (its translators, 28 MB
    # for GPT-2 small) is kept for everyone who asks for the same model and steps.
    "lens-training": (1, 4, 4),
    # The Logit lens page's readings made ahead of a class (attnviz.views.lenswarm): one sentence at a time.
    "lens-warm": (1, 8, 16),
    # The vision-language page's readings of model folders: a load, a greedy answer and one more pass that keeps
    # the text rows' attention to the picture (text × image tokens per layer, never N × N).
    "vision-language": (1, 4, 8),
    "training": (max(1, (os.cpu_count() or 1)), 0, 0),
}
MAX_TRAININGS = JOB_SHARES["training"][0]
LENS_WARM_POSITIONS = 16  # the positions (the last ones) whose step attribution the Logit lens page makes ahead
MAX_JOB_THREADS = sum(running for kind, (running, _w, _k) in JOB_SHARES.items() if kind != "training")
MAX_FLOW_TOKENS = 64  # attention flow (max-flow per query/input pair) is cubic in L: longer inputs are refused
