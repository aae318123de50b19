"""Train the tiny vision-language model (``attnviz.models.tinyvl``) to answer questions about pictures of shapes
(``attnviz.learn.shapes``), and measure, checkpoint by checkpoint, whether it looks where it should.

``train_look(seed=0, steps=…)`` returns one plain record: a checkpoint every ``every`` steps with the accuracy on
a fixed held-out set of ``HELD_OUT`` pictures and, for every head, the share of the answer position's attention
on the picture that falls on the named shape's patch (the mean over the held-out set):

    share(l, h) = mean over pictures of  A[l, h, ?, cell] / Σ_patches A[l, h, ?, patch]

where ``?`` is the question's last word (the answer position) and ``cell`` the named shape's patch. A head that
looks at nothing in particular scores 1 / GRID² (0.0625); one that looks at the shape asked about scores 1. The
best head's share is what the goals speak of. ``blank=True`` trains the control: the same questions over empty
pictures, which can only be guessed (its accuracy stays at chance and no head finds the shape, there is none).
Deterministic for a seed on the same number of threads: the model, the batches and the held-out set all come
from generators seeded by ``seed``.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch
import torch.nn.functional as F

from attnviz import limits
from attnviz.learn import shapes as S
from attnviz.models.tinyvl import TinyVL

HELD_OUT = 200  # pictures the accuracy and the shares are measured on
BATCH = 128


def looking_model(layers: int = 2, heads: int = 4, d_model: int = 64, seed: int = 0) -> TinyVL:
    """The model at step 0."""
    return TinyVL(len(S.WORDS), S.GRID * S.GRID, S.PATCH, S.QUESTION_LENGTH, layers, heads, d_model, seed)


def held_out(seed: int = 0, blank: bool = False) -> S.Pictures:
    return S.pictures(HELD_OUT, torch.Generator().manual_seed(10_000 + seed), blank=blank)


def looking(model: TinyVL, data: S.Pictures) -> tuple[float, torch.Tensor]:
    """(the accuracy, the shares (layers, H)) of ``model`` on ``data`` (see the module doc)."""
    with torch.no_grad():
        logits, weights = model(data.pixels, data.ids)  # (N, V), [(N, H, n, n)]
    accuracy = float((logits.argmax(-1) == data.answer).float().mean())
    shares = []
    for w in weights:
        row = w[:, :, -1, model.image_columns]  # (N, H, I): the answer position over the patches
        on = row.gather(2, data.cell.view(-1, 1, 1).expand(-1, row.shape[1], 1))[..., 0]  # (N, H)
        shares.append((on / row.sum(-1).clamp_min(1e-12)).mean(0))  # (H,)
    return accuracy, torch.stack(shares)  # (layers, H)


def train_look(*, seed: int = 0, steps: int = limits.LOOK_STEPS, blank: bool = False, layers: int = 2,
               heads: int = 4, d_model: int = 64, lr: float = 1e-3, every: int = limits.LOOK_EVERY,
               on_checkpoint: Callable[[dict], None] | None = None, stop: Callable[[], bool] = lambda: False,
               max_seconds: float = limits.MAX_LEARN_SECONDS, keep: list | None = None) -> dict:
    """Train, calling ``on_checkpoint(record)`` at each checkpoint; stops early when ``stop()`` says so or after
    ``max_seconds``. ``keep``: a list that receives the model."""
    if isinstance(steps, bool) or not isinstance(steps, int) or not every <= steps <= limits.MAX_LEARN_STEPS:
        raise ValueError(f"steps must be a whole number from {every} to {limits.MAX_LEARN_STEPS}, got {steps!r}.")
    model = looking_model(layers, heads, d_model, seed)
    if keep is not None:
        keep.append(model)
    held, data = held_out(seed, blank), torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    checkpoints: list[dict] = []
    t0, status = time.perf_counter(), "done"

    def checkpoint(step: int) -> None:
        accuracy, shares = looking(model, held)
        layer, head = divmod(int(shares.argmax()), shares.shape[1])
        record = {"step": step, "seconds": round(time.perf_counter() - t0, 3), "accuracy": accuracy,
                  "shares": shares.tolist(), "best": {"layer": layer, "head": head, "share": float(shares.max())}}
        checkpoints.append(record)
        if on_checkpoint is not None:
            on_checkpoint(record)

    checkpoint(0)
    for step in range(1, steps + 1):
        b = S.pictures(BATCH, data, blank=blank)
        logits, _w = model(b.pixels, b.ids)
        loss = F.cross_entropy(logits, b.answer)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step % every == 0 or step == steps:
            checkpoint(step)
            if stop():
                status = f"stopped at step {step}"
                break
            if time.perf_counter() - t0 > max_seconds:
                status = f"stopped at step {step}: the {max_seconds:.0f} s limit"
                break
    return {"config": {"seed": seed, "steps": steps, "blank": blank, "layers": layers, "heads": heads,
                       "d_model": d_model, "lr": lr, "every": every}, "status": status, "checkpoints": checkpoints}
