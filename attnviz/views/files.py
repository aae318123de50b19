"""A run as files: every weight as CSV, the whole run as JSON (byte-identical for the same
settings).
"""

from __future__ import annotations

import csv
import io
import json

from attnviz.run.result import AttentionResult


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
    its own, kept under ``"view"`` (weighted norms and knock-out, the neuron view); "roles"
    adds ``head_scores`` ({score: layers × heads} of sentence ``state.seq``), "flow" adds
    ``attention_flow`` (L × L)."""
    from attnviz.analysis.describe import describe_grid, describe_head
    from attnviz.views.explorer import view_record
    from attnviz.views.selection import resolve_query

    view = None if state is None else view_record(result, resolve_query(result, state), state.view)
    data = result.to_dict()
    N, H = result.weights.shape[:2]
    data["descriptions"] = [{"all_heads": describe_grid(result, n), "heads": [describe_head(result, n, h)
                                                                            for h in range(H)]} for n in range(N)]
    if view is not None:
        data["view"] = view
    if state is not None and state.view in ("roles", "flow"):
        from attnviz.analysis.roles import attention_flow, head_scores

        seq = min(state.seq, len(result.lengths) - 1)
        k = result.lengths[seq]
        w = result.layer_weights[:, seq, :, :k, :k].numpy()  # (layers, H, k, k)
        if state.view == "roles":
            data["head_scores"] = {name: v.tolist() for name, v in head_scores(w, result.tokens[seq][:k]).items()}
        else:
            data["attention_flow"] = attention_flow(w)[0].tolist()  # (k, k)
    return json.dumps(data, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
