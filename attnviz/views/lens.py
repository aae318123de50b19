"""The Logit lens page's settings, reading, figures and record (``attnviz.analysis.lens``): for a causal LM
and the sidebar's sentence, every point of the residual stream read through the unembedding (the logit
lens in its two forms, or a tuned lens), the grid of points × positions, the answer's probability and rank
through the points, and one cell's step as the parts added between two points. What ``render --page
logit-lens`` writes (every number in JSON) and the page draws.

A tuned lens is named, never given by path: ``none`` (the logit lens), ``trained`` (one trained here, as a
background job shared by everyone who asks for the same model and steps: ``TRAININGS``) or the name of a
folder in tuned-lens 0.2.0's format under a ``lens`` folder of ``ATTNVIZ_MODEL_DIRS`` (``listed_lenses``),
as models are offered by their folder's name. The library reads it, bounded and checked against the model.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, replace
from pathlib import Path

import plotly.graph_objects as go
import torch

from attnviz import jobs, limits
from attnviz.analysis.examples import example_fact
from attnviz.analysis.lens import DEFINITIONS as LIBRARY_DEFINITIONS
from attnviz.analysis.lens import (
    LENS_BOUND,
    MODES,
    NUMBERS,
    LensResult,
    LensStep,
    lens_step,
    logit_lens_of,
    steepest_step,
)
from attnviz.analysis.lens import arrival_words as arrival_words  # the page says where the answer arrives
from attnviz.analysis.patching import logit_attribution_of
from attnviz.analysis.subjects import answer_ids
from attnviz.analysis.tunedlens import TunedLens, read_lens
from attnviz.i18n import N_, _
from attnviz.inputs.text import DEFAULT_TEXT
from attnviz.jobs import Job
from attnviz.learn.trained import subject_of
from attnviz.models.registry import MODEL_DIRS_ENV
from attnviz.notebook.lens import DEFAULT_STEPS, train_lens
from attnviz.plots.lens import COLOURS, answer_lines, lens_grid, step_bars
from attnviz.plots.lens import clicked_grid_cell as clicked_grid_cell  # the page reads its clicks through here
from attnviz.plots.style import FigureStyle
from attnviz.run.run import RESULTS
from attnviz.settings.spec import OWN, Reason, setting, validate
from attnviz.views.patching import model_identity

PAGE = "logit-lens"
NO_LENS, TRAINED_HERE = "none", "trained"
LENS_FOLDER = "lens"  # under each folder of ATTNVIZ_MODEL_DIRS: the tuned lens folders offered, by name
CELL = re.compile(r"^(e|\d+m?)\.(\d+)$")  # "e.0" (the embeddings), "3m.7" (layer 3's middle), "3.7" (its end)


def listed_lenses() -> dict[str, Path]:
    """{name: folder} of the tuned lens folders under ``<each ATTNVIZ_MODEL_DIRS folder>/lens/``: each
    sub-folder with a config.json, offered by its name (never by path; "none" and "trained" are the page's)."""
    out: dict[str, Path] = {}
    for root in filter(None, (p.strip() for p in os.environ.get(MODEL_DIRS_ENV, "").split(os.pathsep))):
        base = Path(root) / LENS_FOLDER
        for folder in sorted(p for p in base.iterdir() if p.is_dir()) if base.is_dir() else []:
            if (folder / "config.json").is_file() and folder.name not in (NO_LENS, TRAINED_HERE):
                out.setdefault(folder.name, folder)
    return out


def _lenses() -> tuple:
    return (NO_LENS, TRAINED_HERE, *listed_lenses())


def _tuned(raw: str, taken: dict) -> str:
    offered = _lenses()
    if raw.strip() not in offered:  # a name only: a path, or a folder of no lens/ folder, is none of them
        raise Reason(_("is not a tuned lens this server offers ({choices})").format(choices=", ".join(offered)))
    return raw.strip()


def _one_token(raw: str, taken: dict) -> str:
    if len(raw) > limits.MAX_TOKEN_CHARS or "\n" in raw:
        raise Reason(_("must be one token, at most {n} characters").format(n=limits.MAX_TOKEN_CHARS))
    return raw


def _cell(raw: str, taken: dict) -> str:
    raw = raw.strip().lower()
    if raw and not CELL.match(raw):
        raise Reason(_("must be empty (where the answer rises most) or point.position: e.0 (the embeddings), 3m.7 "
                       "(layer 3's middle) or 3.7 (its end)"))
    return raw


@dataclass(frozen=True)
class LensSettings:
    """The Logit lens page's own settings, declared once: its widgets, its link, the CLI's flags."""

    mode: str = setting("final-scale", url="lens_mode", pages=OWN, choices=MODES, label=N_("Form"),
                        help=N_("final-scale: every point divided by the final stream's norm scale, so that a step is "
                                "the sum of what was added. per-layer: the final norm recomputed at every point (the "
                                "usual logit lens). A tuned lens reads per-layer."))
    colour: str = setting("probability", url="lens_colour", pages=OWN, choices=COLOURS, label=N_("Colour"),
                          help=N_("What a cell's colour shows: its top token's probability, the prediction's "
                                  "entropy, or its KL divergence from the model's own."))
    mid: bool = setting(True, url="lens_mid", pages=OWN, label=N_("Middles"),
                        help=N_("Each layer's middle too: after its attention, before its MLP (where it has one)."))
    tuned: str = setting(NO_LENS, url="lens_tuned", pages=OWN, convert=_tuned, choices=_lenses,
                         label=N_("Tuned lens"),
                         help=N_("none: the logit lens. trained: a tuned lens trained here on the built-in corpus. "
                                 "Else a tuned lens folder the server offers (tuned-lens 0.2.0's format)."))
    steps: int = setting(DEFAULT_STEPS, url="lens_steps", pages=OWN, lo=limits.LENS_STEPS[0],
                         hi=limits.LENS_STEPS[1], label=N_("Training steps"),
                         help=N_("The steps of the tuned lens trained here (each of 256 tokens)."))
    answer: str = setting("", url="lens_answer", pages=OWN, convert=_one_token, label=N_("Answer"),
                          help=N_("One token, as the model's tokenizer spells it (GPT-2: ĠParis for “ Paris”). "
                                  "Empty: the model's own top token at the last position."))
    wrong: str = setting("", url="lens_wrong", pages=OWN, convert=_one_token, label=N_("Wrong token"),
                         help=N_("Optional: the answer's logit is then taken against this token's."))
    cell: str = setting("", url="lens_cell", pages=OWN, convert=_cell, label=N_("Cell"),
                        help=N_("The step opened, as point.position: e.0 (the embeddings), 3m.7 (layer 3's middle) or "
                                "3.7 (its end); a click on a cell sets it. Empty: where the answer's logit rises most "
                                "at the last position."))

    def validate(self) -> None:
        validate(self)

    def with_(self, **changes) -> LensSettings:
        return replace(self, **changes)


# Each definition in one line, its formula above it: ℓ the logits, r a point's stream, s the final norm's scale,
# w and b its weight and bias, W_U and b_U the unembedding.
DEFINITION_NAMES = {"final-scale": N_("final-scale"), "per-layer": N_("per-layer"), "tuned": N_("tuned lens"),
                    "probability": N_("probability"), "entropy": N_("entropy"), "kl": N_("KL divergence"),
                    "rank": N_("rank"), "step": N_("a step, in parts")}
DEFINITIONS = {
    "final-scale": N_("Each point's stream, centred (LayerNorm) and divided by the final stream's norm scale at that "
                      "position, then the final norm's weight and bias and the unembedding: linear in the stream."),
    "per-layer": N_("The final norm recomputed on each point's own stream, then the unembedding: TransformerLens's "
                    "accumulated_resid(apply_ln=True)."),
    "tuned": N_("Each point's stream translated by its layer's affine map, then read per-layer (Belrose et al. "
                "2023, tuned-lens 0.2.0's TunedLens.forward)."),
    "probability": N_("The softmax of a point's logits: a cell shows its top token and colours that token's "
                      "probability."),
    "entropy": N_("How spread a point's prediction is, in nats."),
    "kl": N_("How far a point's prediction is from the model's own at that position, in nats (the tuned lens's "
             "training loss)."),
    "rank": N_("How many tokens have a larger logit than the answer: 0 is the top token."),
    "step": N_("The answer's logit at a point minus at the point before, split into what was added between them: "
               "the layer's heads and attention biases, its MLP."),
}
FORMULAS = {
    "final-scale": r"\ell(r) = W_U \Big( w \odot \frac{r - \bar r}{s_{\text{final}}} + b \Big) + b_U",
    "per-layer": r"\ell(r) = W_U \Big( w \odot \frac{r - \bar r}{s(r)} + b \Big) + b_U",
    "tuned": r"\ell_{\text{tuned}}(r) = \ell_{\text{per-layer}}\big(r + A_l\, r + b_l\big)",
    "probability": r"q = \mathrm{softmax}(\ell)",
    "entropy": r"H(q) = -\sum_v q_v \log q_v",
    "kl": r"\mathrm{KL}(p \,\|\, q) = \sum_v p_v \,(\log p_v - \log q_v)",
    "rank": r"\mathrm{rank} = \#\{\, v : \ell_v > \ell_{\text{answer}} \,\}",
    "step": r"\Delta = \sum_{\text{parts } c} \frac{(c - \bar c) \cdot (w \odot d)}{s_{\text{final}}}, \quad "
            r"d = W_U[\text{answer}] - \overline{W_U}\ \ (\text{or} - W_U[\text{wrong}])",
}


# --- the sentence, the example, the tuned lens ---------------------------------------------------------

def sentence_of(state) -> str:
    """The sidebar's sentence shown (``seq``: a line of the text)."""
    lines = [ln for ln in state.text.splitlines() if ln.strip()] or [state.text]
    return lines[min(state.seq, len(lines) - 1)]


def lens_example(state) -> dict[str, str] | None:
    """Where the text and the answer are the defaults, the model's own example (``analysis.examples.example_fact``),
    by link name; None where none is known or they are the user's."""
    lens = state.lens
    if state.text != DEFAULT_TEXT or lens.answer or lens.wrong:
        return None

    def find() -> dict | None:
        return example_fact(subject_of(state.model, "lens"))

    fact = RESULTS.get_or_compute(("lens-example", *model_identity(state.model)), find)
    return None if fact is None else {"text": fact["text"], "lens_answer": fact["answer"], "lens_wrong": fact["wrong"]}


def with_lens_example(state):
    return state.with_(**example) if (example := lens_example(state)) else state


TRAININGS = jobs.kind("lens-training")  # tuned lenses trained here, by model and steps


def training_key(model: str, steps: int) -> tuple:
    return ("lens-training", *model_identity(model), int(steps))


def training_job(model: str, steps: int) -> Job:
    """The (one, shared) training of a tuned lens for ``model`` (``attnviz.train_lens`` on the built-in corpus,
    seed 0): running, finished (or failed, its message kept), or started now in the background."""
    key = training_key(model, steps)
    return TRAININGS.ask(key, lambda job: train_lens(model, steps=int(steps), progress=job.report))


def folder_lens(model: str, name: str) -> TunedLens:
    """The tuned lens folder offered as ``name``, read for ``model`` once per folder and change (the library
    bounds its files and checks it against the model); ``ValueError`` naming what does not fit."""
    folder = listed_lenses().get(name)
    if folder is None:
        raise ValueError(f"No tuned lens named {name!r} is offered here (available: {', '.join(_lenses())}).")
    stamp = max((f.stat().st_mtime_ns for f in folder.iterdir() if f.is_file()), default=0)
    return RESULTS.get_or_compute(("lens-folder", *model_identity(model), str(folder), stamp),
                                  lambda: read_lens(folder, subject_of(model, "lens")))


def fit_words(lens: TunedLens) -> str:
    """How a tuned lens trained here did, in one sentence."""
    fit = lens.fit
    return _("Trained here on {tokens:,} tokens in {seconds:.0f} s: the KL to the model's own prediction at the last "
             "layer's input is {before:.3f} nats through the logit lens, {after:.3f} through this lens.").format(
        tokens=fit["tokens"], seconds=fit["seconds"], before=fit["kl_logit_lens"][-1], after=fit["kl_tuned_lens"][-1])


def reading_key(model: str, text: str, settings: LensSettings) -> tuple:
    """The plain values a reading depends on: the model's identity, the sentence, the form, the middles, the
    answer and the tuned lens (its name, and a trained one's steps)."""
    return ("lens", *model_identity(model), text, settings.mode, settings.mid, settings.answer, settings.wrong,
            settings.tuned, settings.steps if settings.tuned == TRAINED_HERE else None)


def tuned_of(model: str, settings: LensSettings) -> TunedLens | None:
    """The tuned lens ``settings`` names, here and now (the CLI's: a training runs to its end)."""
    if settings.tuned == NO_LENS:
        return None
    if settings.tuned == TRAINED_HERE:
        return RESULTS.get_or_compute(training_key(model, settings.steps),
                                      lambda: train_lens(model, steps=settings.steps))
    return folder_lens(model, settings.tuned)


# --- the reading, its cell and its step ------------------------------------------------------------------

@dataclass
class LensReading:
    """A sentence read at every point, with the token ids its answer and steps need."""

    result: LensResult
    ids: list[int]
    answer: int  # the answer's token id: the settings', else the model's own top token at the last position
    wrong: int | None
    chosen: bool  # the answer was given (not the model's own)
    lens: TunedLens | None = None


def lens_reading(model: str, text: str, settings: LensSettings, lens: TunedLens | None = None) -> LensReading:
    """``text`` read by ``model`` at every point through the lens ``settings`` names (``lens``: that tuned
    lens, made already); ``ValueError`` with one sentence for what cannot be read."""
    subject = subject_of(model, "lens")
    ids = subject.ids(text, LENS_BOUND)
    if lens is not None:
        lens.check(subject)
    trace = subject.stack.run(torch.tensor([ids]))
    chosen = settings.answer.strip() != ""
    answer = settings.answer if chosen else int(trace.logits[0].argmax())
    a, w = answer_ids(subject, answer, settings.wrong if settings.wrong.strip() else None)
    r = logit_lens_of(subject, ids, mode="per-layer" if lens is not None else settings.mode, lens=lens,
                      mid=settings.mid, answer=a, wrong=w, trace=trace)
    if chosen:
        r.answer = settings.answer
    return LensReading(r, ids, a, w, chosen, lens)


def point_code(name: str) -> str:
    """A point as a cell's link names it: "e", "3m" (layer 3's middle), "3" (its end)."""
    if name == "embeddings":
        return "e"
    _layer_word, layer, where = name.split()
    return layer + ("m" if where == "middle" else "")


def opened_cell(reading: LensReading, settings: LensSettings) -> tuple[int, int]:
    """(row, column) of the cell ``settings`` names, else the last position's steepest step (the point into
    which the answer's logit rises most); ``ValueError`` for a point not drawn or a position out of range."""
    r = reading.result
    n = len(r.positions)
    if not settings.cell:
        return steepest_step(r, n - 1), n - 1
    code, position = CELL.match(settings.cell).groups()
    position = int(position)
    if position >= n:
        raise ValueError(f"Position {position} is out of range: the text has {n} tokens (positions 0 to {n - 1}).")
    codes = [point_code(p) for p in r.points]
    if code not in codes:
        raise ValueError(f"The point {code} is not drawn here: the grid's points are {', '.join(codes)} (e: the "
                         "embeddings, 3m: layer 3's middle, 3: its end).")
    return codes.index(code), position


def cell_name(reading: LensReading, cell: tuple[int, int]) -> str:
    return f"{point_code(reading.result.points[cell[0]])}.{reading.result.positions[cell[1]]}"


def additive_note(reading: LensReading) -> str | None:
    """Why this reading's steps are not the sum of the parts added between two points (None: they are)."""
    mode = reading.result.mode
    if mode == "final-scale":
        return None
    if mode == "tuned":
        return _("A tuned lens translates each point by its own affine map and then divides it by its own norm "
                 "scale: the step between two points is not the sum of what was added between them. The logit lens "
                 "in final-scale form is: choose the tuned lens none and the form final-scale to split a step.")
    return _("Per-layer divides each point by its own norm scale, so its logits are not linear in the stream: the "
             "step between two points is not the sum of what was added between them. Final-scale divides every "
             "point by the final stream's scale, which makes it so: choose final-scale to split a step.")


def step_of(model: str, reading: LensReading, cell: tuple[int, int]) -> LensStep:
    """The final-scale step into the cell's point at its position, in parts; the position's attribution made once
    for every point (a class opening cells of one reading computes one per position, not one per cell)."""
    r, subject, at, a, w = reading.result, subject_of(model, "lens"), reading.result.positions[cell[1]], \
        reading.answer, reading.wrong
    parts = RESULTS.get_or_compute(("lens-attribution", *model_identity(model), tuple(reading.ids[:at + 1]), a, w),
                                   lambda: logit_attribution_of(subject, reading.ids[:at + 1], answer=a, wrong=w))
    return lens_step(subject, reading.ids, r.points, cell[0], at, answer=a, wrong=w, attribution=parts)


def lens_grid_figure(reading: LensReading, settings: LensSettings, style: FigureStyle, cell=None) -> go.Figure:
    return lens_grid(reading.result, settings.colour, style, cell)


def answer_figure(reading: LensReading, cell: tuple[int, int], style: FigureStyle) -> go.Figure:
    return answer_lines(reading.result, cell[1], style, cell[0])


lens_step_figure = step_bars  # (step, style): the step's parts as bars


# --- every number, for the CLI ---------------------------------------------------------------------------

def lens_record(model: str, text: str, settings: LensSettings, reading: LensReading) -> dict:
    """Every number the page draws: the settings, the reading (every point's top tokens, entropy, KL and the
    answer's logit, probability and rank at every position), the grid's colours, the answer's chart, the
    opened cell and its step in parts (or why it cannot be split), and the definitions."""
    r = reading.result
    cell = opened_cell(reading, settings)
    row, column = cell
    note = additive_note(reading)
    step = None if note else step_of(model, reading, cell)
    values = {"probability": r.top_probs[:, :, 0], "entropy": r.entropy, "kl": r.kl}[settings.colour]
    lens = reading.lens
    return {"config": {"model": str(model), "text": text, "mode": r.mode, "colour": settings.colour,
                       "mid": settings.mid, "tuned": settings.tuned,
                       "steps": settings.steps if settings.tuned == TRAINED_HERE else None,
                       "answer": r.answer, "answer_given": reading.chosen, "wrong": r.wrong,
                       "cell": cell_name(reading, cell)},
            "lens": r.to_dict(),
            "grid": {"rows": r.points, "positions": r.positions, "colour": settings.colour,
                     "values": values.tolist(), "top_tokens": [[t[0] for t in row_] for row_ in r.top_tokens]},
            "answer_chart": {"position": r.positions[column], "points": r.points,
                             "probability": r.answer_prob[:, column].tolist(),
                             "rank": r.answer_rank[:, column].tolist(),
                             "logit": r.answer_logit[:, column].tolist(), "arrival": arrival_words(r)},
            "cell": {"point": r.points[row], "position": r.positions[column], "name": cell_name(reading, cell),
                     "top_token": r.top_tokens[row][column][0], "probability": float(r.top_probs[row, column, 0])},
            "step": None if step is None else step.to_dict(), "step_note": note,
            "tuned_lens": None if lens is None else {"config": lens.config, "notes": lens.notes, "fit": lens.fit},
            "definitions": {**LIBRARY_DEFINITIONS, "numbers": NUMBERS}}


def cli_reading(state) -> tuple[object, LensReading]:
    """(the state as the page reads it, its reading): the model's own example where the text is the default."""
    state = with_lens_example(state)
    state.lens.validate()
    return state, lens_reading(state.model, sentence_of(state), state.lens, tuned_of(state.model, state.lens))


def main_figure(state, style: FigureStyle, data: bytes | None = None) -> go.Figure:
    """The page's figure for the CLI: the grid, its opened cell outlined."""
    state, reading = cli_reading(state)
    return lens_grid_figure(reading, state.lens, style, opened_cell(reading, state.lens))


def all_figures(state, style: FigureStyle, data: bytes | None = None) -> list:
    """The grid, the answer through the points, and the opened step in parts (final-scale)."""
    state, reading = cli_reading(state)
    cell = opened_cell(reading, state.lens)
    figs = [lens_grid_figure(reading, state.lens, style, cell), answer_figure(reading, cell, style)]
    if additive_note(reading) is None:
        figs.append(lens_step_figure(step_of(state.model, reading, cell), style))
    return figs


def numbers(state, fmt: str, data: bytes | None = None) -> bytes:
    state, reading = cli_reading(state)
    record = lens_record(state.model, sentence_of(state), state.lens, reading)
    return json.dumps(record, ensure_ascii=False, sort_keys=True).encode("utf-8")
