"""Whisper's log-mel features in numpy (no torch): the OpenAI recipe, vectorised.

The recipe is OpenAI's ``whisper.audio.log_mel_spectrogram`` (and NVIDIA's BLS copy of it):
a periodic Hann window of 400 samples, hop 160, centred frames (reflect padding of 200 on
each side, as ``torch.stft(center=True)`` does), the last STFT frame dropped, the power
spectrum, a Slaney-style mel filterbank (80 bins; 128 for large-v3), log10 of values clamped
at 1e-10, clamped again to (max - 8), then ``(x + 4) / 4``. One 30 s window is 480000
samples -> 3000 frames.

Why not Hugging Face's ``WhisperFeatureExtractor`` (numpy path)? It computes one FFT per frame
in a Python loop. Here every frame is a strided view of the padded signal, one batched
``rfft`` transforms them all, and the filterbank is one float32 matrix product: several times
faster on one 30 s window (``python -m bench.mel``).

The filterbank is computed, not loaded: it is librosa's ``filters.mel(sr=16000, n_fft=400,
n_mels=n)`` (Slaney mel scale, Slaney area normalisation), which is what OpenAI saved into
``mel_filters.npz``; the tests check the two agree. So the gateway needs neither that file nor
the ``openai-whisper`` package (and its torch) at run time.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

__all__ = [
    "CHUNK_SAMPLES",
    "HOP_LENGTH",
    "N_FFT",
    "N_FRAMES",
    "SAMPLE_RATE",
    "log_mel",
    "mel_filters",
    "to_encoder_input",
]

SAMPLE_RATE = 16_000
N_FFT = 400
HOP_LENGTH = 160
CHUNK_SAMPLES = 30 * SAMPLE_RATE  # one encoder window: 480000 samples
N_FRAMES = CHUNK_SAMPLES // HOP_LENGTH  # 3000 mel frames
SUPPORTED_MELS = (80, 128)
_LOG_FLOOR = 1e-10

# Slaney's mel scale: linear below 1 kHz, logarithmic above (librosa's htk=False).
_F_SP = 200.0 / 3
_MIN_LOG_HZ = 1000.0
_MIN_LOG_MEL = _MIN_LOG_HZ / _F_SP
_LOG_STEP = np.log(6.4) / 27.0


def _hz_to_mel(hz: np.ndarray) -> np.ndarray:
    mel = hz / _F_SP
    above = hz >= _MIN_LOG_HZ
    mel[above] = _MIN_LOG_MEL + np.log(hz[above] / _MIN_LOG_HZ) / _LOG_STEP
    return mel


def _mel_to_hz(mel: np.ndarray) -> np.ndarray:
    hz = mel * _F_SP
    above = mel >= _MIN_LOG_MEL
    hz[above] = _MIN_LOG_HZ * np.exp(_LOG_STEP * (mel[above] - _MIN_LOG_MEL))
    return hz


@lru_cache(maxsize=4)
def mel_filters(n_mels: int) -> np.ndarray:
    """The ``[n_mels, 201]`` float32 filterbank (librosa ``filters.mel``, Slaney norm)."""
    if n_mels not in SUPPORTED_MELS:
        raise ValueError(f"Whisper uses 80 or 128 mel bins, not {n_mels}")
    fft_freqs = np.linspace(0.0, SAMPLE_RATE / 2, 1 + N_FFT // 2)
    mel_edges = np.linspace(0.0, _hz_to_mel(np.array([SAMPLE_RATE / 2.0]))[0], n_mels + 2)
    hz_edges = _mel_to_hz(mel_edges)
    widths = np.diff(hz_edges)
    ramps = hz_edges[:, None] - fft_freqs[None, :]
    lower = -ramps[:-2] / widths[:-1, None]
    upper = ramps[2:] / widths[1:, None]
    weights = np.maximum(0.0, np.minimum(lower, upper))
    weights *= (2.0 / (hz_edges[2:] - hz_edges[:-2]))[:, None]  # equal area per filter
    result = weights.astype(np.float32)
    result.setflags(write=False)
    return result


@lru_cache(maxsize=1)
def _hann_window() -> np.ndarray:
    """Periodic Hann window, as ``torch.hann_window(400)``."""
    n = np.arange(N_FFT, dtype=np.float64)
    window = 0.5 - 0.5 * np.cos(2.0 * np.pi * n / N_FFT)
    window.setflags(write=False)
    return window


def _power_spectrum(samples: np.ndarray, frames: int) -> np.ndarray:
    """``[frames, 201]`` power of the centred STFT, without its last frame (OpenAI's)."""
    half = N_FFT // 2
    padded = np.pad(samples.astype(np.float64, copy=False), (half, half), mode="reflect")
    strided = np.lib.stride_tricks.sliding_window_view(padded, N_FFT)[::HOP_LENGTH]
    spectrum = np.fft.rfft(strided[:frames] * _hann_window(), axis=-1)
    return (spectrum.real**2 + spectrum.imag**2).astype(np.float32)


def log_mel(samples: np.ndarray, n_mels: int = 80, frames: int | None = N_FRAMES) -> np.ndarray:
    """Log-mel features ``[n_mels, frames]`` (float32) of 16 kHz mono ``samples``.

    ``frames`` (default 3000, one encoder window) pads the audio with zeros or trims it to
    ``frames * 160`` samples first, as OpenAI's ``pad_or_trim`` + ``padding=N_SAMPLES`` do for
    a window; None keeps every frame of the audio as given (``len(samples) // 160``).
    """
    audio = np.asarray(samples, dtype=np.float32).reshape(-1)
    if frames is not None:
        target = frames * HOP_LENGTH
        audio = audio[:target] if audio.size >= target else np.pad(audio, (0, target - audio.size))
    count = audio.size // HOP_LENGTH
    if count < 1 or audio.size <= N_FFT // 2:
        raise ValueError("the audio is too short for one mel frame")
    power = _power_spectrum(audio, count)
    mel = mel_filters(n_mels) @ power.T
    log_spec = np.log10(np.maximum(mel, _LOG_FLOOR))
    log_spec = np.maximum(log_spec, log_spec.max() - 8.0)
    return ((log_spec + 4.0) / 4.0).astype(np.float32, copy=False)


def to_encoder_input(features: np.ndarray) -> np.ndarray:
    """``[n_mels, frames]`` -> the fp16 ``[1, frames, n_mels]`` that ``encoder_input_features``
    takes (NVIDIA's BLS transposes the same way before calling ``tensorrt_llm``)."""
    return np.ascontiguousarray(features.T[None].astype(np.float16))
