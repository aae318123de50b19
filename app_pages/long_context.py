"""Long context: a model's own attention over a long text, every layer × head at a glance, its heads
labelled, one head opened down to its exact weights, and what a KV-cache policy keeps and costs
(``attnviz.views.longcontext``). The attention and the policy are background jobs on the compute
workers, with a progress bar, shared by everyone who opens the same model, text and settings."""

import pandas as pd
import streamlit as st

from attnviz import limits
from attnviz.i18n import _
from attnviz.views import longcontext as V
from attnviz.views.markdown import md
from attnviz.views.selection import style_for
from ui import compute, loading, picks, session, widgets
from ui.controls import control, row

s = session.current()
widgets.header(_("Long context"), _(
    "The model's own queries and keys, read one tile of scores at a time: no N × N matrix is ever held, so a "
    "document fits where output_attentions would need gigabytes. Attention sinks (StreamingLLM), near and far heads "
    "(DuoAttention), and what a KV-cache policy (kvpress's presses: StreamingLLM, H2O, SnapKV, key norm) throws "
    "away. The model is the sidebar's: SmolLM2-135M, a causal language model folder or GGUF file, "
    "or the random layer."))
loading.ready(s.model)  # a folder loads in the background

# On a projector the overview is the first screen: the text, the blocks and the notes fold away above it.
inputs = st.expander(_("Text, blocks and notes")) if s.present else st.container()
with inputs:
    control("long_text", format_func=lambda name: _(V.TEXT_TITLES[name]))
    pasted, uploaded = "", None
    if s.long.text == "paste":
        pasted = st.text_area(_("Your text"), key="long_paste", height=200, max_chars=limits.MAX_LONG_TEXT_BYTES,
                              help=_("Any UTF-8 text, at most {kb:,} KB; the model reads it whole.").format(
                                  kb=limits.MAX_LONG_TEXT_BYTES // 2**10))
    elif s.long.text == "upload":
        uploaded = widgets.uploaded_bytes(_("A text file"), ["txt"], key="long_upload",
                                          help=_("UTF-8 text, at most {kb:,} KB.").format(
                                              kb=limits.MAX_LONG_TEXT_BYTES // 2**10))
    if (s.long.text == "paste" and not pasted.strip()) or (s.long.text == "upload" and uploaded is None):
        # nothing wrong yet: the box is waiting for its text
        st.info(_("Paste a text of a few paragraphs above to read it (or choose a shipped text).") if s.long.text ==
                "paste" else _("Upload a text file above to read it (or choose a shipped text)."),
                icon=":material/edit_note:")
        st.stop()
    text = compute.guard(lambda: V.page_text(s.long, pasted, uploaded))
    most = compute.guard(lambda: V.model_blocks(s.model))  # the model's layers × heads bound the overviews kept
    if s.long.blocks > most:  # a link's or the default's blocks past what this model's overviews may hold
        st.session_state["long_blocks"] = most
        st.caption(_("{model}'s overviews of every layer and head at {asked} blocks per side would hold more than "
                     "the server keeps for everyone: they are read at {most}.").format(
            model=md(s.model), asked=s.long.blocks, most=most))
    control("long_blocks", bounds=(1, most))
    s = session.current()

job = compute.guard(lambda: V.attention_job(s.model, text, s.long, compute.on_worker))  # the server may be busy
result = widgets.job_value(
    job, _("Reading the text, layer by layer: {p:.0%}").format(p=job.fraction),
    _("It runs once for this server and is shared by everyone who opens the same model and text."))
key = V.long_key(s.model, text, s.long.blocks)
style = style_for(s)
with inputs:
    st.caption(_("**{model}**: {n:,} tokens; layers × heads: {layers} × {heads} ({kv} key/value heads); read in "
                 "{sec:.1f} s; blocks of {b:,} tokens.").format(model=md(result.model), n=result.N,
                                                               layers=result.layers, heads=result.heads,
                                                               kv=result.kv_heads, sec=result.seconds, b=result.block))
    for note in result.notes:
        st.info(md(note), icon=":material/info:")
if not s.present:  # on a projector the chart's own title says it
    st.subheader(_("Every layer × head"))
fig = compute.guard(lambda: compute.cached_figure((*key, "multiples", compute.style_key(style)),
                                                  lambda: V.multiples(result, style)))
compute.chart(fig, key="long_multiples", filename="long-context-heads")
# What each number of the chart and of the table below means, under the chart: above it, the
# list pushed the chart off a laptop's first screen.
st.markdown("\n".join(f"- **{name}**: {md(words)}" for name, words in V.DEFINITIONS.items())
            + f"\n- **{_('label')}**: {md(V.HEAD_RULE)}")

# --- the policy: started now, so that it runs while the heads are read ---------------------------------------
pair = row()
control("long_policy", pair)
control("long_ratio", pair, step=0.01)
s = session.current()
policy = compute.guard(lambda: V.policy_job(s.model, text, s.long, compute.on_worker))
kept = policy.value if policy.done.is_set() and not policy.error else None

st.subheader(_("The heads"))
st.caption(_("A row opens its head below. {rule}. lost: the share of the last token's attention on the tokens "
             "the policy evicts.").format(rule=md(V.HEAD_RULE)))
frame = pd.DataFrame(V.head_rows(result, kept))
picked = widgets.picked_head(frame, "long_heads", text_columns=("layer", "head", "label"))
if picked and (picked[1], picked[2]) != (s.long.layer, s.long.head):
    picks.pick({"long_layer": picked[1], "long_head": picked[2]}, ("long_heads", picked[0]))
for name, count in (("long_layer", result.layers), ("long_head", result.heads)):
    if not 0 <= int(st.session_state[name]) < count:  # a link's head that this model lacks
        st.session_state[name] = 0
pair = row()
control("long_layer", pair, options=range(result.layers))
control("long_head", pair, options=range(result.heads))
s = session.current()
layer, head = s.long.layer, s.long.head

fig = compute.guard(lambda: compute.cached_figure((*key, "head", layer, head, compute.style_key(style)),
                                                  lambda: V.head_overview(result, layer, head, style)))
event = st.plotly_chart(fig, key="long_head_chart", theme=None, width="stretch", on_select="rerun",
                        selection_mode="points", config={"displaylogo": False}, alt=fig._attnviz_alt)
points = getattr(getattr(event, "selection", None), "points", None) or []
if points and points[0].get("y") is not None:  # a click sets the close-up's corner: in the link, kept on reload
    q, k = V.corner(result, points[0]["y"], points[0].get("x"))
    picks.pick({"long_q0": q, "long_k0": k}, ("long_corner", layer, head, q, k))
pair = row()
control("long_q0", pair, label=_("Close-up: first query ({corner})").format(corner=V.corner_words(s.long.q0)))
control("long_k0", pair)
s = session.current()
q0, k0 = V.corner(result, s.long.q0, s.long.k0)
fig = compute.guard(lambda: compute.cached_figure(
    (*key, "window", layer, head, q0, k0, compute.style_key(style)),
    lambda: compute.on_worker(lambda: V.close_up(result, layer, head, q0, k0, style))))
compute.chart(fig, key="long_window", filename=f"long-context-L{layer}H{head}-q{q0}-k{k0}")

if kept is None and policy.done.is_set() and not policy.error:  # it finished during this run: the table lacks it
    st.rerun()
st.subheader(_("What the KV-cache policy keeps, and what it costs"))
kept = widgets.job_value(policy, _("The {policy} policy: {what}…").format(policy=s.long.policy,
                                                                         what=_(policy.words)))
st.caption(_("The cache of the text without its last token is compressed, then the last token runs on it and on "
             "the full cache."))
no_vocabulary = kept.kl is None and kept.top_changed is None
if no_vocabulary:  # said before any "—" could be
    st.info(_("{model} has no vocabulary, so it predicts no next token: what the compressed cache costs in KL and in "
              "the top token needs a causal language model folder the server lists. What it costs in attention is "
              "measured below.").format(model=md(result.model)), icon=":material/info:")
cost = row()
if not no_vocabulary:
    cost.metric(_("KL(full ‖ compressed)"), "—" if kept.kl is None else f"{kept.kl:.3g}")
    cost.metric(_("Top token"), "—" if kept.top_changed is None else
                (_("changes") if kept.top_changed else _("stays")),
                help=None if kept.top_full is None else f"{kept.top_full} → {kept.top_compressed}")
cost.metric(_("Attention lost (mean over heads)"), f"{V.mean_lost(kept):.1%}")
for note in [] if no_vocabulary else kept.notes:  # (the one a model with no vocabulary has is said above)
    st.info(md(note), icon=":material/info:")
fig = compute.guard(lambda: compute.cached_figure(
    (*key, "kept", s.long.policy, float(s.long.ratio), compute.style_key(style)),
    lambda: V.strip(kept, result.N, style)))
compute.chart(fig, key="long_kept", filename=f"long-context-{s.long.policy}")
