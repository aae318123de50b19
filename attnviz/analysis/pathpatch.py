"""Direct path patching (Wang et al. 2022): which earlier head feeds which later one, through its
query, key or value. TransformerLens 4.3.0's ``patching.get_act_patch_direct_path`` (read from its
source), batched:

- for a sender head (layer s, head h) and a receiver head (layer r > s, head g): the corrupted run,
  with the sender's clean-minus-corrupted write, (z_clean − z_corrupted)_h · W_O^h at every
  position, added to the stream that the receiver's own q, k or v (``component``) is made from,
  through its layer's own norm (nothing frozen: the exact edge). Every other reader, the other
  heads of layer r among them, sees the corrupted sender; the metric is ``patching.metric``'s.
- ``(layers, H, layers, H)``: every sender and receiver; where the receiver's layer is not later
  than the sender's there is no path, and the entry is NaN (not a measurement; TransformerLens
  puts 0.0 there).
- A grouped-query model (LLaMA's shared KV heads): the receiver is a query head. Its key or value
  is made from the patched stream through its KV head's weights, for that query head alone; the
  other query heads sharing the KV head keep reading the corrupted key and value. That is the
  edge into one query head, as a model with the KV head's weights repeated for each query head
  would patch it (TransformerLens refuses k and v there).

Batched and late, as the head sweep is: for each receiver layer r, batches of runs from the
corrupted stream into r (what is below r does not change), a row per (sender, receiver head): the
receiver's layer makes every head's q (k, v) from the patched stream, and all but the receiver's
output are put back as the corrupted run had them, before W_O. TransformerLens runs a whole
forward pass per pair.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from attnviz import limits
from attnviz.analysis.patching import Runs, metric, runs
from attnviz.analysis.scoreattr import pattern, qk_scores
from attnviz.analysis.subjects import Subject, spelled_answer
from attnviz.models.reading import w_o_heads
from attnviz.models.stacks import Trace

COMPONENTS = ("q", "k", "v")
DEFINITION = ("the metric on the corrupted run with the sender's clean-minus-corrupted output added to the stream "
              "the receiver's own q, k or v is made from (through its norm), every other reader seeing the "
              "corrupted sender: TransformerLens's direct path patching")


def check_component(component: str) -> str:
    c = str(component).lower()
    if c not in COMPONENTS:
        raise ValueError(f"component must be 'q', 'k' or 'v' (the receiver's input the path reaches); got "
                         f"{component!r}.")
    return c


def writes(stack, clean: Trace, corrupted: Trace) -> torch.Tensor:
    """(layers, H, L, E): every head's clean-minus-corrupted write to the stream, z_h · W_O^h."""
    out = []
    for layer in range(stack.layers):
        w_o = w_o_heads(stack, layer)  # (H, D, E)
        H, D, _E = w_o.shape
        dz = (clean.z[layer][0] - corrupted.z[layer][0]).view(-1, H, D)  # (L, H, D)
        out.append(torch.einsum("lhd,hde->hle", dz, w_o))  # (H, L, E)
    return torch.stack(out)


