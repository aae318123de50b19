"""``python -m attnviz learn``: train once, write the record as JSON and the figures for docs.

    python -m attnviz learn --layers 2 --heads 2 --steps 2000 --json run.json --out figures/

``--out DIR`` writes ``loss.png``, ``scores.png`` (the three scores of every head),
``heads-step<N>.png`` at the first checkpoint, the phase change and the last one, and
``heads.html``: every checkpoint's heads as one self-contained animation (Plotly's frames
and slider, Plotly's JavaScript inlined: it plays offline); each head is titled with its
role at that checkpoint, as on the page.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import fields
from pathlib import Path

import plotly.graph_objects as go
import torch

from attnviz import plots as F
from attnviz.atomic import write_atomic
from attnviz.learn.train import LearnSettings, phase_change, train
from attnviz.plots.export import ImageExporter, check_writable
from attnviz.views import learn as V


def settings_from(args) -> LearnSettings:
    """The flags given (the rest default), validated; ``ValueError`` names the first bad one."""
    given = {f.name: getattr(args, f.name) for f in fields(LearnSettings)
             if f.metadata.get("spec") is not None and getattr(args, f.name, None) is not None}
    settings = LearnSettings(**given)
    try:
        settings.validate()
    except ValueError as e:  # name the flag, not the link's name
        flag = {f.metadata.get("url"): "--" + f.name.replace("_", "-") for f in fields(LearnSettings)}
        raise ValueError(re.sub(r"\blearn_\w+", lambda m: flag.get(m.group(0), m.group(0)), str(e))) from None
    return settings


def animation(record: dict, style: F.FigureStyle) -> go.Figure:
    """Every checkpoint's heads as frames of one figure, with a slider and play button."""
    figs = [V.heads_figure(c, record["probe"]["tokens"], style, roles=V.roles_at(c)) for c in record["checkpoints"]]
    base = go.Figure(figs[-1].to_dict())
    base.frames = [go.Frame(data=f.to_dict()["data"], name=str(c["step"]),
                            layout={"title": f.layout.title, "annotations": f.layout.annotations})
                   for f, c in zip(figs, record["checkpoints"], strict=True)]
    steps = [{"label": str(c["step"]), "method": "animate",
              "args": [[str(c["step"])], {"mode": "immediate", "frame": {"duration": 0, "redraw": True}}]}
             for c in record["checkpoints"]]
    base.update_layout(
        sliders=[{"steps": steps, "currentvalue": {"prefix": "step "}, "active": len(steps) - 1}],
        updatemenus=[{"type": "buttons", "showactive": False, "x": 0, "y": -0.08, "buttons": [
            {"label": "play", "method": "animate",
             "args": [None, {"frame": {"duration": 300, "redraw": True}, "fromcurrent": True}]},
            {"label": "pause", "method": "animate", "args": [[None], {"mode": "immediate"}]}]}])
    return base


def write_figures(record: dict, out: Path, exporter: ImageExporter) -> list[Path]:
    style = F.FigureStyle()
    out.mkdir(parents=True, exist_ok=True)
    cs = record["checkpoints"]
    written = []

    def png(name: str, fig: go.Figure, height: int = 500) -> None:
        path = out / name
        check_writable(path)
        write_atomic(path, exporter.render(fig, "png", width=1000, height=height, scale=1.0))
        written.append(path)

    png("loss.png", V.loss_figure(cs, None, style))
    for score in V.CHECKPOINT_SCORES:
        png(f"scores-{score}.png", V.scores_figure(cs, score, style), 420)
    change = phase_change(cs)
    chosen = {0, len(cs) - 1}
    if change is not None:
        chosen.add(next(i for i, c in enumerate(cs) if c["step"] == change["step"]))
    for i in sorted(chosen):
        png(f"heads-step{cs[i]['step']}.png", V.heads_figure(cs[i], record["probe"]["tokens"], style,
                                                                 roles=V.roles_at(cs[i])), 700)
    html = out / "heads.html"
    check_writable(html)
    write_atomic(html, animation(record, style).to_html(include_plotlyjs=True, full_html=True).encode("utf-8"))
    written.append(html)
    return written


def learn_command(args) -> int:
    """The ``learn`` subcommand; raises ``ValueError`` (one line for the caller) on bad input."""
    if not args.json and not args.out:
        raise ValueError("Give --json OUT and/or --out DIR.")
    settings = settings_from(args)
    for path in (Path(args.json),) if args.json else ():
        check_writable(path)

    def progress(c: dict) -> None:
        print(f"step {c['step']:5d}  {c['seconds']:6.1f} s  loss on the repeat {c['loss_repeat']:.3f}", file=sys.stderr,
              flush=True)

    torch.set_num_threads(1)  # as in the app's worker: the same numbers as the page's training
    record = train(settings, progress)
    if args.json:
        write_atomic(Path(args.json), json.dumps(record, sort_keys=True).encode("utf-8"))
    if args.out:
        with ImageExporter() as exporter:
            write_figures(record, Path(args.out), exporter)
    print(f"attnviz: {record['status']}; phase change: {record['phase_change']}", file=sys.stderr)
    return 0 if record["status"] == "done" or record["status"].startswith("stopped") else 2
