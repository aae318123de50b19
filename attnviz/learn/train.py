"""Train the tiny model deterministically and record what its heads do, checkpoint by checkpoint.

``train(LearnSettings(...))`` returns one plain record (the CLI writes it as JSON): the
settings, and a checkpoint every ``every`` steps with the loss on the task's part and
elsewhere (on a fixed evaluation batch), every head's prefix-matching, previous-token and
copying scores and its weights on one fixed probe sequence, and its roles' scores
(``attnviz.analysis.probe``: the explorer's scores on a repeated random probe). The same settings give the
same numbers on the same number of threads (the app's worker and the CLI use one): data,
weights and the probe all come from generators seeded by ``seed``.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace

import torch
import torch.nn.functional as F

from attnviz import limits
from attnviz.analysis import probe as P
from attnviz.analysis.induction import copying, prefix_matching, previous_token
from attnviz.i18n import N_
from attnviz.learn.tasks import TASKS, Batch, batch
from attnviz.models.tiny import AttentionOnly
from attnviz.settings.spec import OWN, setting, validate

VOCAB, LENGTH, BATCH = 32, 40, 64




@dataclass(frozen=True)
class LearnSettings:
    layers: int = setting(2, url="learn_layers", pages=OWN, lo=1, hi=limits.MAX_LEARN_LAYERS, label=N_("Layers"),
                          help=N_("Induction needs two: a previous-token head, then a prefix-matching head."))
    heads: int = setting(2, url="learn_heads", pages=OWN, lo=1, hi=limits.MAX_LEARN_HEADS,
                         label=N_("Heads per layer"))
    d_model: int = setting(32, url="learn_width", pages=OWN, choices=limits.LEARN_WIDTHS, label=N_("Width"))
    steps: int = setting(2000, url="learn_steps", pages=OWN, lo=limits.LEARN_EVERY, hi=limits.MAX_LEARN_STEPS,
                         label=N_("Steps"))
    lr: float = setting(3e-3, url="learn_lr", pages=OWN, lo=1e-5, hi=0.1, label=N_("Learning rate"))
    seed: int = setting(0, url="learn_seed", pages=OWN, lo=0, hi=limits.MAX_SEED, label=N_("Seed"))
    task: str = setting("induction", url="learn_task", pages=OWN, choices=TASKS, label=N_("Task"),
                        help=N_("induction: a random block repeated at a random offset; marked: answer with the "
                                "token after a MARK."))
    every: int = limits.LEARN_EVERY  # steps between checkpoints

    def validate(self) -> None:
        validate(self)
        if not limits.heads_divide(self.d_model, self.heads):
            raise ValueError(f"{self.heads} heads do not divide the width {self.d_model}: choose a head count among "
                             f"{', '.join(map(str, limits.head_choices(self.d_model, limits.MAX_LEARN_HEADS)))}.")

    def with_(self, **changes) -> LearnSettings:
        return replace(self, **changes)


class Diverged(ValueError):
    """The loss became NaN or infinite: training stopped there."""


def losses(model: AttentionOnly, b: Batch, head_mask: torch.Tensor | None = None) -> tuple[float, float]:
    """Mean next-token loss on the task's part and elsewhere (positions 0 … L−2)."""
    with torch.no_grad():
        logits, _w = model(b.ids, head_mask)  # (N, L, V)
        nll = F.cross_entropy(logits[:, :-1].reshape(-1, model.vocab), b.ids[:, 1:].reshape(-1),
                              reduction="none").view(b.ids.shape[0], -1)  # (N, L−1)
        focus = b.focus[:, :-1]
    return float(nll[focus].mean()), float(nll[~focus].mean())


def checkpoint_scores(model: AttentionOnly, probe: Batch) -> tuple[list[dict], torch.Tensor]:
    """Every head's three scores on the probe (its first sequence), and the probe's weights
    (layers, H, L, L)."""
    ids = probe.ids[:1]  # (1, L)
    rows, weights = [], []
    with torch.no_grad():
        x = model.inputs(ids)  # (1, L, E)
        for layer, mha in enumerate(model.layers):
            steps = mha.steps(x, attn_mask=model.mask)
            w = steps.weights[0]  # (H, L, L)
            D = mha.head_dim
            for h in range(mha.num_heads):
                contribution = steps.attention.output[0, h] @ mha.out_proj.weight[:, h * D:(h + 1) * D].T  # (L, E)
                rows.append({"layer": layer, "head": h,
                             "prefix_matching": prefix_matching(w[h], probe.first[0], probe.period[0]),
                             "previous_token": previous_token(w[h]),
                             "copying": copying(w[h], contribution @ model.unembed.T, ids[0])})
            weights.append(w)
            x = x + steps.output  # (1, L, E)
    return rows, torch.stack(weights)  # (layers, H, L, L)


def train_loss(model: AttentionOnly, b: Batch) -> torch.Tensor:
    """The next-token loss a step minimises: every position of the batch."""
    logits, _w = model(b.ids)  # (N, L, V)
    return F.cross_entropy(logits[:, :-1].reshape(-1, VOCAB), b.ids[:, 1:].reshape(-1))


