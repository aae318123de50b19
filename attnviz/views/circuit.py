"""The circuit's data, record and figure (``attnviz.analysis.circuit``): for a model, two prompts
and an answer, every head patched, every path into every later head through q, k and v, the
circuit found by the numbers, and the composition scores from the weights; a background job shared
by everyone who asks for the same (``CIRCUITS``), on the prompts' runs the Patching page caches
(``patching.trace_of``). What ``attnviz.circuit_view`` draws, and ``render --page circuit`` would
write (every number in JSON)."""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go

from attnviz.analysis.circuit import FoundCircuit, find_circuit
from attnviz.analysis.composition import MODES, composition_scores_of
from attnviz.analysis.pathpatch import DEFINITION as PATHS
from attnviz.analysis.scoreattr import DEFINITION as SCORES
from attnviz.i18n import _
from attnviz.jobs import Job, Jobs
from attnviz.notebook.patching import subject_of
from attnviz.plots.circuit import check_threshold, circuit_figure, edges
from attnviz.plots.style import FigureStyle
from attnviz.views.patching import model_identity, trace_of

COMPOSITION = ("‖W_OV^sender · W^receiver‖_F / (‖W_OV^sender‖_F ‖W^receiver‖_F), W^receiver being W_Q W_Kᵀ (q), "
               "W_K W_Qᵀ (k) or W_V W_O (v), on the weights with the norms folded and the writing weights centred")
DEFINITIONS = {"paths": PATHS, "composition": COMPOSITION, "score_attribution": SCORES}


@dataclass
class CircuitRun:
    """Everything a picture of the circuit shows for one model, two prompts and an answer."""

    found: FoundCircuit
    composition: dict[str, np.ndarray]  # mode -> (layers, H, layers, H)


def circuit_run(model, clean, corrupted, answer, wrong=None, progress=None, step=None) -> CircuitRun:
    """The circuit between two prompts (``progress(fraction)`` as it goes; ``step(work)`` runs each
    batch of patched runs: the app's compute workers)."""
    subject = subject_of(model)
    wrong = None if wrong is None or str(wrong).strip() == "" else wrong
    found = find_circuit(subject, clean, corrupted, answer=answer, wrong=wrong, progress=progress, step=step,
                         trace=lambda ids: trace_of(subject, model, ids))
    return CircuitRun(found, {m: composition_scores_of(subject.stack, m).numpy() for m in MODES})


CIRCUITS = Jobs(keep=8, name="circuit")  # by model and prompts


def circuit_key(model, clean, corrupted, answer, wrong) -> tuple:
    return ("circuit", *model_identity(model), clean, corrupted, answer, (wrong or "").strip())


def circuit_job(model, clean, corrupted, answer, wrong=None, compute_with=None) -> Job:
    """The (one, shared) circuit job of these inputs: running, finished (or failed, its message
    kept until the inputs change), or started now in the background."""
    key = circuit_key(model, clean, corrupted, answer, wrong)
    failed = CIRCUITS.get(key)
    if failed is not None and failed.failed:
        return failed
    return CIRCUITS.start(key, lambda job: circuit_run(model, clean, corrupted, answer, wrong,
                                                       lambda f: job.report(f), compute_with))


def draw(run: CircuitRun, threshold: float, composition: str | None = "k",
         style: FigureStyle = FigureStyle()) -> go.Figure:
    """The graph: heads, the paths past ``threshold``, the ``composition`` scores beside them."""
    f = run.found
    title = f.message if f.receiver is None else _("{model}: the circuit found by the numbers (paths bringing back "
                                                   "{share} or more)").format(model=f.model, share=f"{threshold:.0%}")
    return circuit_figure(f.heads, f.paths, threshold, title, style,
                          None if composition is None else run.composition[composition])


def circuit_record(run: CircuitRun, threshold: float) -> dict:
    """Every number the picture draws, and the definitions."""
    return {"circuit": run.found.to_dict(), "threshold": check_threshold(threshold),
            "edges": [{"component": c, "sender": [s, h], "receiver": [r, g], "share": v}
                      for c, s, h, r, g, v in edges(run.found.paths, threshold)],
            "composition": {m: v.tolist() for m, v in run.composition.items()}, "definitions": DEFINITIONS}


def circuit_json(model, clean, corrupted, answer, wrong=None, threshold: float = 0.1) -> bytes:
    run = circuit_run(model, clean, corrupted, answer, wrong)
    data = {"config": {"model": str(model), "clean": clean, "corrupted": corrupted, "answer": answer,
                       "wrong": wrong or None}, **circuit_record(run, threshold)}
    return json.dumps(data, ensure_ascii=False, sort_keys=True).encode("utf-8")
