"""The "Watch it learn" page's figures: the loss with its phase change, each head's scores
over the steps, every head's attention on the probe at one checkpoint (titled with its role),
one head enlarged, and the Head roles table."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from attnviz import limits
from attnviz import plots as F
from attnviz.analysis.probe import tiny_probe, tiny_roles
from attnviz.analysis.roles import SCORES
from attnviz.i18n import N_, _
from attnviz.learn.train import LearnSettings, best, phase_change, probe_batch
from attnviz.learn.trained import token_name
from attnviz.views.roles import head_title, role_rows

CHECKPOINT_SCORES = {"prefix_matching": N_("prefix matching"), "previous_token": N_("previous token"),
                     "copying": N_("copying")}


def loss_figure(checkpoints: list[dict], control: list[dict] | None, style: F.FigureStyle) -> go.Figure:
    steps = [c["step"] for c in checkpoints]
    series = {_("loss on the repeat"): [c["loss_repeat"] for c in checkpoints],
              _("loss elsewhere"): [c["loss_other"] for c in checkpoints]}
    control_name = _("one-layer control: loss on the repeat")
    if control:
        n = len(checkpoints)
        series[control_name] = [c["loss_repeat"] for c in control[:n]] + [None] * max(0, n - len(control))
    change = phase_change(checkpoints)
    mark = None if change is None else (change["step"], _("phase change: step {s} ({t} s)").format(
        s=change["step"], t=f"{change['seconds']:.1f}"))
    return F.lines_figure(steps, series, _("loss as it learns"), style, x_title=_("step"), y_title=_("loss (nats)"),
                          log_x=False, mark=mark, dash=(control_name,))


def scores_figure(checkpoints: list[dict], score: str, style: F.FigureStyle) -> go.Figure:
    steps = [c["step"] for c in checkpoints]
    heads = [(h["layer"], h["head"]) for h in checkpoints[0]["heads"]] if checkpoints else []
    series = {f"L{layer} H{head}": [next(h[score] for h in c["heads"] if (h["layer"], h["head"]) == (layer, head))
                                    for c in checkpoints] for layer, head in heads}
    title = _("{score} score of every head").format(score=_(CHECKPOINT_SCORES[score]))
    return F.lines_figure(steps, series, title, style, x_title=_("step"), y_title=_("score"), log_x=False)


def heads_figure(checkpoint: dict, tokens: list[int], style: F.FigureStyle, title: str | None = None,
                 roles=None) -> go.Figure:
    """Every (layer, head)'s attention on the probe at ``checkpoint``: a row per layer, each
    titled with its role where ``roles`` (layers, H) names one (``views.roles.head_title``)."""
    from dataclasses import replace

    import numpy as np

    w = np.asarray(checkpoint["weights"], dtype=np.float32)  # (layers, H, L, L)
    labels = [token_name(t) for t in tokens]
    data = [F.matrix_data(w[layer, h], labels, labels, head_title(layer, h, "" if roles is None else roles[layer, h]),
                          None)
            for layer in range(w.shape[0]) for h in range(w.shape[1])]
    tall = replace(style, height=style.height or 140 + 300 * w.shape[0])  # square-ish blocks
    return F.grid_figure(data, tall, title=title or _("every head on the probe at step {s}").format(
        s=checkpoint["step"]), cols=w.shape[1], ticks=False)


def opened_head_figure(weights: list, tokens: list[int], layer: int, head: int, role: str, style: F.FigureStyle
                ) -> go.Figure:
    """One head's attention on ``tokens``, large enough to read (``weights``: (layers, H, L, L))."""
    labels = [token_name(t) for t in tokens]
    w = np.asarray(weights, dtype=np.float32)[layer, head]  # (L, L)
    return F.heatmap_figure(F.matrix_data(w, labels, labels, _("head {head} on your sequence").format(
        head=head_title(layer, head, role)), None), style)


def roles_at(checkpoint: dict):
    """(layers, H) role names recorded at ``checkpoint``, or None (a record made before roles were)."""
    return tiny_roles(checkpoint["roles"]) if "roles" in checkpoint else None


def trained_roles_table(scores: dict) -> list[dict]:
    """A row per layer × head: its role and every score (``analysis.roles.SCORES``) on the roles probe."""
    return role_rows({c: np.asarray(scores[c]) for c in SCORES}, tiny_roles(scores))


def probe_words(vocab: int) -> str:
    """The roles probe as the page writes tokens: "BOS 27 21 …"."""
    return " ".join(token_name(t) for t in tiny_probe(vocab))


def control_of(settings):
    """The one-layer control: the same task and width with twice the heads where they fit."""
    heads = settings.heads * 2
    if heads > limits.MAX_LEARN_HEADS or settings.d_model % heads:
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


def probe_tokens(settings) -> list[int]:
    return probe_batch(settings).ids[0].tolist()


def summary(checkpoints: list[dict], control: list[dict] | None, change: dict | None, layers: int) -> str:
    """What the curves say, in one or two sentences."""
    first, last = checkpoints[0], checkpoints[-1]
    share = last["loss_repeat"] / first["loss_repeat"]
    text = (_("Phase change at step {s} ({t} s).").format(s=change["step"], t=f"{change['seconds']:.1f}")
            if change else _("No phase change yet."))
    text += " " + _("Loss on the repeat: {a} → {b} ({p} of its start); best prefix matching in the last layer {pm}, "
                    "best previous token in layer 0 {pt}.").format(
        a=f"{first['loss_repeat']:.2f}", b=f"{last['loss_repeat']:.2f}", p=f"{share:.0%}",
        pm=f"{best(last, 'prefix_matching', layers - 1):.2f}", pt=f"{best(last, 'previous_token', 0):.2f}")
    if control:
        c0, c1 = control[0], control[-1]
        text += " " + _("The one-layer control: prefix matching {pm}, loss on the repeat {p} of its start.").format(
            pm=f"{best(c1, 'prefix_matching'):.2f}", p=f"{c1['loss_repeat'] / c0['loss_repeat']:.0%}")
    return text
