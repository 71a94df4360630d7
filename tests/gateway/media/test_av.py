"""Without PyAV the server cannot decode video or audio: that is the server's 503
``decoder_unavailable`` (issue 22 item 8), as the worker hands it back, not a 400 saying the
client's media "could not be decoded"."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest

from gateway.errors import DecoderUnavailable
from gateway.families.registry import get_family
from gateway.media import _av
from gateway.media._worker import call_job
from gateway.media.audio import AudioLimits
from gateway.media.video import FrameSampling, VideoLimits
from gateway.pipeline._media_jobs import prepare_audio, prepare_video
from tests.audio_samples import encode, speech_like
from tests.gateway.media.samples import encode_video


@pytest.fixture
def without_pyav(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """``import av`` fails, as on a host where PyAV is not installed."""
    _av.pyav.cache_clear()
    monkeypatch.setitem(sys.modules, "av", None)  # None in sys.modules: ImportError
    yield
    monkeypatch.undo()
    _av.pyav.cache_clear()


def test_audio_without_pyav_is_the_servers_503(without_pyav: None) -> None:
    ok, error = call_job(prepare_audio, (AUDIO, AudioLimits()))
    assert not ok and isinstance(error, DecoderUnavailable)
    assert error.status_code == 503 and error.code == "decoder_unavailable"
    assert "not a fault of the request" in error.message


def test_video_without_pyav_is_the_servers_503(without_pyav: None) -> None:
    ok, error = call_job(prepare_video, VIDEO_JOB)
    assert not ok and isinstance(error, DecoderUnavailable)


AUDIO = encode(speech_like(0.5), "ogg")
VIDEO_JOB = (encode_video(), VideoLimits(), FrameSampling(3), get_family("llava_onevision"))
