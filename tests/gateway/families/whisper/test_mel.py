"""The numpy log-mel against OpenAI's own implementation and its saved filterbank."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gateway.families.whisper.mel import N_FRAMES, log_mel, mel_filters, to_encoder_input
from tests.audio_samples import speech_like

whisper_audio = pytest.importorskip("whisper.audio")  # openai-whisper: the dev extra
torch = pytest.importorskip("torch")


def _saved_filters(n_mels: int) -> np.ndarray:
    path = Path(whisper_audio.__file__).parent / "assets" / "mel_filters.npz"
    with np.load(path) as saved:
        return saved[f"mel_{n_mels}"]


@pytest.mark.parametrize("n_mels", [80, 128])
def test_filterbank_is_the_one_openai_saved(n_mels: int) -> None:
    ours = mel_filters(n_mels)
    assert ours.shape == (n_mels, 201) and ours.dtype == np.float32
    np.testing.assert_allclose(ours, _saved_filters(n_mels), rtol=0, atol=1e-7)


def _openai(samples: np.ndarray, n_mels: int) -> np.ndarray:
    """OpenAI's log-mel of one window, padded to 30 s as its ``transcribe`` pads."""
    padding = max(0, 480_000 - samples.size)
    features = whisper_audio.log_mel_spectrogram(torch.from_numpy(samples), n_mels, padding)
    return features.numpy()[:, :N_FRAMES]


@pytest.mark.parametrize("n_mels", [80, 128])
@pytest.mark.parametrize("seconds", [30.0, 7.3, 0.5])
def test_log_mel_agrees_with_openai_whisper(n_mels: int, seconds: float) -> None:
    samples = speech_like(seconds, seed=int(seconds * 10))
    reference = _openai(samples, n_mels)
    ours = log_mel(samples, n_mels)
    assert ours.shape == reference.shape == (n_mels, N_FRAMES) and ours.dtype == np.float32
    assert np.abs(ours - reference).max() < 1e-4
    # The fp16 wire tensor only adds rounding: still within 1e-3.
    wire = to_encoder_input(ours)
    assert wire.shape == (1, N_FRAMES, n_mels) and wire.dtype == np.float16
    assert np.abs(wire[0].T.astype(np.float32) - reference).max() < 1e-3


def test_threads_split_the_frames_without_changing_the_result() -> None:
    samples = speech_like(20.0, seed=4)
    single = log_mel(samples, threads=1)
    for threads in (2, 7):  # BLAS may round a differently sized block differently: 1e-6
        np.testing.assert_allclose(log_mel(samples, threads=threads), single, atol=1e-6)


def test_longer_audio_is_trimmed_to_one_window_unless_frames_is_none() -> None:
    samples = speech_like(31.0, seed=3)
    assert log_mel(samples).shape == (80, 3000)
    assert log_mel(samples, frames=None).shape == (80, samples.size // 160)


def test_silence_is_flat_and_finite() -> None:
    features = log_mel(np.zeros(16_000, np.float32))
    assert np.isfinite(features).all() and np.ptp(features) == 0


def test_unsupported_bins_and_empty_audio_are_refused() -> None:
    with pytest.raises(ValueError, match="80 or 128"):
        mel_filters(64)
    with pytest.raises(ValueError, match="too short"):
        log_mel(np.zeros(10, np.float32), frames=None)
