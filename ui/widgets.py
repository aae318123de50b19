"""Page-level selectors shared by the explorer and the teaching pages."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import streamlit as st

from attnviz.analysis.verify import verify_result
from attnviz.i18n import N_, _, fixed
from attnviz.run.result import AttentionResult
from attnviz.views.exports import run_json, weights_csv
from attnviz.views.markdown import md
from attnviz.views.patching import EXAMPLE, example_state, pair_problem
from attnviz.views.selection import fallbacks
from ui import compute, loading, session
from ui.controls import control, row

_UNESCAPED_BRACKET = re.compile(r"(?<!\\)([\[\]])")
# What each download holds, said beside its button (translated when shown).
WEIGHTS_CSV_HOLDS = N_("Every weight, one row each: sequence, head, query and key (position and token), weight.")
RUN_JSON_HOLDS = N_("The whole run: settings, tokens, weights, output and each chart's text description.")


def chart_columns(spec: int | Sequence[float]) -> list:
    """``st.columns(spec)`` for charts side by side; in presenter mode one container under another, so that
    each chart takes a projector's whole width (side by side at 1024 px, their titles and labels were cut)."""
    n = spec if isinstance(spec, int) else len(spec)
    return [st.container() for _i in range(n)] if st.session_state.get("present") else st.columns(spec)


def header(title: str, *notes: str) -> None:
    """A page's title and the small grey notes under it, as one Markdown element.

    ``st.title`` and ``st.caption`` would be two: every element is a message that the
    server makes and sends on every run, and a class joining at once waits for thirty
    runs of them (docs/benchmarks.md: ten captions made a bare page's join 1.35× slower).
    Each note is Markdown, as a caption's would be, inside ``:small[:gray[…]]``; its square
    brackets ("[PAD]") are escaped so that none can end that early (so a note holds no
    links), and those already escaped (``attnviz.views.markdown.md``) are left as they are.
    """
    escaped = [_UNESCAPED_BRACKET.sub(r"\\\1", note) for note in notes if note]
    if st.session_state.get("present") and escaped:
        # On a projector the notes fold under the title: at presenter mode's body size they pushed the first
        # chart below the screen. The teacher opens them when the class needs them.
        st.markdown(f"# {title}")
        st.expander(_("What this page shows")).markdown("\n\n".join(escaped))
        return
    small = "\n\n".join(f":small[:gray[{note}]]" for note in escaped)
    st.markdown(f"# {title}" + (f"\n\n{small}" if small else ""))


def header_folding(title: str, note: str, fold: str):
    """A page's title and notes (``header``), and where what its lesson is chosen from before a class goes: on a
    projector one expander named ``fold``, the notes first in it (one fold above the first chart, not two); on a
    laptop the page itself, the notes under the title."""
    if not st.session_state.get("present"):
        header(title, note)
        return st.container()
    header(title)
    about = st.expander(fold)
    about.caption(note)
    return about


@dataclass(frozen=True)
class Download:
    """One file a page offers: made only when it is asked for (``data``)."""

    label: str
    data: Callable[[], str | bytes]
    file_name: str
    mime: str
    key: str
    what: str = ""  # what the file holds, said beside its button


def _download_button(f: Download, *, with_help: bool = True) -> None:
    st.download_button(f.label, data=f.data, file_name=f.file_name, mime=f.mime, on_click="ignore", key=f.key,
                       icon=":material/download:", help=(f.what or None) if with_help else None)


def downloads(files: Sequence[Download], *, key: str) -> None:
    """A page's files: one file as its own button; more behind one "Download…" button
    whose dialog lists them, each with what it holds.

    Every element is a message the server makes and sends on every run, and a class
    joining at once waits for thirty first runs of them (docs/serving.md): two buttons
    side by side are three elements on every run (their row and each), the one button
    is one, and the dialog's are drawn only when it is opened (a rerun of that session).
    The files are made only when clicked (``on_click="ignore"``: no rerun either).
    """
    if len(files) == 1:
        _download_button(files[0])
        return
    if st.button(_("Download…"), key=key, icon=":material/download:",
                 help=" · ".join(f.label for f in files)):
        st.dialog(_("Download this run"))(_download_list)(files)


