"""attnviz.inputs.audio: frames from a recording's length, frame and hop; long recordings capped."""

from __future__ import annotations

import numpy as np
import pytest

from attnviz import inputs as I
from attnviz import limits
from tests.support.uploads import wav_bytes


@pytest.mark.parametrize("n, frame, hop", [(8000, 256, 128), (1000, 256, 100), (256, 256, 1), (4096, 512, 512)])
def test_the_frame_count_follows_from_length_frame_and_hop(n, frame, hop):
    samples = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    assert I.frame_count(n, frame, hop) == 1 + (n - frame) // hop
    assert I.spectrogram(samples, frame, hop).shape == (1 + (n - frame) // hop, frame // 2 + 1)


def test_an_hour_long_wav_is_capped_and_says_so():
    data = wav_bytes(3600, rate=1000)  # 3.6 MB: under the upload cap
    samples, rate, notes = I.read_wav(data)
    assert len(samples) == limits.MAX_AUDIO_SECONDS * rate and "3600.0 s" in notes[0] and "first 10 s" in notes[0]
    with pytest.raises(ValueError, match="not a WAV"):
        I.read_wav(b"RIFF....WAVEfmt junk")
