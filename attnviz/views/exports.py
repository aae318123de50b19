"""A run as files: every weight as CSV, the whole run as JSON (byte-identical for the same
settings).
"""

from __future__ import annotations

import csv
import io
import json

from attnviz.analysis.describe import describe_grid, describe_head
from attnviz.run.result import AttentionResult
from attnviz.views.catalogue import VIEWS
from attnviz.views.selection import resolve_query


def weights_csv(result: AttentionResult) -> str:
    """Every weight in long form: sequence, head, query/key positions and tokens, weight."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["sequence", "head", "query_pos", "query", "key_pos", "key", "weight"])
    weights = result.weights  # (N, H, L, S)
    N, H, L, S = weights.shape
    for n in range(N):
        qt, kt = result.tokens[n], result.source_tokens[n]
        rows = weights[n].tolist()  # (H, L, S) as nested lists: fast to iterate
        for h in range(H):
            for i in range(L):
                row = rows[h][i]
                for j in range(S):
                    w.writerow([n, h, i, qt[i], j, kt[j], repr(row[j])])
    return buf.getvalue()


def run_json(result: AttentionResult, state=None) -> str:
    """The whole run as JSON, with the charts' text alternatives; byte-identical for the
    same config (sorted keys, no times). ``state``: a ``ViewState`` whose view has numbers of
    its own (its entry's ``record`` in ``attnviz.views.catalogue``): weighted norms and
    knock-out, the neuron view (under ``"view"``), the roles' ``head_scores`` ({score: layers ×
    heads} of sentence ``state.seq``), the flow's ``attention_flow`` (L × L)."""
    data = result.to_dict()
    N, H = result.weights.shape[:2]
    data["descriptions"] = [{"all_heads": describe_grid(result, n), "heads": [describe_head(result, n, h)
                                                                            for h in range(H)]} for n in range(N)]
    view = VIEWS.get(state.view) if state is not None else None
    if view is not None and view.record is not None:
        data.update(view.record(result, resolve_query(result, state)))
    return json.dumps(data, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