def run_downloads(result: AttentionResult, *, key: str, json_name: str, csv_name: str | None = None) -> None:
    """A run's files through ``downloads``: the weights as CSV (where ``csv_name`` is given)
    and the whole run as JSON, keyed ``{key}_csv`` and ``{key}_json``."""
    files = [] if csv_name is None else [Download(_("Weights (CSV)"), lambda: weights_csv(result), csv_name,
                                                  "text/csv", f"{key}_csv", _(WEIGHTS_CSV_HOLDS))]
    files.append(Download(_("Run (JSON)"), lambda: run_json(result), json_name, "application/json", f"{key}_json",
                          _(RUN_JSON_HOLDS)))
    downloads(files, key=key)


def _download_list(files: Sequence[Download]) -> None:
    for f in files:
        _download_button(f, with_help=False)  # what it holds is written under it
        if f.what:
            st.caption(f.what)
    st.caption(_("Each chart saves itself as PNG from its own toolbar (the camera icon)."))


def head_and_query(result: AttentionResult, seq: int, *, query_label: str | None = None,
                   with_head: bool = True, with_query: bool = True, into=None) -> tuple[int, int]:
    """Selectboxes for the head and the query token (URL keys ``head`` and ``query``), their
    options from the run; ``with_head=False`` for a page that shows every head at once,
    ``with_query=False`` for a view that reads no query. The query's first option, -1 (its
    default), follows the last real token of whatever sentence is typed, and stays out of the
    link; a chosen head or query that the new input no longer has is said, and falls back. ``into``: a row
    (``ui.controls.row``) to draw them in, beside the page's own controls."""
    H, L = result.heads, result.weights.shape[2]
    last = result.lengths[seq] - 1
    ss = st.session_state
    fallen, notes = fallbacks(result, session.current().with_(seq=seq),
                              ("head",) * with_head + ("query",) * with_query)
    for note in notes:
        st.info(note, icon=":material/info:")
    if fallen:
        session.fall_back(fallen)
    tokens = result.tokens[seq]
    t = fixed()  # a format_func runs outside this run's context: bind its language now

    def spelled(i: int) -> str:
        return t("last token ({i}: {token})").format(i=last, token=tokens[last]) if i < 0 else f"{i}: {tokens[i]}"

    pair = into or (row() if with_head and with_query else st)
    h = control("head", pair, options=range(H), width=140) if with_head else ss.get("head", 0)
    q = control("query", pair, options=[-1, *range(L)], label=query_label, format_func=spelled,
                width=280) if with_query else ss.get("query", -1)
    return int(h), (last if int(q) < 0 else int(q))


def uploaded_bytes(label: str, types: list[str], *, key: str, help: str) -> tuple[bytes, str] | None:
    """The bytes and name of an uploaded file, or None. Size is capped by Streamlit
    (server.maxUploadSize) and again by the reader (attnviz.limits.MAX_UPLOAD_BYTES)."""
    f = st.file_uploader(label, type=types, key=key, help=help)
    return None if f is None else (f.getvalue(), f.name)


def verify_line(result) -> None:
    """One line: this run checked against nn.MultiheadAttention, as on the Verify page."""
    try:
        v = verify_result(result)
    except ValueError as e:
        st.caption(_("Not verified here: {reason}").format(reason=e))
        return
    worst = max(c.max_abs_diff for c in v.checks)
    text = _("Verified against torch.nn.MultiheadAttention and F.scaled_dot_product_attention: max |difference| "
             "{worst}, within {tolerance} as torch.testing.assert_close allows in {dtype} — {verdict}.").format(
        worst=f"{worst:.1e}", tolerance=v.checks[0].tolerance, dtype=v.dtype,
        verdict=_("pass") if v.passed else _("FAIL"))
    (st.success if v.passed else st.error)(text, icon=":material/verified:" if v.passed else ":material/cancel:")


def upload_or_sample(upload_label: str, types: list[str], upload_key: str, upload_help: str, sample: str,
                     read) -> tuple[tuple, object]:
    """An uploaded file (read once per content by ``read``, errors shown on the page) or
    the built-in sample that setting ``sample`` names: (source key, what ``read``
    returned, or None for the sample)."""
    c1, c2 = st.columns(2)
    with c1:
        upload = uploaded_bytes(upload_label, types, key=upload_key, help=upload_help)
    choice = control(sample, c2, disabled=upload is not None)
    if upload is None:
        return ("sample", choice), None
    data, _name = upload
    source = ("upload", hashlib.sha256(data).hexdigest())
    return source, compute.guard(lambda: compute.cached((upload_key, source), lambda: read(data), limited=False))


