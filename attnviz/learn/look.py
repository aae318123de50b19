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

Each checkpoint also keeps, on one fixed probe picture and question (the record's ``probe``), the answer
position's attention over the patches in every head (``probe_maps``: layers × heads × GRID × GRID): the map a
class watches sharpen onto the shape asked about. ``look_attention(model, picture, question)`` reads any
picture and question the same way, as a ``VLAttention`` (``attnviz.vl_view`` draws it).
Deterministic for a seed on the same number of threads: the model, the batches and the held-out set all come
from generators seeded by ``seed``.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
import torch
import torch.nn.functional as F

from attnviz import limits
from attnviz.analysis.vlattention import VLAttention
from attnviz.i18n import N_
from attnviz.learn import shapes as S
from attnviz.models.tinyvl import TinyVL
from attnviz.models.vlgrid import grid_boxes
from attnviz.settings.spec import OWN, setting, validate

HELD_OUT = 200  # pictures the accuracy and the shares are measured on
BATCH = 128


@dataclass(frozen=True)
class LookSettings:
    """A training of the model that learns to look, as the worker process runs it (``attnviz.learn.worker``) and
    the vision-language page and its links name it. ``blank``: the control, on empty pictures."""

    seed: int = setting(0, url="look_seed", pages=OWN, lo=0, hi=limits.MAX_SEED, label=N_("Seed"),
                        help=N_("The training's seed: the model's first weights, its pictures and its held-out set. "
                                "Seed 0 learns best (other seeds learn less within the same steps)."))
    steps: int = setting(limits.LOOK_STEPS, url="look_steps", pages=OWN, lo=limits.LOOK_EVERY,
                         hi=limits.MAX_LEARN_STEPS, label=N_("Steps"),
                         help=N_("How many batches of pictures it learns from; a checkpoint records how well it "
                                 "answers and where it looks at regular steps."))
    blank: bool = False

    def validate(self) -> None:
        validate(self)

    def control(self) -> LookSettings:
        """The same training on empty pictures."""
        return replace(self, blank=True)


def train_settings(settings: LookSettings, on_checkpoint: Callable[[dict], None] | None = None,
                   stop: Callable[[], bool] = lambda: False, keep: list | None = None) -> dict:
    """``train_look`` for ``settings`` (the worker's call, as ``attnviz.learn.train.train`` for Watch it learn's)."""
    settings.validate()
    return train_look(seed=settings.seed, steps=settings.steps, blank=settings.blank, on_checkpoint=on_checkpoint,
                      stop=stop, keep=keep, max_seconds=limits.max_learn_seconds())


def load_looking(path) -> TinyVL:
    """The trained model of a default-shaped training from its weights file (the worker's safetensors)."""
    from safetensors.torch import load_file

    model = looking_model()
    model.load_state_dict(load_file(str(path)))
    return model.eval()


def looking_model(layers: int = 2, heads: int = 4, d_model: int = 64, seed: int = 0) -> TinyVL:
    """The model at step 0."""
    return TinyVL(len(S.WORDS), S.GRID * S.GRID, S.PATCH, S.QUESTION_LENGTH, layers, heads, d_model, seed)


def held_out(seed: int = 0, blank: bool = False) -> S.Pictures:
    return S.pictures(HELD_OUT, torch.Generator().manual_seed(10_000 + seed), blank=blank)


def probe_of(seed: int = 0) -> S.Pictures:
    """The one picture and question every checkpoint's maps are drawn on (not blank: the control's is too)."""
    return S.pictures(1, torch.Generator().manual_seed(20_000 + seed))


def answer_maps(model: TinyVL, data: S.Pictures) -> torch.Tensor:
    """(N, layers, H, GRID, GRID): the answer position's attention over the patches, laid out as the picture."""
    with torch.no_grad():
        _logits, weights = model(data.pixels, data.ids)
    rows = torch.stack([w[:, :, -1, model.image_columns] for w in weights], 1)  # (N, layers, H, I)
    return rows.reshape(*rows.shape[:3], S.GRID, S.GRID)


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
               max_seconds: float | None = None, keep: list | None = None) -> dict:
    """Train, calling ``on_checkpoint(record)`` at each checkpoint; stops early when ``stop()`` says so or after
    ``max_seconds`` (None: no clock, a library call's goals are its steps; the app's worker passes
    ``ATTNVIZ_MAX_LEARN_SECONDS``), and a training stopped by the clock says so in a warning as in its status.
    ``keep``: a list that receives the model."""
    max_seconds = math.inf if max_seconds is None else float(max_seconds)
    if isinstance(steps, bool) or not isinstance(steps, int) or not every <= steps <= limits.MAX_LEARN_STEPS:
        raise ValueError(f"steps must be a whole number from {every} to {limits.MAX_LEARN_STEPS}, got {steps!r}.")
    model = looking_model(layers, heads, d_model, seed)
    if keep is not None:
        keep.append(model)
    held, data, probe = held_out(seed, blank), torch.Generator().manual_seed(seed), probe_of(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    # The rate falls to zero by the last step (cosine): at a constant rate the accuracy swung between 64% and 97%
    # over the last few hundred steps, and where it ended depended on the rounding (the threads' count).
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=steps)
    checkpoints: list[dict] = []
    t0, status = time.perf_counter(), "done"

    def checkpoint(step: int) -> None:
        accuracy, shares = looking(model, held)
        layer, head = divmod(int(shares.argmax()), shares.shape[1])
        record = {"step": step, "seconds": round(time.perf_counter() - t0, 3), "accuracy": accuracy,
                  "shares": shares.tolist(), "best": {"layer": layer, "head": head, "share": float(shares.max())},
                  "probe_maps": answer_maps(model, probe)[0].tolist()}
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
        schedule.step()
        if step % every == 0 or step == steps:
            checkpoint(step)
            if stop():
                status = f"stopped at step {step}"
                break
            if time.perf_counter() - t0 > max_seconds:
                status = f"stopped at step {step}: the {max_seconds:.0f} s limit"
                warnings.warn(f"train_look {status} (of {steps}); its model learned less than the full training's. "
                              "Give max_seconds=None for no clock.", stacklevel=2)
                break
    return {"config": {"seed": seed, "steps": steps, "blank": blank, "layers": layers, "heads": heads,
                       "d_model": d_model, "lr": lr, "every": every}, "status": status, "checkpoints": checkpoints,
            "probe": probe_record(seed)}


