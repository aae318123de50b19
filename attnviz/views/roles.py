"""Head roles as the pages show them, one way for every page that names them (the explorer's
model view and Head roles view, the attention-file page, Watch it learn's heads and table): a
head's title with its role, the one-line legend of what each role means and its threshold, the
table's rows, and the Head roles view (its table, figure, caption and JSON numbers: its entry in
``attnviz.views.catalogue``). The scores, the thresholds and the roles themselves are
``attnviz.analysis.roles``'s, the probe ``attnviz.analysis.probe``'s."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from attnviz import plots as F
from attnviz.analysis.probe import PROBE_LENGTH, PROBE_SEED, probe_scores, probe_text_of
from attnviz.analysis.roles import (
    PROBE_ROLES,
    ROLE_LABELS,
    ROLE_THRESHOLDS,
    ROLE_WORDS,
    SCORES,
    head_roles,
    head_scores,
)
from attnviz.i18n import _
from attnviz.run.result import AttentionResult
from attnviz.views.markdown import md


def head_title(layer: int, head: int, role: str = "", *, stacked: bool = False) -> str:
    """"L1 H0", and " · " its role's short label where it has one. ``stacked``: for small
    multiples whose rows are named by layer (``grid_figure``'s ``row_names``), "H0", and the
    role on a second line, so that a row of twelve titles does not run together."""
    if stacked:
        return f"H{head}" + (f"<br>{_(ROLE_LABELS[role])}" if role else "")
    return f"L{layer} H{head}" + (f" · {_(ROLE_LABELS[role])}" if role else "")


def roles_legend() -> str:
    """Every role's label, what its score measures and its threshold, on one line (Markdown)."""
    return " · ".join(f"**{_(ROLE_LABELS[r])}** {_(ROLE_WORDS[r])} ≥ {t}" for r, t in ROLE_THRESHOLDS.items())


def thresholds() -> str:
    """Every role's score and threshold, for a page's caption: "previous_token ≥ 0.4, …"."""
    return ", ".join(f"{k} ≥ {v}" for k, v in ROLE_THRESHOLDS.items())


def role_rows(columns: dict[str, np.ndarray], roles: np.ndarray) -> list[dict]:
    """A row per layer × head: its layer, head, role, then each column's (layers, heads) score."""
    layers, heads = roles.shape
    return [{"layer": layer, "head": h, "role": roles[layer, h],
             **{name: float(v[layer, h]) for name, v in columns.items()}}
            for layer in range(layers) for h in range(heads)]


def _sentence_scores(result: AttentionResult, seq: int) -> dict[str, np.ndarray]:
    k = result.lengths[seq]
    return head_scores(result.layer_weights[:, seq, :, :k, :k].numpy(), result.tokens[seq][:k])


def roles_figure(result: AttentionResult, state, style: F.FigureStyle) -> go.Figure:
    """Every head's scores on this sentence (a row per layer × head); the probe-only scores are left out."""
    s = _sentence_scores(result, state.seq)
    names = [c for c in SCORES if c not in PROBE_ROLES]
    layers, H = s[names[0]].shape
    m = np.stack([s[c].reshape(-1) for c in names], axis=1)  # (layers·H, scores)
    rows = [f"L{layer} H{h}" for layer in range(layers) for h in range(H)]
    return F.matrix_figure(m, rows, names, _("head scores on this sentence (induction and duplicate-token need "
                                             "a repeated probe)"), style, value_name=_("score"), zero_one=True)


def roles_table(result: AttentionResult, state) -> list[dict]:
    """A row per layer × head: its scores on the sentence, the probe-only scores on the probe
    (where the run can be repeated on one) and its role."""
    s = _sentence_scores(result, state.seq)
    probe = probe_scores(result)
    return role_rows({**{c: s[c] for c in SCORES if c not in PROBE_ROLES},
                      **({f"{c} (probe)": probe[c] for c in PROBE_ROLES} if probe else {})}, head_roles(s, probe))


def roles_caption(result: AttentionResult, state) -> str:
    """The view's definitions in one paragraph, with the probe it was scored on (or why there is none)."""
    probe = probe_text_of(result)
    return _("Each head's scores on this sentence (mean weight on the previous token, the first token, itself; "
             "entropy divided by ln of the visible keys). A role is named where its score passes its threshold "
             "({thresholds}). Select a row to open that head.").format(thresholds=thresholds()) + " " + (
        _("Induction (weight on the token after an earlier copy) and duplicate-token (weight on earlier copies) "
          "cannot be read from your sentence: they are scored on a probe, {n} random words of the model's own "
          "vocabulary repeated once (seed {seed}): “{probe}”.").format(n=PROBE_LENGTH, seed=PROBE_SEED,
                                                                      probe=md(probe))
        if probe else _("Induction and duplicate-token need a probe of repeated random tokens, which this run cannot "
                        "be repeated on: they are not scored."))


def roles_record(result: AttentionResult, state) -> dict:
    seq = min(state.seq, len(result.lengths) - 1)
    return {"head_scores": {name: v.tolist() for name, v in _sentence_scores(result, seq).items()}}