def projections_toggle(disabled: bool = False) -> None:
    """The modality pages' own Q/K/V switch: off (plain similarity) by default there."""
    control("input_projections", disabled=disabled)


def input_results(key: tuple, result, style, name: str, figure: Callable[[str], object],
                  views: tuple[str, ...] = ("grid",)) -> None:
    """What every image/audio/graph page ends with: its views of the weights (the head grid, the mean), each
    drawn by ``figure(view)`` (the page's own, ``attnviz.views.modality.input_view_figure``), the one-line
    verification and the run's JSON download."""
    for view in views:
        fig = compute.cached_figure((name, view, key, compute.style_key(style)), lambda view=view: figure(view))
        compute.chart(fig, key=f"{name}_{view}", filename=f"attnviz-{name}-{view}")
    verify_line(result)
    run_downloads(result, key=f"dl_{name}", json_name=f"attnviz-{name}.json")


def picked_head(table, key: str,
                text_columns: tuple[str, ...] = ("layer", "head", "role")) -> tuple[int, int, int] | None:
    """A sortable table of heads (a pandas DataFrame with "layer" and "head" columns; every
    other column but ``text_columns`` a score shown to 3 decimals), one row selectable:
    (row, layer, head) of the selected row, or None. Selected rows keep their positions
    whatever the sort, so the row indexes ``table`` as given."""
    picked = st.dataframe(table, hide_index=True, on_select="rerun", selection_mode="single-row", key=key,
                          column_config={c: st.column_config.NumberColumn(format="%.3f")
                                         for c in table.columns if c not in text_columns})
    rows = picked.selection.rows if picked is not None else []
    if not rows:
        return None
    row = table.iloc[rows[0]]
    return rows[0], int(row["layer"]), int(row["head"])


def job_value(job, progress: str, caption: str = "", *, stop: bool = True):
    """A background job's value (``attnviz.jobs``) once it is done. Until then: its progress bar
    (``progress``, and ``caption`` under it), a rerun of the page once it is done, and (``stop``) the
    end of this run; a failed job: its message. None where it has no value yet."""
    if not job.done.is_set():
        st.progress(job.fraction, text=progress)
        if caption:
            st.caption(caption)
        _rerun_when_done(job)
        if stop:
            st.stop()
        return None
    if job.error:
        st.error(md(job.error), icon=":material/error:")
        if stop:
            st.stop()
        return None
    return job.value


@st.fragment(run_every=0.5)
def _rerun_when_done(job) -> None:
    if job.done.is_set():
        st.rerun()


def prompt_pair(page: str, example: Callable[[object], dict | None], kind: str = EXAMPLE):
    """Two prompts and the answer (shared by the pages that patch): the model loaded or trained first, the
    model's own example pair in place of the defaults (``example(state)``: the page's own,
    ``attnviz.views.patching.example_for``), then the prompts' boxes and, side by side, the answer's and the
    wrong token's. The state with them; where they cannot be read on the model (``pair_problem``), a warning
    that says why, the fields as typed, and the state with the model's example pair of ``kind``, so that the
    page and its charts stay."""
    s = session.current()
    loading.ready(s.model)  # a folder loads, the trained model trains, in the background
    found = compute.guard(lambda: example(s))
    if found:
        session.adopt(found, page)
    # Two rows, each side by side: the prompts, then the answer and the wrong token; so that the page's
    # first chart starts in the first screen of a laptop.
    prompts = row()
    control("clean", prompts)
    control("corrupted", prompts)
    pair = row()
    control("answer", pair)
    control("wrong", pair)
    s = session.current()
    problem = compute.guard(lambda: pair_problem(s))
    if not problem:
        return s
    instead = compute.guard(lambda: example_state(s, kind))
    if compute.guard(lambda: pair_problem(instead)):  # a model with no pair of its own that it reads: the reason
        st.warning(_("The prompts and the answer: {why}").format(why=md(problem)), icon=":material/warning:")
        st.stop()
    st.warning(_("The prompts and the answer: {why} Showing the model's example pair instead; mend them in their "
                 "fields.").format(why=md(problem)), icon=":material/warning:")
    return instead
