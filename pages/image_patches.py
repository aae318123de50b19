"""Image patches: a picture cut into patches (the tutorial's unfold) is a sequence too."""

import streamlit as st

from attnviz import inputs as I
from attnviz.i18n import _
from attnviz.views import followed, image_run, input_figure, style_for
from ui import compute, widgets
from ui import state as ui_state
from ui.safe import md

s = ui_state.current()
st.title(_("Image patches"))
st.caption(_("The image is cut with `image.unfold(2, p, s).unfold(3, p, s)` into patches; each flattened patch is "
             "projected to d_model and given a 2-D position. The same multi-head attention then runs over them. "
             "Without projections (Q = K = V = X, the default here) it is plain similarity: alike patches attend to "
             "each other."))
source, read = widgets.upload_or_sample(
    _("Your own image (PNG or JPEG)"), ["png", "jpg", "jpeg"], "image_upload",
    _("Up to 5 MB; shrunk to 256 pixels a side. Not part of the link."), _("Built-in picture"), I.IMAGE_SAMPLES,
    "image_sample", _("Drawn in code: no download."), I.read_image)
widgets.projections_toggle()
c1, c2, c3, c4 = st.columns(4)
c1.number_input(_("Patch size (px)"), 2, 128, key="patch", help=_("Each patch is p × p pixels."))
c2.number_input(_("Stride (px)"), 1, 128, key="stride",
                help=_("Distance between patches; stride < patch overlaps them."))
c3.selectbox(_("Mask"), I.PATCH_MASKS, key="patch_mask",
             help=_("none; causal in raster order (left to right, top to bottom); window2d: patches within k rows "
                    "and k columns."))
c4.number_input("k (window2d)", 0, 32, key="patch_k", disabled=st.session_state.get("patch_mask") != "window2d")
s = ui_state.current()

if read is not None:
    image, notes = read
    for note in notes:
        st.info(note, icon=":material/info:")
else:
    image = I.sample_image(s.image_sample)
key = ("image-run", source, s.config(), s.patch, s.stride, s.patch_mask, s.patch_k)
inp, result = compute.guard(lambda: compute.cached(key, lambda: image_run(s, image)))
nH, nW = inp.meta["grid"]
labels = inp.labels
if not -1 <= st.session_state.get("patch_at", -1) < len(labels):
    st.session_state["patch_at"] = -1
st.selectbox(_("Follow patch"), [-1, *range(len(labels))], key="patch_at",
             format_func=lambda i, middle=_("the middle one"): middle if i < 0 else f"{i}: {labels[i]}",
             help=_("Or click a patch in the picture below."))
s = ui_state.current()
at = followed(s, inp)
st.caption(_("{nH} × {nW} = {n} patches of {p} × {p} px (stride {stride}) · weights {shape} · following "
             "**{patch}**").format(nH=nH, nW=nW, n=len(labels), p=s.patch, stride=s.stride,
                                   shape=tuple(result.weights.shape), patch=md(labels[at])))
style = style_for(s)
fig = compute.figure(("image-overlay", key, at, compute.style_key(style)),
                     lambda: input_figure(inp, result, s, style, image=image))
event = st.plotly_chart(fig, key="image_overlay", theme=None, width="stretch", on_select="rerun",
                        selection_mode="points", config={"displaylogo": False}, alt=fig._attnviz_alt)
points = getattr(getattr(event, "selection", None), "points", None) or []
if points and isinstance(points[0].get("customdata"), (int, float)):
    ui_state.pick({"patch_at": int(points[0]["customdata"])}, ("patch", int(points[0]["customdata"])))
widgets.input_results(key, inp, result, s, style, "image-patches", views=("grid", "mean"))
