"""Long sequences: what the L × L matrix costs, flash attention tile by tile, sparse
patterns, low rank, and the baddbmm trick, all on the sidebar's text repeated to L tokens."""

import pandas as pd
import streamlit as st

from attnviz import limits
from attnviz.i18n import _, fixed
from attnviz.views import longseq as V
from attnviz.views.selection import first_chart_style
from ui import compute, session, widgets
from ui.controls import control

s = session.current()
NOTE = _("Attention holds an L × L matrix of weights per head: memory and time grow with L². Three ideas get "
         "around it — tiles that never hold the matrix (flash attention), computing only some entries (sparse "
         "patterns) and approximating it (low rank) — shown here on your text, repeated to L tokens.")
# On a projector the tiles' sizes, the counts and the notes fold under the title and the length stays in sight: the
# cost's first chart whole on the first screen.
about = widgets.header_folding(_("Long sequences"), NOTE, _("Tile sizes, the text, and what this page shows"))
if s.present:
    control("length", kind="slider", step=16, width=480)
    c2, c3 = about.columns(2)
else:
    c1, c2, c3 = st.columns(3)
    control("length", c1, kind="slider", step=16)
control("block_q", c2, step=16)
control("block_k", c3, step=16)
s = session.current()
style = first_chart_style(s)
key = (s.config, s.long_sequences.length)
inp = compute.guard(lambda: compute.cached(("long-input", *key), lambda: V.long_input_of(s)))
H, L, D = inp.heads, inp.L, s.d_model // s.heads
mem = V.memory(s, L, H, D)
fits = V.naive_fits(L, H, D)
about.caption(_("{L} tokens: the first line ({n} tokens) repeated {r} times · {H} heads of d_k = {D} · on {device} · "
             "{mask}").format(L=L, n=round(L / inp.repeats), r=f"{inp.repeats:.1f}", H=H, D=D, device=inp.device,
                              mask=_("causal") if V.causal(s) else _("no mask")))
if not fits:
    st.info(_("Keeping the weights at this length would take {mb} MB, over this server's budget of {budget} MB: the "
              "output is computed with the tiled path only, and the parts that need the whole matrix use a shorter "
              "length.").format(mb=f"{mem['naive'] / 2**20:,.0f}",
                                budget=f"{limits.memory_budget_bytes() / 2**20:,.0f}"), icon=":material/memory:")

if not s.present:  # on a projector the section's name is its counts' expander's: one line less above its chart
    st.header(_("1. The cost of the L × L matrix"))
per_head = L * L * 4
counted = (st.expander("**" + _("1. The cost of the L × L matrix") + "** · " + _("Every count, in bytes"))
           if s.present else st.container())
counted.markdown(_("At L = {L}: one head's scores take {one}, scores and weights of all {H} heads {all}; the tiled "
                   "path holds {tiled}.").format(L=L, H=H, one=f"{per_head / 2**20:,.1f} MB",
                                       all=f"{mem['naive'] / 2**20:,.1f} MB", tiled=f"{mem['tiled'] / 2**20:,.2f} MB"))
block_q, block_k = s.long_sequences.block_q, s.long_sequences.block_k
with counted if s.present else st.expander(_("Every count, in bytes")):  # folded: open, it pushed the first chart
    # below a laptop's screen
    st.dataframe(pd.DataFrame({
        _("what"): [_("scores, one head"), _("weights, one head"), _("scores + weights, all heads"),
                    _("tiled: one step's tile, all heads"), _("tiled: everything it holds")],
        _("bytes"): [f"{n:,}" for n in (per_head, per_head, mem["naive"],
                                        H * min(L, block_q) * min(L, block_k) * 4, mem["tiled"])],
    }), hide_index=True)
cost = compute.guard(lambda: V.cost_job(H, D, s.device, block_q, block_k, V.causal(s)))
if not cost.done.is_set():  # seconds of measuring, in the background: the rest of the page is drawn meanwhile
    st.progress(cost.fraction, text=_("Measuring each path at L = 128 … 8192: {p:.0%}").format(p=cost.fraction))

    @st.fragment(run_every=0.5)
    def _poll() -> None:
        if cost.done.is_set():
            st.rerun()

    _poll()