def _rows(stack, L: int, E: int) -> int:
    """Patched runs per batch: as the head sweep's (memory, and ``PATCH_BATCH_TOKENS`` tokens a turn)."""
    per_row = max(1, 4 * (3 * stack.heads * L * L + 12 * L * E))
    return max(1, min(limits.memory_budget_bytes() // per_row, limits.PATCH_BATCH_TOKENS // L))


def sweep_paths(stack, clean: Trace, corrupted: Trace, component: str, answer: int, wrong: int | None,
                progress: Callable[[float], None] | None = None, step: Callable | None = None) -> np.ndarray:
    """(layers, H, layers, H): the metric with each sender's path into each later receiver's
    ``component`` patched, NaN where the receiver is not later (see the module doc). ``step(work)``
    runs each batch (the app's compute workers), ``progress(fraction)`` after each."""
    component = check_component(component)
    n, H = stack.layers, stack.heads
    L, E = corrupted.resid_pre[0].shape[1:]
    HD = corrupted.z[0].shape[-1]
    D = HD // H
    delta = writes(stack, clean, corrupted)  # (n, H, L, E)
    out = np.full((n, H, n, H), np.nan)
    pairs = [(r, [(s, h, g) for s in range(r) for h in range(H) for g in range(H)]) for r in range(1, n)]
    total, done = sum(len(rows) for _r, rows in pairs), 0
    size = _rows(stack, L, E)

    def batch(r: int, rows: list[tuple[int, int, int]]) -> np.ndarray:  # (len(rows),)
        B = len(rows)
        s, h, g = (torch.tensor(x) for x in zip(*rows, strict=True))
        x = corrupted.resid_pre[r].expand(B, L, E)
        stream = x + delta[s, h]  # (B, L, E): the receiver's layer reads its component from it
        # Before W_O: the receiver's output as the patched stream made it, every other head's as the corrupted run's.
        own = (torch.arange(HD) // D)[None, None, :] == g[:, None, None]  # (B, 1, H·D)
        kept = corrupted.z[r].expand(B, L, HD)

        def receiver_only(z):  # (B, L, H·D)
            return torch.where(own, z, kept)

        return metric(stack.from_layer(r, x, corrupted, receiver_only, reads=(component, stream)), answer,
                      wrong).double().numpy()

    for r, rows in pairs:
        for i0 in range(0, len(rows), size):
            chunk = rows[i0:i0 + size]
            work = (lambda r=r, chunk=chunk: batch(r, chunk))
            values = work() if step is None else step(work)
            for (s, h, g), v in zip(chunk, values, strict=True):
                out[s, h, r, g] = v
            done += len(chunk)
            if progress is not None:
                progress(done / total)
    return out


@dataclass
class PathPatching:
    """The metric on both runs, and with each path patched."""

    model: str
    component: str
    answer: str
    wrong: str | None
    clean: float
    corrupted: float
    clean_tokens: list[str]
    corrupted_tokens: list[str]
    values: np.ndarray  # (layers, H, layers, H), NaN where the receiver is not later
    notes: list[str] = field(default_factory=list)

    @property
    def measured(self) -> np.ndarray:
        return ~np.isnan(self.values)

    def normalised(self) -> np.ndarray:
        """(patched − corrupted) / (clean − corrupted), NaN kept; ``ValueError`` where the runs agree."""
        gap = self.clean - self.corrupted
        if abs(gap) < 1e-9:
            raise ValueError(f"The clean and the corrupted prompt give the same metric ({self.clean:.4g}): there is "
                             "nothing for a path to bring back. Corrupt a token the answer depends on.")
        return (self.values - self.corrupted) / gap

    def to_dict(self) -> dict:
        def plain(a):  # NaN (no path) as null
            return [plain(x) for x in a] if isinstance(a, np.ndarray) and a.ndim else (None if np.isnan(a) else
                                                                                        float(a))
        out = {"model": self.model, "component": self.component, "answer": self.answer, "wrong": self.wrong,
               "definition": DEFINITION, "clean": self.clean, "corrupted": self.corrupted,
               "clean_tokens": self.clean_tokens, "corrupted_tokens": self.corrupted_tokens,
               "values": plain(self.values),
               "not_measured": "null: the receiver's layer is not later than the sender's"}
        try:
            out["normalised"] = plain(self.normalised())
        except ValueError:
            out["normalised"] = None
        return out


def path_patching(subject: Subject, clean, corrupted, *, answer, wrong=None, component: str,
                  progress=None, step=None, ran: Runs | None = None) -> PathPatching:
    """Direct path patching of ``subject`` between two prompts (texts or ids of one length), as
    ``patching.patch`` reads them; ``ran``: both runs where they were made already."""
    component = check_component(component)
    ran = ran or runs(subject, clean, corrupted, answer=answer, wrong=wrong)
    a, w = ran.answer, ran.wrong
    values = sweep_paths(subject.stack, ran.clean, ran.corrupted, component, a, w, progress, step)
    return PathPatching(subject.name, component, spelled_answer(subject, answer, a),
                        None if w is None else spelled_answer(subject, wrong, w),
                        float(metric(ran.clean.logits, a, w)[0]), float(metric(ran.corrupted.logits, a, w)[0]),
                        subject.spelled(ran.clean_ids), subject.spelled(ran.corrupted_ids), values)


def edge_attention(subject: Subject, ran: Runs, sender: tuple[int, int], receiver: tuple[int, int],
                   component: str) -> tuple[np.ndarray, np.ndarray]:
    """The receiver's attention on the corrupted prompt, (L, L) each: as it is, and with the path
    from ``sender`` into its ``component`` patched (a value's path leaves it as it is: values do not
    move attention)."""
    component = check_component(component)
    stack = subject.stack
    for name, (layer, head) in (("sender", sender), ("receiver", receiver)):
        if not (0 <= layer < stack.layers and 0 <= head < stack.heads):
            raise ValueError(f"The {name} L{layer} H{head} does not exist: {subject.name} has {stack.layers} layers of "
                             f"{stack.heads} heads.")
    (s, h), (r, g) = sender, receiver
    if r <= s:
        raise ValueError(f"The receiver L{r} H{g} is not after the sender L{s} H{h}: a head reads only what the layers "
                         "below it wrote, so there is no path between them. Pick a receiver in a later layer.")
    tk = ran.corrupted
    x = tk.resid_pre[r][0]  # (L, E)
    w_o = w_o_heads(stack, s)[h]  # (D, E)
    D = w_o.shape[0]
    d = (ran.clean.z[s][0] - tk.z[s][0])[:, h * D:(h + 1) * D] @ w_o  # (L, E) the sender's write, clean − corrupted
    streams = {"q": (x + d, x), "k": (x, x + d), "v": (x, x)}[component]
    return (pattern(qk_scores(stack, tk, r, g, x, x)).numpy(),
            pattern(qk_scores(stack, tk, r, g, *streams)).numpy())
