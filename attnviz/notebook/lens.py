"""What each layer of a causal LM would predict, from a notebook: the logit lens and the tuned lens
(``attnviz.analysis.lens`` and ``attnviz.analysis.tunedlens``: the definitions and their sources), offline.

    import attnviz
    r = attnviz.logit_lens("path/to/gpt2", "The Eiffel Tower is in the city of", answer="ĠParis")
    r.points                    # "embeddings", "layer 0 middle", "layer 0 end", …
    r.top_tokens[-1][-1], r.kl  # the model's own top 5 at the last position; (points, positions)
    lens = attnviz.train_lens("path/to/gpt2", steps=200, out="my-lens")   # tuned-lens 0.2.0's format
    attnviz.logit_lens("path/to/gpt2", text, lens="my-lens").kl
    attnviz.lens_view("path/to/gpt2", text)                     # the Logit lens page's grid, a Plotly figure
    attnviz.lens_view("path/to/gpt2", text, show="step", cell=("layer 3 end", -1))   # a step, in parts

``model``: what ``attnviz.patch_heads`` takes (a model name the app offers, a Hugging Face folder's
path, ``"watch-it-learn"`` or an attnviz ``AttentionOnly``). ``answer`` and ``wrong``: one token each,
as the tokenizer spells it, or its id.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import plotly.graph_objects as go
import torch

from attnviz import limits
from attnviz.analysis.lens import LENS_BOUND, LensResult, lens_step, logit_lens_of, steepest_step
from attnviz.analysis.subjects import TinySubject, answer_ids
from attnviz.analysis.tunedlens import TunedLens, fit, read_lens
from attnviz.inputs.corpus import default_corpus, read_corpus
from attnviz.learn.tasks import batch
from attnviz.learn.trained import subject_of
from attnviz.plots.lens import answer_lines, lens_grid, step_bars
from attnviz.plots.style import FigureStyle

DEFAULT_STEPS = 200


def logit_lens(model, text, *, mode: str | None = None, lens=None, mid: bool = True, k: int = 5,
               answer: str | int | None = None, wrong: str | int | None = None, positions=None) -> LensResult:
    """Every point of the residual stream read through the unembedding: the embeddings, each layer's
    middle (after its attention, before its MLP, where it has one; ``mid``) and each layer's end.

    ``mode``: ``"final-scale"`` (the default without a lens: each stream divided by the final stream's
    norm scale, so that the steps between points are the parts' direct logit attribution) or
    ``"per-layer"`` (the final norm recomputed on each stream: TransformerLens's
    ``accumulated_resid(apply_ln=True)``; the default, and the only form, with a lens). ``lens``: a
    tuned lens (a folder in tuned-lens 0.2.0's format, or what ``train_lens`` returns), which reads
    the embeddings and each layer's end. ``positions``: the positions read (an int, a list, or None for
    every one). ``.top_ids``, ``.top_tokens``, ``.top_probs`` (points, positions, k); ``.entropy``,
    ``.kl`` (to the model's own distribution), and with ``answer`` ``.answer_logit`` (centred, or
    logit[answer] − logit[wrong]), ``.answer_prob``, ``.answer_rank`` (points, positions)."""
    subject = subject_of(model, "lens")
    if lens is not None and not isinstance(lens, TunedLens):
        lens = read_lens(lens, subject)
    mode = mode if mode is not None else ("per-layer" if lens is not None else "final-scale")
    return logit_lens_of(subject, text, mode=mode, lens=lens, mid=mid, k=k, answer=answer, wrong=wrong,
                         positions=positions)


def _sequences(subject, corpus, seed: int) -> list[list[int]]:
    """The corpus's texts (or token-id lists) as token ids: by default the built-in corpus's sentences
    (``attnviz.inputs.corpus``), for Watch it learn's model sequences of its task."""
    if corpus is None and isinstance(subject, TinySubject):
        m = subject.model
        made = batch("induction", limits.LENS_TRAIN_TOKENS // m.length, m.length, m.vocab,
                     torch.Generator().manual_seed(seed))
        return made.ids.tolist()
    if corpus is None:
        corpus = default_corpus()
    elif isinstance(corpus, (str, Path)):
        path = Path(corpus)
        if not path.is_file():
            raise ValueError(f"corpus must be a list of texts (or token ids) or a .txt file's path; there is no file "
                             f"at {str(corpus)[:80]}.")
        if path.stat().st_size > limits.MAX_CORPUS_BYTES:
            raise ValueError(f"{path} has {path.stat().st_size:,} bytes; a corpus holds at most "
                             f"{limits.MAX_CORPUS_BYTES:,}.")
        corpus = read_corpus(path.read_bytes())
    return [subject.ids(item, LENS_BOUND) for item in corpus]


def train_lens(model, corpus=None, *, steps: int = DEFAULT_STEPS, seed: int = 0, out=None,
               progress: Callable[[float], None] | None = None) -> TunedLens:
    """A tuned lens trained here: one translator per layer, h + A h + b, starting from the logit lens and
    minimising each layer's KL divergence to the model's own distribution over ``corpus`` (texts or
    token-id lists, or a .txt file, one text a line; by default the built-in corpus, for Watch it learn's
    model sequences of its task), ``steps`` steps of ``LENS_BATCH_TOKENS`` tokens, seeded. ``out``: a
    folder to write it to, in tuned-lens 0.2.0's format (``.save(folder)`` later does the same).
    ``.fit`` says how it went: each layer's KL on the corpus for the logit lens and for this one.
    ``progress(fraction)``: called after each step."""
    subject = subject_of(model, "lens")
    lens = fit(subject, _sequences(subject, corpus, seed), steps=steps, seed=seed, progress=progress)
    if out is not None:
        lens.save(out)
    return lens


SHOWS = ("grid", "answer", "step")


def _cell(r: LensResult, cell) -> tuple[int, int]:
    """(row, column) of ``cell`` = (point, position): the point an index of ``r.points`` or its name, the
    position a text position (negative from the end); the position alone, or None: the last, and there the
    point into which the answer's logit rises most."""
    point, position = (None, cell) if not isinstance(cell, tuple) else cell
    n = len(r.tokens)
    position = n - 1 if position is None else position
    if isinstance(position, bool) or not isinstance(position, int) or not -n <= position < n:
        raise ValueError(f"Position {position!r} is out of range: the text has {n} tokens (positions 0 to {n - 1}, "
                         f"or −{n} to −1 from the end).")
    column = r.positions.index(position % n)
    if point is None:
        return steepest_step(r, column), column
    if isinstance(point, str):
        if point not in r.points:
            raise ValueError(f"No point is named {point!r}: the lens reads {', '.join(r.points)}.")
        return r.points.index(point), column
    if isinstance(point, bool) or not isinstance(point, int) or not 0 <= point < len(r.points):
        raise ValueError(f"Point {point!r} is out of range: the lens reads {len(r.points)} points (0 to "
                         f"{len(r.points) - 1}).")
    return point, column


def lens_view(model, text, *, show: str = "grid", colour: str = "probability", mode: str | None = None, lens=None,
              mid: bool = True, answer: str | int | None = None, wrong: str | int | None = None, cell=None,
              style: FigureStyle | None = None) -> go.Figure:
    """The Logit lens page's figures, offline (never shown: display it). ``show``: "grid" (points × positions,
    each cell the top token, coloured by ``colour``: "probability", "entropy" or "kl"; ``cell`` outlined where
    given), "answer" (the answer's probability and rank through the points at ``cell``'s position) or "step"
    (the final-scale step into ``cell``'s point at its position, as the parts added between the two points:
    each head of the layer, its attention biases, its MLP; they sum to the step). ``cell``: (point, position),
    the point an index of ``.points`` or its name ("layer 3 end"), the position a text position (negative from
    the end); a position alone or None: the last position, and the point into which the answer's logit rises
    most. ``answer``: by default the model's own top token at the last position. The rest as ``logit_lens``
    takes it."""
    if show not in SHOWS:
        raise ValueError(f"show must be one of {', '.join(SHOWS)}; got {show!r}.")
    subject = subject_of(model, "lens")
    if lens is not None and not isinstance(lens, TunedLens):
        lens = read_lens(lens, subject)
    mode = mode if mode is not None else ("per-layer" if lens is not None else "final-scale")
    if show == "step" and (mode != "final-scale" or lens is not None):
        raise ValueError("Only the final-scale logit lens's steps are the sum of the parts added between two points: "
                         "every point divided by the final stream's norm scale is linear in the stream. A per-layer "
                         "point, or a tuned lens's, is divided by its own scale (and translated), so its steps are "
                         "not: use mode=\"final-scale\" without a lens.")
    ids = subject.ids(text, LENS_BOUND)
    if answer is None:  # the model's own top token at the last position
        answer = int(logit_lens_of(subject, ids, k=1, positions=-1, mid=False).top_ids[-1, 0, 0])
    r = logit_lens_of(subject, ids, mode=mode, lens=lens, mid=mid, answer=answer, wrong=wrong)
    row, column = _cell(r, cell)
    style = style or FigureStyle()
    if show == "grid":
        return lens_grid(r, colour, style, (row, column) if cell is not None else None)
    if show == "answer":
        return answer_lines(r, column, style, row if isinstance(cell, tuple) else None)
    a, w = answer_ids(subject, answer, wrong)
    return step_bars(lens_step(subject, ids, r.points, row, r.positions[column], answer=a, wrong=w), style)