elif cost.error:
    st.error(cost.error, icon=":material/error:")
else:
    sweep = cost.value
    time_fig, mem_fig = V.cost_figures(sweep, style)
    # one above the other, here and below: side by side, a projector's 1024 pixels cut their titles and labels
    compute.chart(time_fig, key="long_cost_time", filename="attnviz-long-time")
    compute.chart(mem_fig, key="long_cost_memory", filename="attnviz-long-memory")
    st.caption(_("Measured in this process on {device}, at L = 128 … 8192 with random Q, K, V of these sizes. "
                 "Memory is the peak of live tensors each path created (on a GPU: the allocator's peak); SDPA's fused "
                 "CPU kernel keeps its buffers out of sight, so only its output shows.").format(device=sweep.device))
    for line in sweep.skipped:
        st.caption(_("Not run: {why}.").format(why=line))

st.header(_("2. Flash attention, tile by tile"))
walk = compute.guard(lambda: compute.cached(("long-walk", *key, block_q, block_k, V.causal(s)),
                                            lambda: V.flash_walk(inp, block_q, block_k, V.causal(s))))
n_steps = len(walk.steps)
st.session_state["tile"] = min(int(st.session_state.get("tile", 0)), n_steps - 1)
control("tile", kind="slider", bounds=(0, max(1, n_steps - 1)), disabled=n_steps == 1)
step = walk.steps[min(session.current().long_sequences.tile, n_steps - 1)]
st.latex(r"m_{new} = \max(m_{old}, \max_j s_{ij}),\quad \ell \leftarrow \ell\, e^{m_{old} - m_{new}} + \sum_j "
         r"e^{s_{ij} - m_{new}}")
st.latex(r"O \leftarrow O\, e^{m_{old} - m_{new}} + e^{S - m_{new}} V")
compute.chart(V.tile_figure(inp, walk, step.key_block, style), key="long_tile", filename="attnviz-long-tile")
compute.chart(V.walk_figure(walk, style), key="long_walk", filename="attnviz-long-walk")
first = step.key_block == 0
st.markdown(_("Queries {q0}–{q1}, **step {i} of {n}**, keys {a}–{z}: the correction exp(m_old − m_new) is {c} "
              "(row mean){note}; ℓ is now {ell} (row mean).").format(
    q0=walk.first_row, q1=inp.L - 1, i=step.key_block + 1, n=n_steps, a=step.keys[0], z=step.keys[1] - 1,
    c=f"{V.step_numbers(step)['correction']:.4f}",
    note=_(" — 0 at the first block: nothing came before it") if first else "",
    ell=f"{V.step_numbers(step)['ell']:.3f}"))
if step.key_block == n_steps - 1:
    st.success(_("Last step: this block's output differs from the naive rows by {d1}, and the whole output "
                 "from F.scaled_dot_product_attention by {d2}. The full weight matrix never existed: the pass held "
                 "{peak} of tensors, where the weights alone would take {naive}.").format(
        d1=f"{walk.block_diff:.1e}", d2=f"{walk.max_diff:.1e}", peak=f"{walk.peak_bytes / 2**20:.1f} MB",
        naive=f"{walk.naive_bytes / 2**20:.1f} MB"), icon=":material/check_circle:")
else:
    st.caption(_("Move to the last step to compare with the naive output."))
st.info(_("What the real FlashAttention adds: the backward pass, which recomputes the tiles from Q, K, V and the saved "
          "m and ℓ instead of storing the weights; and the tiles held in a GPU's on-chip SRAM, read from memory once, "
          "in one fused kernel. Here the tiles are ordinary tensors, for seeing, not for speed."),
        icon=":material/lightbulb:")

st.header(_("3. Sparse patterns"))
Ls = min(L, limits.MAX_SPARSE_TOKENS)
sub = inp if Ls == L else compute.guard(lambda: compute.cached(("long-input", s.config, Ls),
                                                                lambda: V.long_input(s.config, Ls)))
