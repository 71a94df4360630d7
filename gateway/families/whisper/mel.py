"""Whisper's log-mel features in numpy (no torch): the OpenAI recipe, vectorised.

The recipe is OpenAI's ``whisper.audio.log_mel_spectrogram`` (and NVIDIA's BLS copy of it):
a periodic Hann window of 400 samples, hop 160, centred frames (reflect padding of 200 on
each side, as ``torch.stft(center=True)`` does), the last STFT frame dropped, the power
spectrum, a Slaney-style mel filterbank (80 bins; 128 for large-v3), log10 of values clamped
at 1e-10, clamped again to (max - 8), then ``(x + 4) / 4``. One 30 s window is 480000
samples -> 3000 frames.

Why not Hugging Face's ``WhisperFeatureExtractor`` (numpy path)? It computes one FFT per frame
in a Python loop. Here every frame is a strided view of the padded signal, frames are
transformed in cache-sized batches of one ``rfft`` each (split between two threads: numpy's
FFT releases the GIL), and the filterbank is one float32 matrix product: several times faster
on one 30 s window (``python -m bench.mel``).

The filterbank is computed, not loaded: it is librosa's ``filters.mel(sr=16000, n_fft=400,
n_mels=n)`` (Slaney mel scale, Slaney area normalisation), which is what OpenAI saved into
``mel_filters.npz``; the tests check the two agree. So the gateway needs neither that file nor
the ``openai-whisper`` package (and its torch) at run time.
"""

from __future__ import annotations

import threading
from functools import lru_cache
from itertools import pairwise
from typing import Any

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
_CHUNK = 128  # frames per FFT batch: ~0.4 MB of float64 work, cache-sized

# Slaney's mel scale: linear below 1 kHz, logarithmic above (librosa's htk=False).
_F_SP = 200.0 / 3
_MIN_LOG_HZ = 1000.0
_MIN_LOG_MEL = _MIN_LOG_HZ / _F_SP
_LOG_STEP = np.log(6.4) / 27.0


def _hz_to_mel(hz: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    mel = hz / _F_SP
    above = hz >= _MIN_LOG_HZ
    mel[above] = _MIN_LOG_MEL + np.log(hz[above] / _MIN_LOG_HZ) / _LOG_STEP
    return mel


def _mel_to_hz(mel: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    hz = mel * _F_SP
    above = mel >= _MIN_LOG_MEL
    hz[above] = _MIN_LOG_HZ * np.exp(_LOG_STEP * (mel[above] - _MIN_LOG_MEL))
    return hz


@lru_cache(maxsize=4)
def mel_filters(n_mels: int) -> np.ndarray[Any, Any]:
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
    result: np.ndarray[Any, Any] = weights.astype(np.float32)
    result.setflags(write=False)
    return result


@lru_cache(maxsize=1)
def _hann_window() -> np.ndarray[Any, Any]:
    """Periodic Hann window, as ``torch.hann_window(400)``."""
    n = np.arange(N_FFT, dtype=np.float64)
    window: np.ndarray[Any, Any] = 0.5 - 0.5 * np.cos(2.0 * np.pi * n / N_FFT)
    window.setflags(write=False)
    return window


def _power_rows(
    padded: np.ndarray[Any, Any], first: int, last: int, out: np.ndarray[Any, Any]
) -> None:
    """Power spectrum of frames ``[first, last)`` into ``out[first:last]``, in cache-sized chunks.

    Frame i is ``padded[160 i : 160 i + 400]``, a strided view (no copy). Per chunk: the Hann
    window into one reused buffer, a batched ``rfft``, the power written in place over the
    spectrum. Chunks keep the working set in cache, worth about 2x over whole-array passes.
    """
    frames = np.lib.stride_tricks.sliding_window_view(padded, N_FFT)[::HOP_LENGTH]
    window = _hann_window()
    buffer = np.empty((_CHUNK, N_FFT))
    for start in range(first, last, _CHUNK):
        stop = min(last, start + _CHUNK)
        rows = buffer[: stop - start]
        np.multiply(frames[start:stop], window, out=rows)
        spectrum = np.fft.rfft(rows, axis=-1)
        squares = np.square(spectrum.view(np.float64), out=spectrum.view(np.float64))
        np.add(squares[:, 0::2], squares[:, 1::2], out=out[start:stop], casting="same_kind")


def _power_spectrum(padded: np.ndarray[Any, Any], count: int, threads: int) -> np.ndarray[Any, Any]:
    """``[count, 201]`` float32 power, the frames split between ``threads`` threads."""
    power = np.empty((count, N_FFT // 2 + 1), np.float32)
    parts = max(1, min(threads, count // _CHUNK + 1))
    spans = list(pairwise(int(b) for b in np.linspace(0, count, parts + 1)))
    failures: list[BaseException] = []

    def part(first: int, last: int) -> None:
        try:
            _power_rows(padded, first, last, power)
        except BaseException as exc:  # re-raised below: a lost helper would leave rows unset
            failures.append(exc)

    helpers = [threading.Thread(target=part, args=span) for span in spans[1:]]
    for helper in helpers:
        helper.start()
    part(*spans[0])
    for helper in helpers:
        helper.join()
    if failures:
        raise failures[0]
    return power


def log_mel(
    samples: np.ndarray[Any, Any], n_mels: int = 80, frames: int | None = N_FRAMES, threads: int = 2
) -> np.ndarray[Any, Any]:
    """Log-mel features ``[n_mels, frames]`` (float32) of 16 kHz mono ``samples``.

    ``frames`` (default 3000, one encoder window) pads the audio with zeros or trims it to
    ``frames * 160`` samples first, as OpenAI's ``pad_or_trim`` + ``padding=N_SAMPLES`` do for
    a window; None keeps every frame of the audio as given (``len(samples) // 160``).
    ``threads``: the frames are split between this many threads (numpy's FFT and matrix
    product release the GIL); 1 computes everything on the calling thread.
    """
    audio = np.asarray(samples, dtype=np.float32).reshape(-1)
    if frames is not None:
        target = frames * HOP_LENGTH
        audio = audio[:target] if audio.size >= target else np.pad(audio, (0, target - audio.size))
    count = audio.size // HOP_LENGTH
    if count < 1 or audio.size <= N_FFT // 2:
        raise ValueError("the audio is too short for one mel frame")
    padded = np.pad(audio, (N_FFT // 2, N_FFT // 2), mode="reflect")
    mel = mel_filters(n_mels) @ _power_spectrum(padded, count, threads).T
    log_spec = np.log10(np.maximum(mel, _LOG_FLOOR))
    log_spec = np.maximum(log_spec, log_spec.max() - 8.0)
    scaled: np.ndarray[Any, Any] = (log_spec + 4.0) / 4.0
    return scaled


def to_encoder_input(features: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """``[n_mels, frames]`` -> the fp16 ``[1, frames, n_mels]`` that ``encoder_input_features``
    takes (NVIDIA's BLS transposes the same way before calling ``tensorrt_llm``)."""
    return np.ascontiguousarray(features.T[None].astype(np.float16))
