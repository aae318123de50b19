"""Page-level selectors shared by the explorer and the teaching pages."""

from __future__ import annotations

import streamlit as st

from attnviz.i18n import _
from attnviz.pipeline import AttentionResult


def head_and_query(result: AttentionResult, seq: int, *, query_label: str | None = None,
                   with_head: bool = True) -> tuple[int, int]:
    """Selectboxes for the head and the query token (URL keys ``head`` and ``query``);
    ``with_head=False`` for a page that shows every head at once."""
    H, L = result.weights.shape[1], result.weights.shape[2]
    ss = st.session_state
    if not 0 <= ss.get("head", 0) < H:
        ss["head"] = 0
    if not 0 <= ss.get("query", -1) < L:  # -1 (the default) or past the end: the last real token
        ss["query"] = result.lengths[seq] - 1
    tokens = result.tokens[seq]
    query_label = query_label or _("Query token")
    c1, c2, _spacer = st.columns([1, 2, 3])
    h = (c1.selectbox(_("Head"), list(range(H)), key="head", help=_("Which head to follow.")) if with_head
         else ss["head"])
    q = c2.selectbox(query_label, list(range(L)), key="query", format_func=lambda i: f"{i}: {tokens[i]}",
                     help=_("Which query token to follow (the last one sees the most keys under a causal mask)."))
    return int(h), int(q)


def uploaded_bytes(label: str, types: list[str], *, key: str, help: str) -> tuple[bytes, str] | None:
    """The bytes and name of an uploaded file, or None. Size is capped by Streamlit
    (server.maxUploadSize) and again by the reader (attnviz.limits.MAX_UPLOAD_BYTES)."""
    f = st.file_uploader(label, type=types, key=key, help=help)
    return None if f is None else (f.getvalue(), f.name)


def verify_line(result) -> None:
    """One line: this run checked against nn.MultiheadAttention, as on the Verify page."""
    from attnviz.verify import verify_result

    try:
        v = verify_result(result)
    except ValueError as e:
        st.caption(_("Not verified here: {reason}").format(reason=e))
        return
    worst = max(c.max_abs_diff for c in v.checks)
    text = _("Verified against torch.nn.MultiheadAttention and F.scaled_dot_product_attention: max |difference| "
             "{worst} (threshold {threshold}) — {verdict}.").format(
        worst=f"{worst:.1e}", threshold=f"{v.threshold:.0e}", verdict=_("pass") if v.passed else _("FAIL"))
    (st.success if v.passed else st.error)(text, icon=":material/verified:" if v.passed else ":material/cancel:")


def upload_or_sample(upload_label: str, types: list[str], upload_key: str, upload_help: str, sample_label: str,
                     samples: tuple[str, ...], sample_key: str, sample_help: str, read) -> tuple[tuple, object]:
    """An uploaded file (read once per content by ``read``, errors shown on the page) or
    a built-in sample: (source key, what ``read`` returned, or None for the sample)."""
    import hashlib

    from ui import compute

    c1, c2 = st.columns(2)
    with c1:
        upload = uploaded_bytes(upload_label, types, key=upload_key, help=upload_help)
    c2.selectbox(sample_label, samples, key=sample_key, disabled=upload is not None, help=sample_help)
    if upload is None:
        return ("sample", st.session_state[sample_key]), None
    data, _name = upload
    source = ("upload", hashlib.sha256(data).hexdigest())
    return source, compute.guard(lambda: compute.cached((upload_key, source), lambda: read(data), limited=False))


def projections_toggle() -> None:
    """The modality pages' own Q/K/V switch: off (plain similarity) by default there."""
    st.toggle(_("Q/K/V projections"), key="input_projections",
              help=_("Off (the default here): Q = K = V = X, so attention is plain similarity of the inputs. On: "
                     "seeded projections, as in a Transformer layer."))


def input_results(key: tuple, inp, result, state, style, name: str, views: tuple[str, ...] = ("grid",)) -> None:
    """What every image/audio/graph page ends with: its views of the weights (the head
    grid, the mean), the one-line verification and the run's JSON download."""
    from attnviz.views import input_view_figure, run_json
    from ui import compute

    for view in views:
        compute.chart(compute.figure((name, view, key, compute.style_key(style)),
                                     lambda view=view: input_view_figure(inp, result, state.with_(view=view), style)),
                      key=f"{name}_{view}", filename=f"attnviz-{name}-{view}")
    verify_line(result)
    st.download_button(_("Run (JSON)"), data=lambda: run_json(result), file_name=f"attnviz-{name}.json",
                       mime="application/json", on_click="ignore", key=f"dl_{name}_json", icon=":material/download:")
