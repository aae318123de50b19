"""Audio frames: a sound cut into frames is a sequence too."""

import streamlit as st

from attnviz import inputs as I
from attnviz.i18n import _
from attnviz.views import audio_run, followed, input_figure, style_for
from ui import compute, widgets
from ui import state as ui_state
from ui.safe import md

s = ui_state.current()
st.title(_("Audio frames"))
st.caption(_("The sound is cut into frames; the log-magnitude spectrum of each (torch.stft) is projected to d_model "
             "and given a position. The same multi-head attention then runs over the frames: a repeated sound can "
             "attend to its earlier self."))
source, read = widgets.upload_or_sample(
    _("Your own sound (WAV)"), ["wav"], "audio_upload",
    _("PCM WAV up to 5 MB; the first 10 s are used. Not part of the link."), _("Built-in sound"), I.AUDIO_SAMPLES,
    "audio_sample", _("Synthesised in code: a tone, a chirp, then the tone again; two alternating tones; clicks."),
    I.read_wav)
widgets.projections_toggle()
c1, c2, _spacer = st.columns([1, 1, 2])
c1.number_input(_("Frame (samples)"), 16, 8192, key="frame", help=_("Samples per frame (the STFT's n_fft)."))
c2.number_input(_("Hop (samples)"), 1, 8192, key="hop", help=_("Samples between the starts of two frames."))
s = ui_state.current()

if read is not None:
    samples, rate, notes = read
    for note in notes:
        st.info(note, icon=":material/info:")
else:
    samples, rate = I.sample_audio(s.audio_sample)
st.audio(samples, sample_rate=rate)
key = ("audio-run", source, s.config(), s.frame, s.hop)
inp, result = compute.guard(lambda: compute.cached(key, lambda: audio_run(s, samples, rate)))
labels = inp.labels
st.session_state["frame_at"] = min(int(st.session_state.get("frame_at", 0)), len(labels) - 1)
st.selectbox(_("Follow frame"), list(range(len(labels))), key="frame_at", format_func=lambda i: f"{i}: {labels[i]}")
s = ui_state.current()
at = followed(s, inp)
st.caption(_("{seconds} s at {rate} Hz → {n} frames of {frame} samples every {hop} (1 + ({samples} − {frame}) // "
             "{hop}) · following **{label}**").format(seconds=f"{len(samples) / rate:.2f}", rate=rate, n=len(labels),
                                                     frame=s.frame, hop=s.hop, samples=len(samples),
                                                     label=md(labels[at])))
style = style_for(s)
compute.chart(compute.figure(("audio-spec", key, at, compute.style_key(style)),
                             lambda: input_figure(inp, result, s, style)),
              key="audio_spec", filename="attnviz-audio-frames")
widgets.input_results(key, inp, result, s, style, "audio-frames")
