"""Audio frames: a sound cut into frames is a sequence too."""

import streamlit as st

from attnviz.i18n import _
from attnviz.views.markdown import md
from attnviz.views.modality import audio_run, followed, input_figure, input_view_figure, read_wav, sample_audio
from attnviz.views.selection import first_chart_style
from ui import compute, session, widgets
from ui.controls import control, row

s = session.current()
NOTE = _("The sound is cut into frames; the log-magnitude spectrum of each (torch.stft) is projected to "
         "d_model and given a position. The same multi-head attention then runs over the frames: a repeated "
         "sound can attend to its earlier self.")
# On a projector the sound and its frames (chosen before the class) and the notes fold under the title, the
# player and the frame followed stay, and the counts go under the chart: the spectrogram whole on the first screen.
about = widgets.header_folding(_("Audio frames"), NOTE, _("The sound, its frames, and what this page shows"))
with about:
    source, read = widgets.upload_or_sample(
        _("Your own sound (WAV)"), ["wav"], "audio_upload",
        _("PCM WAV up to 5 MB; the first 10 s are used. Not part of the link."), "audio_sample", read_wav)
    widgets.projections_toggle()
c1, c2, _spacer = about.columns([1, 1, 2])
control("frame", c1)
control("hop", c2)
s = session.current()

if read is not None:
    samples, rate, notes = read
    for note in notes:
        st.info(note, icon=":material/info:")
else:
    samples, rate = sample_audio(s.audio_frames.audio_sample)
heard = row() if s.present else st  # on a projector the player and the frame followed share a row
heard.audio(samples, sample_rate=rate, **({"width": 560} if s.present else {}))
key = ("audio-run", source, s.config, s.input_projections, s.audio_frames.frame, s.audio_frames.hop)
inp, result = compute.guard(lambda: compute.cached(key, lambda: audio_run(s, samples, rate)))
labels = inp.labels
st.session_state["frame_at"] = min(int(st.session_state.get("frame_at", 0)), len(labels) - 1)
control("frame_at", heard if s.present else None, options=range(len(labels)), format_func=lambda i: f"{i}: {labels[i]}",
        **({"width": 300} if s.present else {}))
s = session.current()
at = followed(s, inp)
counts = (_("{seconds} s at {rate} Hz → {n} frames of {frame} samples every {hop} (1 + ({samples} − {frame}) // "
             "{hop}) · following **{label}**").format(seconds=f"{len(samples) / rate:.2f}", rate=rate, n=len(labels),
                                                     frame=s.audio_frames.frame, hop=s.audio_frames.hop,
                                                     samples=len(samples),
                                                     label=md(labels[at])))
if not s.present:
    st.caption(counts)
style = first_chart_style(s, 60)  # two plots, two axis titles
compute.chart(compute.cached_figure(("audio-spec", key, at, compute.style_key(style)),
                             lambda: input_figure(inp, result, s, style)),
              key="audio_spec", filename="attnviz-audio-frames")
if s.present:
    st.caption(counts)
widgets.input_results(key, result, style, "audio-frames",
                      lambda view: input_view_figure(inp, result, s.with_(view=view), style))
