"""From plain settings to every number of one multi-head attention run.

    text -> tokens -> embeddings X (N, L, E) -> Q, K, V -> scores -> masked scores
         -> weights (N, H, L, S) -> per-head outputs -> joined -> W_O -> output (N, L, E)

``compute(AttentionConfig(...))`` is the one call the app, the CLI and the tests use.
All randomness (the projection weights, dropout) comes from a CPU
``torch.Generator`` seeded by ``config.seed``, so a config gives bit-identical
results on the same device and the same weights on every device.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field, replace

import torch

from . import limits
from .devices import resolve_device
from .embeddings import embed, sinusoidal_positions
from .i18n import N_, _
from .limits import MAX_D_MODEL, MAX_DROPOUT, MAX_HEADS, MAX_LINES, MAX_TEXT_CHARS, MAX_TOKENS, head_choices
from .masks import MASK_KINDS, build_mask
from .multihead import MultiHeadAttention, MultiHeadSteps
from .tokens import MODES, tokenize

PAD = "[PAD]"
_WHAT = (N_("text"), N_("source text"))  # what lines_of() calls its input, marked for translation
DEFAULT_TEXT = "The cat sat on the mat because it was tired."


@dataclass(frozen=True)
class AttentionConfig:
    """Every setting of a run, as plain values (hashable, so caches can key on it).

    ``text`` holds one sentence per line; several lines form a padded batch.
    ``source``, when not empty, makes it cross-attention: queries come from
    ``text``, keys and values from ``source`` (one line per line of ``text``).
    """

    text: str = DEFAULT_TEXT
    num_heads: int = 4
    d_model: int = 64
    mask: str = "none"
    window: int = 2
    pad_to: int = 0
    device: str = "cpu"
    seed: int = 0
    dropout: float = 0.0
    positional: bool = True
    tokenize_mode: str = "auto"
    source: str = ""
    max_tokens: int = MAX_TOKENS
    projections: bool = True  # False: Q = K = V = X (no projections), attention as plain similarity
    model: str = "random"  # "random", "minilm-l6", "local" or (API/CLI only) a model folder
    layer: int = 0  # which layer of a pretrained model the views show

    def validate(self) -> None:
        """Raise ``ValueError`` with a message a user can act on (bounds: ``attnviz.limits``)."""
        if not 1 <= self.d_model <= MAX_D_MODEL:
            raise ValueError(f"d_model must be between 1 and {MAX_D_MODEL}, got {self.d_model}.")
        if not 1 <= self.num_heads <= MAX_HEADS:
            raise ValueError(f"The number of heads must be between 1 and {MAX_HEADS}, got {self.num_heads}.")
        if not 1 <= self.max_tokens <= MAX_TOKENS:
            raise ValueError(f"max_tokens must be between 1 and {MAX_TOKENS}, got {self.max_tokens}.")
        for what, text in (("text", self.text), ("source text", self.source)):
            if len(text) > MAX_TEXT_CHARS:
                raise ValueError(f"The {what} has {len(text):,} characters; the limit is {MAX_TEXT_CHARS:,}.")
        if self.d_model % self.num_heads:
            raise ValueError(
                f"{self.num_heads} heads do not divide d_model={self.d_model}: "
                f"choose a head count among {', '.join(map(str, head_choices(self.d_model)))}."
            )
        if self.mask not in MASK_KINDS:
            raise ValueError(f"Unknown mask {self.mask!r}; choose one of {', '.join(MASK_KINDS)}.")
        if not 0 <= self.window <= limits.MAX_WINDOW:
            raise ValueError(f"The window must be between 0 and {limits.MAX_WINDOW}, got {self.window}.")
        if not 0 <= self.seed <= limits.MAX_SEED:
            raise ValueError(f"The seed must be between 0 and {limits.MAX_SEED}, got {self.seed}.")
        if self.pad_to < 0 or self.pad_to > self.max_tokens:
            raise ValueError(f"pad_to must be between 0 and the token cap {self.max_tokens}, "
                             f"got {self.pad_to}.")
        if not 0.0 <= self.dropout <= MAX_DROPOUT:
            raise ValueError(f"Dropout must be between 0 and {MAX_DROPOUT}, got {self.dropout}.")
        if not isinstance(self.model, str) or not self.model.strip():
            raise ValueError("The model must be 'random', a model name or a model folder.")
        if self.layer < 0:
            raise ValueError(f"The layer must be 0 or more, got {self.layer}.")
        if self.tokenize_mode not in MODES:
            raise ValueError(f"Unknown tokenization mode {self.tokenize_mode!r}; "
                             f"choose one of {', '.join(MODES)}.")

    def with_(self, **changes) -> AttentionConfig:
        return replace(self, **changes)


@dataclass
class AttentionResult:
    """Everything one run produced; tensors live on the CPU, detached."""

    config: AttentionConfig
    tokens: list[list[str]]  # per sequence, padded to L with PAD (queries)
    source_tokens: list[list[str]]  # keys/values; same as tokens for self-attention
    lengths: list[int]  # real (unpadded) query lengths
    source_lengths: list[int]
    embeddings: torch.Tensor  # queries' input X (N, L, E)
    source_embeddings: torch.Tensor  # keys'/values' input (N, S, E); `embeddings` for self-attention
    mask: torch.Tensor | None  # bool, broadcastable to (N, H, L, S); True = may attend
    steps: MultiHeadSteps  # every intermediate (CPU)
    model: MultiHeadAttention  # the module that ran (CPU copy)
    device: str
    timings_ms: dict[str, float]
    notes: list[str] = field(default_factory=list)
    layer_weights: torch.Tensor | None = None  # every layer's weights (layers, N, H, L, S)
    last_hidden: torch.Tensor | None = None  # a pretrained encoder's output (N, L, E)

    def __post_init__(self) -> None:
        if self.layer_weights is None:  # a one-layer model: layers = 1 (a view, no copy)
            self.layer_weights = self.steps.weights.unsqueeze(0)

    @property
    def weights(self) -> torch.Tensor:
        return self.steps.weights  # (N, H, L, S)

    @property
    def output(self) -> torch.Tensor:
        return self.steps.output  # (N, L, E)

    @property
    def layers(self) -> int:
        return int(self.layer_weights.shape[0])

    @property
    def pretrained(self) -> bool:
        return self.config.model != "random"

    @property
    def complete(self) -> bool:
        """Every intermediate kept (False for a long, lean run: weights only)."""
        return self.steps.complete

    def require_complete(self) -> None:
        """Raise the budget's ``ValueError`` (which sizes fit) for a page that needs every step."""
        if not self.complete:
            N, H, L, S = self.weights.shape
            limits.check_budget(limits.RunSize(N, H, L, S, self.config.d_model))

    @property
    def is_cross(self) -> bool:
        return bool(self.config.source.strip())

    def mask_matrix(self, n: int = 0) -> torch.Tensor:
        """The (L, S) bool mask of sequence ``n`` (all True when unmasked)."""
        N, H, L, S = self.weights.shape
        if self.mask is None:
            return torch.ones(L, S, dtype=torch.bool)
        return self.mask.expand(N, 1, L, S)[n, 0]  # (L, S)

    def shapes(self) -> dict[str, tuple[int, ...]]:
        return {"X": tuple(self.embeddings.shape), **self.steps.shapes()}

    def to_dict(self) -> dict:
        """Plain data for JSON export: config, tokens, weights, output."""
        return {
            "config": asdict(self.config),
            "tokens": self.tokens,
            "source_tokens": self.source_tokens,
            "lengths": self.lengths,
            "shapes": {k: list(v) for k, v in self.shapes().items()},
            "weights": self.weights.tolist(),  # (N, H, L, S)
            "output": self.output.tolist(),  # (N, L, E)
            **({"layer_weights": self.layer_weights.tolist()} if self.layers > 1 else {}),  # (layers, N, H, L, S)
        }