def probe_record(seed: int = 0) -> dict:
    """The probe picture and question of a training of ``seed``, as its record keeps them."""
    probe = probe_of(seed)
    return {"pixels": probe.pixels[0].tolist(), "words": [S.WORDS[t] for t in probe.ids[0].tolist()],
            "answer": S.WORDS[int(probe.answer[0])], "cell": int(probe.cell[0])}


def _question_ids(question) -> torch.Tensor:
    words = question.split() if isinstance(question, str) else list(question)
    if words and words[0] != "BOS":
        words = ["BOS", *words]
    unknown = [w for w in words if w not in S.TOKEN]
    if unknown:
        raise ValueError(f"{unknown[0]!r} is not a word the model knows: ask as the pictures' questions do, "
                         f"for example \"{' '.join(S.question('colour', 'circle', 'red')[1:])}\".")
    if len(words) != S.QUESTION_LENGTH:
        raise ValueError(f"The question has {len(words) - 1} words; the model reads questions of "
                         f"{S.QUESTION_LENGTH - 1}, as \"{' '.join(S.question('where', 'circle', 'red')[1:])}\".")
    return torch.tensor([[S.TOKEN[w] for w in words]])


def look_attention(model: TinyVL, picture, question) -> VLAttention:
    """The tiny model's attention from each of the question's words to the picture's patches, as
    ``vl_attention`` reads a real model's: ``picture`` a (3, SIDE, SIDE) tensor in [0, 1] or a (SIDE, SIDE, 3)
    uint8 array, ``question`` its words (a string or a list, BOS added). ``.answer``: the model's answer;
    ``.cam(kind, token)``: Grad-CAM and AG-CAM from the gradient of the loss of its own answer (its one output: the
    answer at the last word), as vl-saliency takes a real model's from its loss."""
    if isinstance(picture, np.ndarray) and not picture.flags.writeable:
        picture = picture.copy()  # torch warns of a read-only buffer (a picture read from bytes)
    x = torch.as_tensor(picture)
    if x.dtype == torch.uint8 and x.shape == (S.SIDE, S.SIDE, 3):
        x = x.permute(2, 0, 1).float() / 255
    if tuple(x.shape) != (3, S.SIDE, S.SIDE):
        raise ValueError(f"The picture must be {S.SIDE} × {S.SIDE} pixels (the model's {S.GRID} × {S.GRID} patches "
                         f"of {S.PATCH}), got a tensor of shape {tuple(x.shape)}.")
    ids = _question_ids(question)
    with torch.no_grad():
        logits, weights = model(x[None].float(), ids)
    cols = model.image_columns
    W = ids.shape[1]
    rows = [*range(W - 1), W - 1 + model.patches]  # the words' places in the sequence: the picture before "?"
    stacked = torch.stack([w[0][:, rows] for w in weights])  # (layers, H, W, W + I)
    maps = stacked[..., cols].reshape(*stacked.shape[:3], S.GRID, S.GRID)

    def gradients() -> list[torch.Tensor]:  # ∂loss/∂A at the same rows and columns, as maps: [(layers, H, W, G, G)]
        with torch.enable_grad():
            out, ws = model(x[None].float(), ids)
            loss = F.cross_entropy(out, out.argmax(-1))  # its own answer
            grads = torch.autograd.grad(loss, ws)
        g = torch.stack([w[0][:, rows] for w in grads])[..., cols]  # (layers, H, W, I)
        return [g.reshape(*g.shape[:3], S.GRID, S.GRID)]

    words, answer = [S.WORDS[t] for t in ids[0].tolist()], S.WORDS[int(logits[0].argmax())]
    return VLAttention("look", "tiny", words, ids[0].tolist(), W, list(range(W)), [maps], stacked[..., cols].sum(-1),
                       [grid_boxes(S.SIDE, S.SIDE, S.GRID)], [(S.SIDE, S.SIDE)], answer=answer, _rerun=gradients)