if Ls < L:
    st.caption(_("Compared with full attention on the first {n} tokens (full attention's weights must fit).").format(
        n=Ls))
control("pattern", format_func=lambda p, t=fixed(): t(V.PATTERN_LABELS[p]))
sparse = compute.guard(lambda: compute.cached(("long-sparse", s.config, Ls, s.window),
                                              lambda: V.sparse_patterns(sub, s.window)))
pattern_fig, moved_fig = V.sparse_figures(sparse, session.current().long_sequences.pattern, sub, style)
compute.chart(pattern_fig, key="long_pattern", filename="attnviz-long-pattern")
compute.chart(moved_fig, key="long_moved", filename="attnviz-long-sparse")
st.dataframe(pd.DataFrame({
    _("pattern"): [_(V.PATTERN_LABELS[p.pattern]) for p in sparse],
    _("entries computed"): [f"{p.fraction:.2%}" for p in sparse],
    _("mean output change"): [f"{sum(p.distance) / len(p.distance):.3f}" for p in sparse],
    _("largest output change"): [f"{max(p.distance):.3f}" for p in sparse],
}), hide_index=True)

st.header(_("4. Low rank"))
Lr = min(L, limits.MAX_LOW_RANK_TOKENS)
small = inp if Lr == L else compute.guard(lambda: compute.cached(("long-input", s.config, Lr),
                                                                  lambda: V.long_input(s.config, Lr)))
if Lr < L:
    st.caption(_("On the first {n} tokens: the spectrum needs an SVD of every head's weights.").format(n=Lr))
if int(st.session_state.get("rank", 1)) > Lr:
    st.info(_("Rank {k} is over the {n} tokens shown here: using rank {n}.").format(k=st.session_state["rank"], n=Lr),
            icon=":material/info:")
    st.session_state["rank"] = Lr
control("rank", bounds=(1, Lr))
lr = compute.guard(lambda: compute.cached(("long-lowrank", s.config, Lr), lambda: V.low_rank(small, s.seed)))
spectrum_fig, error_fig = V.low_rank_figures(lr, style)
compute.chart(spectrum_fig, key="long_spectrum", filename="attnviz-long-spectrum")
compute.chart(error_fig, key="long_rank_error", filename="attnviz-long-rank-error")
k = min(session.current().long_sequences.rank, Lr)
i = max(j for j, r in enumerate(lr.ranks) if r <= k)
st.markdown(_("At rank {k}: the truncated weights change the output by {t}, keys and values projected to k segment "
              "means by {p}, an untrained random projection by {r}. Linformer projects K and V to k rows with matrices "
              "E and F that it **learns**; segment means are the simplest projection that is exact at k = L, and a "
              "random one shows why E must be learned. Either keeps {kept} of K and V per head-set instead of {full} "
              "of weights, and never forms the L × L matrix; what it loses is exactness (the error above, measured on "
              "this text) and the per-token mask: after K and V are projected to k rows, no single key can be "
              "blocked.").format(
    k=lr.ranks[i], t=f"{lr.truncated[i]:.3f}", p=f"{lr.linformer[i]:.3f}", r=f"{lr.random[i]:.3f}",
    kept=f"{lr.kept_bytes['linformer'][i] / 2**10:,.0f} KiB", full=f"{lr.kept_bytes['weights'][i] / 2**10:,.0f} KiB"))

st.header(_("5. matmul, baddbmm and SDPA"))
Lk = V.longest_naive(L, H, D)
mid = inp if Lk == L else compute.guard(lambda: compute.cached(("long-input", s.config, Lk),
                                                                lambda: V.long_input(s.config, Lk)))
times = compute.guard(lambda: compute.cached(("long-kernels", s.config, Lk), lambda: V.kernel_times(mid)))
compute.chart(V.kernels_figure(times, style, Lk), key="long_kernels", filename="attnviz-long-kernels")
st.caption(_("The tutorials' trick: torch.baddbmm(empty, Q, Kᵀ, beta=0, alpha=1/√d_k) folds the scale into the "
             "matrix product instead of dividing the scores afterwards. Measured in this process, median of 5, all in "
             "one run."))
