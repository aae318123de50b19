"""Image patches: a picture cut into patches (the tutorial's unfold) is a sequence too."""

import streamlit as st

from attnviz.i18n import N_, _, fixed
from attnviz.views.catalogue import VIEW_TITLES, VIEWS
from attnviz.views.markdown import md
from attnviz.views.modality import (
    IMAGE_VIEWS,
    followed,
    followed_state,
    image_run,
    input_figure,
    input_view_figure,
    is_vision,
    read_image,
    sample_image,
)
from attnviz.views.selection import first_chart_style
from ui import compute, loading, picks, rendering, session, widgets
from ui.controls import control

s = session.current()
vit = is_vision(s.model)  # the sidebar's model is a vision transformer: its own patches
st.title(_("Image patches"))
# On a projector the picture and its patches (chosen before the class) and the notes fold under the title, and the
# counts go under the picture: the picture whole on the first screen.
about = st.expander(_("The picture, its patches, and what this page shows")) if s.present else st.container()
if vit:
    about.caption(_("{model} is a vision transformer: its own image processor resizes and normalises the picture, "
                 "the model cuts it into its patches, and every layer's attention runs over [CLS] and the "
                 "patches. The overlay follows [CLS] (what its classifier reads) or any patch you click.").format(
        model=md(s.model)))
else:
    about.caption(_("The image is cut with `image.unfold(2, p, s).unfold(3, p, s)` into patches; each flattened patch "
                 "is projected to d_model and given a 2-D position. The same multi-head attention then runs over "
                 "them. Without projections (Q = K = V = X, the default here) it is plain similarity: alike patches "
                 "attend to each other."))
with about:
    source, read = widgets.upload_or_sample(
        _("Your own image (PNG or JPEG)"), ["png", "jpg", "jpeg"], "image_upload",
        _("Up to 5 MB; shrunk to 256 pixels a side. Not part of the link."), "image_sample", read_image)
    own = _("(the random layer only)") if vit else ""
    widgets.projections_toggle(disabled=vit)
c1, c2, c3, c4 = about.columns(4)
control("patch", c1, disabled=vit, suffix=own)
control("stride", c2, disabled=vit, suffix=own)
control("patch_mask", c3, disabled=vit, suffix=own)
control("patch_k", c4, disabled=vit or st.session_state.get("patch_mask") != "window2d", suffix=own)
s = session.current()

if read is not None:
    image, notes = read
    for note in notes:
        st.info(note, icon=":material/info:")
else:
    image = sample_image(s.image_patches.image_sample)
if vit:
    loading.ready(s.model)
img = s.image_patches
key = ("image-run", source, s.config, s.input_projections, img.patch, img.stride, img.patch_mask, img.patch_k)
inp, result = compute.guard(lambda: compute.cached(key, lambda: image_run(s, image)))
nH, nW = inp.meta["grid"]
first = inp.meta.get("first", 0)
patches = inp.labels[first:]
if not -1 <= st.session_state.get("patch_at", -1) < len(patches):
    st.session_state["patch_at"] = -1
unset = _("[CLS]") if first else _("the middle one")
control("patch_at", options=[-1, *range(len(patches))], help=_("Or click a patch in the picture below."),
        format_func=lambda i, unset=unset: unset if i < 0 else f"{i}: {patches[i]}")
s = session.current()
at = followed(s, inp)
for note in inp.notes:
    st.info(note, icon=":material/info:")
counts = _("{nH} × {nW} = {n} patches of {p} × {p} px (stride {stride}) · weights {shape} · following "
           "**{patch}**").format(nH=nH, nW=nW, n=len(patches), p=inp.meta["patch"], stride=inp.meta["stride"],
                                 shape=tuple(result.weights.shape), patch=md(inp.labels[at]))
if not s.present:
    st.caption(counts)
style = first_chart_style(s, 60)
fig = compute.cached_figure(("image-overlay", key, at, compute.style_key(style)),
                     lambda: input_figure(inp, result, s, style, image=image))
event = st.plotly_chart(fig, key="image_overlay", theme=None, width="stretch", on_select="rerun",
                        selection_mode="points", config={"displaylogo": False}, alt=fig._attnviz_alt)
points = getattr(getattr(event, "selection", None), "points", None) or []
if points and isinstance(points[0].get("customdata"), (int, float)):
    picks.pick({"patch_at": int(points[0]["customdata"])}, ("patch", int(points[0]["customdata"])))
if s.present:
    st.caption(counts)
# Below the overlay, one view at a time, built only when chosen: the weights (every head and
# their mean), does the head matter, or the neuron view of the followed token. The random
# layer keeps every step, so it gives all three, as a vision transformer does.
if st.session_state.get("view") not in IMAGE_VIEWS:  # a link's explorer view (head, mean…): the weights
    st.session_state["view"] = "grid"
titles = {**VIEW_TITLES, "grid": N_("All heads and the mean")}
control("view", kind="segmented", options=IMAGE_VIEWS, format_func=lambda v, t=fixed(): t(titles[v]))
view = st.session_state["view"]
if "head" in VIEWS[view].picks:  # the neuron view: one head's
    if not 0 <= st.session_state.get("head", 0) < result.heads:
        st.session_state["head"] = 0
    control("head", options=range(result.heads), width=140)
s = session.current()
if view == "grid":
    widgets.input_results(key, result, style, "image-patches",
                          lambda view: input_view_figure(inp, result, s.with_(view=view), style),
                          views=("grid", "mean"))
else:
    if not vit and not s.input_projections:
        st.caption(_("Without the Q/K/V projections every projection here is the identity, W_O too: a patch's v, q "
                     "and k for a head are its own vector's slice for that head."))
    rendering.render(view, result, followed_state(s, inp), run_key=("image-patches", *key))
    widgets.input_results(key, result, style, "image-patches",
                          lambda view: input_view_figure(inp, result, s.with_(view=view), style), views=())