def build(settings: LearnSettings) -> tuple[AttentionOnly, Batch, Batch]:
    """The model at step 0, the fixed evaluation batch and the probe sequence."""
    model = AttentionOnly(VOCAB, LENGTH, settings.layers, settings.heads, settings.d_model, settings.seed)
    held = torch.Generator().manual_seed(10_000 + settings.seed)
    return model, batch(settings.task, 256, LENGTH, VOCAB, held), probe_batch(settings)


def probe_batch(settings: LearnSettings) -> Batch:
    """The one sequence every checkpoint's heads are scored and drawn on."""
    return batch(settings.task, 1, LENGTH, VOCAB, torch.Generator().manual_seed(20_000 + settings.seed))


def train(settings: LearnSettings, on_checkpoint: Callable[[dict], None] | None = None,
          stop: Callable[[], bool] = lambda: False, max_seconds: float | None = None,
          keep: list | None = None) -> dict:
    """Train, calling ``on_checkpoint(record)`` at each checkpoint; stops early when
    ``stop()`` says so or after ``max_seconds`` (None: ``limits.max_learn_seconds()``, read at the call, as the
    look training's ``train_settings`` reads it). ``keep``: a list that receives the model."""
    settings.validate()
    max_seconds = limits.max_learn_seconds() if max_seconds is None else max_seconds
    model, held, probe = build(settings)
    if keep is not None:
        keep.append(model)
    data = torch.Generator().manual_seed(settings.seed)
    opt = torch.optim.AdamW(model.parameters(), lr=settings.lr)
    checkpoints: list[dict] = []
    t0 = time.perf_counter()
    status = "done"

    def checkpoint(step: int) -> None:
        loss_repeat, loss_other = losses(model, held)
        heads, w = checkpoint_scores(model, probe)
        record = {"step": step, "seconds": round(time.perf_counter() - t0, 3), "loss_repeat": loss_repeat,
                  "loss_other": loss_other, "heads": heads, "weights": w.tolist(), "roles": P.tiny_record(model)}
        checkpoints.append(record)
        if on_checkpoint is not None:
            on_checkpoint(record)

    checkpoint(0)
    for step in range(1, settings.steps + 1):
        b = batch(settings.task, BATCH, LENGTH, VOCAB, data)
        loss = train_loss(model, b)
        if not math.isfinite(loss.item()):
            status = f"diverged at step {step} (loss {loss.item()}): try a smaller learning rate"
            break
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step % settings.every == 0 or step == settings.steps:
            checkpoint(step)
            if stop():
                status = f"stopped at step {step}"
                break
            if time.perf_counter() - t0 > max_seconds:
                status = f"stopped at step {step}: the {max_seconds:.0f} s limit"
                warnings.warn(f"The training {status} (of {settings.steps}): ATTNVIZ_MAX_LEARN_SECONDS or "
                              "max_seconds.", stacklevel=2)
                break
    return {"config": asdict(settings), "status": status, "checkpoints": checkpoints,
            "probe": {"tokens": probe.ids[0].tolist(), "first": probe.first[0], "period": probe.period[0],
                      "weights": checkpoints[-1]["weights"]},
            "roles_probe": P.tiny_probe(VOCAB),
            "phase_change": phase_change(checkpoints)}


def phase_change(checkpoints: list[dict]) -> dict | None:
    """Where the loss on the task's part falls fastest between two checkpoints, if it falls
    by at least a third of its start over the run (else None: no phase change)."""
    if len(checkpoints) < 2:
        return None
    start = checkpoints[0]["loss_repeat"]
    if min(c["loss_repeat"] for c in checkpoints) > start * 2 / 3:
        return None
    drops = [(checkpoints[i - 1]["loss_repeat"] - checkpoints[i]["loss_repeat"], i) for i in range(1, len(checkpoints))]
    _drop, i = max(drops)
    return {"step": checkpoints[i]["step"], "seconds": checkpoints[i]["seconds"]}


def best(checkpoint: dict, score: str, layer: int | None = None) -> float:
    """The best head's ``score`` at a checkpoint (in ``layer`` when given)."""
    return max(h[score] for h in checkpoint["heads"] if layer is None or h["layer"] == layer)


def control_of(settings):
    """The one-layer control: the same task and width with twice the heads where they fit."""
    heads = settings.heads * 2
    if heads > limits.MAX_LEARN_HEADS or not limits.heads_divide(settings.d_model, heads):
        heads = settings.heads
    return settings.with_(layers=1, heads=heads)


def default_trainings() -> tuple:
    """The page's default settings and their one-layer control: what a first visitor sees."""
    return LearnSettings(), control_of(LearnSettings())


def start_defaults(trainings) -> None:
    """Start the default training and its control unless they ran or run already (each at
    most once per server: a finished one is kept in the runs folder and replayed). The
    server's launcher calls this at start-up, so a first visitor finds the finished curve;
    the page calls it too, for a server started otherwise. A busy server (every worker
    training) starts nothing: the page says so when someone presses Train."""
    for settings in default_trainings():
        try:
            trainings.start(settings)
        except ValueError:
            return
