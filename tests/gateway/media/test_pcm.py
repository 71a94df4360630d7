"""media/pcm.py: the Realtime API's raw formats to 16 kHz, chunk by chunk."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from gateway.media.pcm import PcmStream, _alaw_table, _mulaw_table


def _reference(name: str) -> list[int]:
    """Python's own G.711 decoders (audioop, 3.12 and older) for all 256 codes."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        audioop = pytest.importorskip("audioop")
    decode = audioop.ulaw2lin if name == "mulaw" else audioop.alaw2lin
    return [int.from_bytes(decode(bytes([c]), 2), "little", signed=True) for c in range(256)]


def test_g711_tables_match_pythons_decoders() -> None:
    assert _mulaw_table().tolist() == _reference("mulaw")
    assert _alaw_table().tolist() == _reference("alaw")


def test_pcm24k_becomes_two_samples_for_every_three() -> None:
    ramp = (np.arange(3000, dtype=np.int16) * 7).astype("<i2").tobytes()
    out = PcmStream("audio/pcm").feed(ramp)
    assert out.size == 2000
    assert out[:4].tolist() == [0, 10, 21, 31]  # x[0], x[1.5] = mean(x[1], x[2]), x[3], ...


@pytest.mark.parametrize("fmt", ["audio/pcm", "audio/pcmu", "audio/pcma"])
def test_how_the_client_cuts_its_audio_does_not_matter(fmt: str) -> None:
    rng = np.random.default_rng(0)
    data = rng.integers(0, 256, 24_001, dtype=np.uint8).tobytes()  # odd: half a sample left
    whole = PcmStream(fmt).feed(data)  # type: ignore[arg-type]
    stream = PcmStream(fmt)  # type: ignore[arg-type]
    cuts = sorted(rng.integers(0, len(data), 40).tolist())
    pieces = [stream.feed(data[a:b]) for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]
    assert np.array_equal(np.concatenate(pieces), whole)


def test_g711_doubles_the_rate() -> None:
    stream = PcmStream("audio/pcmu")
    assert stream.feed(bytes(8000)).size + stream.feed(bytes(1)).size == 16_000
