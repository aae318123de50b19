"""Audio frames as tokens: the log-magnitude spectrum (``torch.stft``) of each frame,
projected. A WAV upload is untrusted: only its first ``limits.MAX_AUDIO_SECONDS`` are read."""

from __future__ import annotations

import io
import wave

import numpy as np
import torch

from attnviz import limits
from attnviz.i18n import _
from attnviz.inputs.embeddings import sinusoidal_positions
from attnviz.inputs.record import Input, single
from attnviz.inputs.vectors import check_upload, seeded_projection, standardise

AUDIO_SAMPLES = ("tone-chirp-tone", "two-tones", "clicks")


def sample_audio(name: str, rate: int = 8000) -> tuple[np.ndarray, int]:
    """A built-in sound synthesised in code: (samples,) float in [-1, 1], and its rate."""
    seg = int(0.4 * rate)
    t = np.arange(seg) / rate
    tone = np.sin(2 * np.pi * 440 * t)
    if name == "tone-chirp-tone":  # the repeated tone should attend to itself across the chirp
        chirp = np.sin(2 * np.pi * (300 * t + 0.5 * (2500 - 300) / 0.4 * t**2))
        wave_ = np.concatenate([tone, chirp, tone])
    elif name == "two-tones":
        wave_ = np.concatenate([tone, np.sin(2 * np.pi * 1200 * t), tone, np.sin(2 * np.pi * 1200 * t)])
    elif name == "clicks":
        wave_ = np.zeros(3 * seg)
        wave_[:: rate // 10] = 1.0
    else:
        raise ValueError(f"Unknown sample sound {name!r}; choose one of {', '.join(AUDIO_SAMPLES)}.")
    fade = np.minimum(1, np.minimum(np.arange(len(wave_)), np.arange(len(wave_))[::-1]) / (0.01 * rate))
    return (0.8 * wave_ * fade).astype(np.float32), rate


def read_wav(data: bytes) -> tuple[np.ndarray, int, list[str]]:
    """A WAV upload (PCM, 8/16/32-bit, any channels, mixed to mono), its first
    ``limits.MAX_AUDIO_SECONDS`` seconds only: an hour-long file is never read whole."""
    check_upload(data)
    try:
        with wave.open(io.BytesIO(data), "rb") as w:
            rate, channels, width, total = w.getframerate(), w.getnchannels(), w.getsampwidth(), w.getnframes()
            if not 1000 <= rate <= 192_000 or channels < 1 or width not in (1, 2, 4):
                raise ValueError(f"unsupported WAV ({rate} Hz, {channels} channels, {8 * width}-bit)")
            keep = min(total, int(limits.MAX_AUDIO_SECONDS * rate))
            raw = w.readframes(keep)
    except (wave.Error, EOFError, ValueError) as e:
        raise ValueError(_("That file is not a WAV this page can read ({error}); upload a PCM WAV.").format(
            error=e)) from None
    dtype = {1: np.uint8, 2: np.int16, 4: np.int32}[width]
    samples = np.frombuffer(raw[: len(raw) // (width * channels) * width * channels], dtype=dtype)
    samples = samples.reshape(-1, channels).mean(axis=1)
    scale = {1: 128.0, 2: 32768.0, 4: 2147483648.0}[width]
    samples = ((samples - 128.0) if width == 1 else samples) / scale
    notes = []
    if total > keep:
        notes.append(_("The recording lasts {total} s; the first {kept} s are used.").format(
            total=f"{total / rate:.1f}", kept=f"{limits.MAX_AUDIO_SECONDS:.0f}"))
    if len(samples) == 0:
        raise ValueError(_("The WAV file holds no samples."))
    return samples.astype(np.float32), rate, notes


def frame_count(n_samples: int, frame: int, hop: int) -> int:
    """Frames of ``frame`` samples every ``hop`` samples, none past the end."""
    return 0 if n_samples < frame else 1 + (n_samples - frame) // hop


def spectrogram(samples: np.ndarray, frame: int, hop: int) -> torch.Tensor:
    """Log-magnitude spectrum of each frame: (frames, frame // 2 + 1)."""
    lo, hi = limits.FRAME_SAMPLES
    if not lo <= frame <= hi or not 1 <= hop <= frame:
        raise ValueError(_("The frame must be {lo}–{hi} samples and the hop between 1 and the frame length.").format(
            lo=lo, hi=hi))
    n = frame_count(len(samples), frame, hop)
    if n == 0:
        raise ValueError(_("The sound ({n} samples) is shorter than one frame ({frame} samples).").format(
            n=len(samples), frame=frame))
    if n > limits.MAX_FRAMES:
        raise ValueError(_("{n} frames; the limit is {limit}. Use a longer hop.").format(n=n, limit=limits.MAX_FRAMES))
    spec = torch.stft(torch.from_numpy(samples), n_fft=frame, hop_length=hop, window=torch.hann_window(frame),
                      center=False, return_complex=True)  # (F, frames)
    return torch.log1p(spec.abs()).T.contiguous()  # (frames, F)


def audio_input(samples: np.ndarray, rate: int, frame: int, hop: int, d_model: int, seed: int) -> Input:
    spec = spectrogram(samples, frame, hop)  # (frames, F)
    x = standardise(spec) @ seeded_projection(spec.shape[1], d_model, seed, 2)  # (frames, E)
    x = x + sinusoidal_positions(len(spec), d_model)
    labels = [f"{i * hop / rate:.2f}s" for i in range(len(spec))]
    return single("audio", labels, x, meta={"spectrogram": spec, "rate": rate, "frame": frame, "hop": hop})