def lines_of(text: str, what: str = "text") -> list[str]:
    """The non-blank lines of ``text`` (a padded batch), bounded; ``ValueError`` if none."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines:
        raise ValueError(_("The {what} is empty: type at least one word.").format(what=_(what)))
    if len(lines) > MAX_LINES:
        raise ValueError(_("The {what} has {n} lines; the limit is {limit} (one padded batch).").format(
            what=_(what), n=len(lines), limit=MAX_LINES))
    return lines


def _tokenize_batch(lines: list[str], cfg: AttentionConfig) -> list[list[str]]:
    out = []
    for i, line in enumerate(lines):
        try:
            out.append(tokenize(line, cfg.tokenize_mode, max_tokens=cfg.max_tokens))
        except ValueError as e:
            raise ValueError(_("Line {n}: {error}").format(n=i + 1, error=e) if len(lines) > 1 else str(e)) from None
    return out


def _embed_batch(seqs: list[list[str]], L: int, cfg: AttentionConfig) -> torch.Tensor:
    """Embed each sequence and pad with zero vectors to L: (N, L, E)."""
    x = torch.zeros(len(seqs), L, cfg.d_model)  # (N, L, E)
    for n, toks in enumerate(seqs):
        x[n, : len(toks)] = embed(toks, cfg.d_model, positional=False)  # (len, E)
    if cfg.positional:
        x = x + sinusoidal_positions(L, cfg.d_model)  # (N, L, E) + (L, E)
    return x


def compute(config: AttentionConfig) -> AttentionResult:
    """Run multi-head attention for ``config`` and keep every intermediate (or, for a
    text too long for that within ``attnviz.limits``' memory budget, the weights only:
    ``result.complete`` is then False).

    Raises ``ValueError`` with a user-facing message for bad settings or text, or a run
    whose weights alone are over the budget.
    """
    config.validate()
    if config.model != "random":
        from .pretrained import compute_pretrained

        return compute_pretrained(config)
    timings: dict[str, float] = {}
    notes: list[str] = []
    t0 = time.perf_counter()

    q_seqs = _tokenize_batch(lines_of(config.text, "text"), config)
    cross = bool(config.source.strip())
    kv_seqs = _tokenize_batch(lines_of(config.source, "source text"), config) if cross else q_seqs
    if cross and len(kv_seqs) != len(q_seqs):
        if len(kv_seqs) == 1:
            kv_seqs = kv_seqs * len(q_seqs)
        else:
            raise ValueError(f"The source has {len(kv_seqs)} lines but the text has "
                             f"{len(q_seqs)}: give one source line, or one per text line.")
    lengths = [len(t) for t in q_seqs]
    src_lengths = [len(t) for t in kv_seqs]
    L = max(max(lengths), config.pad_to)
    S = max(max(src_lengths), config.pad_to) if cross else L
    timings["tokenize"] = (time.perf_counter() - t0) * 1e3
    # Decide before allocating anything of size L·S: every step kept, the weights only, or refuse.
    plan = limits.plan(limits.RunSize(len(q_seqs), config.num_heads, L, S, config.d_model))
    if plan == "lean":
        notes.append(_("This text is long: only the weights are kept (not the scores before softmax), to stay "
                       "within the server's memory budget."))

    t0 = time.perf_counter()
    x = _embed_batch(q_seqs, L, config)  # (N, L, E)
    x_kv = _embed_batch(kv_seqs, S, config) if cross else x  # (N, S, E)
    timings["embed"] = (time.perf_counter() - t0) * 1e3

    device = resolve_device(config.device)
    gen = torch.Generator().manual_seed(int(config.seed))  # CPU: same draws on every device
    model = MultiHeadAttention(config.d_model, config.num_heads, generator=gen)
    if not config.projections:
        model.identity_()
    padded = any(n < S for n in src_lengths)
    mask = build_mask(config.mask, L, S, window=config.window,
                      lengths=src_lengths if padded else None)
    if config.mask in ("window", "causal+window") and config.window >= max(L, S) - 1:
        notes.append(_("The window ({w}) covers the whole text ({n} tokens), so it blocks nothing.").format(
            w=config.window, n=max(L, S)))
    if padded and config.mask == "none":
        notes.append(_("Some keys are [PAD] tokens and the mask is 'none', so queries attend to padding. Choose "
                       "any other mask to block it."))

    t0 = time.perf_counter()
    with torch.no_grad():
        dev_model = model.to(device)
        run = dev_model.steps if plan == "full" else dev_model.lean_steps
        steps = run(
            x.to(device), None if not cross else x_kv.to(device), None,
            None if mask is None else mask.to(device),
            dropout_p=config.dropout, generator=gen,
        )
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    timings["attention"] = (time.perf_counter() - t0) * 1e3
    steps = _to_cpu(steps)

    pad = lambda seqs, n: [t + [PAD] * (n - len(t)) for t in seqs]  # noqa: E731
    return AttentionResult(
        config=config, tokens=pad(q_seqs, L), source_tokens=pad(kv_seqs, S),
        lengths=lengths, source_lengths=src_lengths, embeddings=x, source_embeddings=x_kv, mask=mask, steps=steps,
        model=model.cpu(), device=str(device), timings_ms=timings, notes=notes,
    )  # fmt: skip


def _to_cpu(steps: MultiHeadSteps) -> MultiHeadSteps:
    """Move every tensor of ``steps`` to the CPU (a no-op there)."""
    a = steps.attention
    mv = lambda t: None if t is None else t.detach().cpu()  # noqa: E731
    att = type(a)(mv(a.scores), mv(a.scaled), mv(a.masked), mv(a.weights), mv(a.dropped),
                  mv(a.output), a.scale, mv(a.fully_masked_rows))
    return MultiHeadSteps(mv(steps.q), mv(steps.k), mv(steps.v), att, mv(steps.joined),
                          mv(steps.output))
