"""What video.py and audio.py share about PyAV: opening bytes safely, and its error types.

Room-private. PyAV is imported on first use, not with the gateway: loading FFmpeg's libraries
costs about 180 ms and 19 MiB in every process (the gateway and each media worker), and a
deployment that serves only images or text never needs them.

FFmpeg only ever gets an in-memory buffer and an explicitly named demuxer (never probing,
which is how playlists and concat lists get in). That demuxer is also the only format FFmpeg
may open (``format_whitelist``, which FFmpeg hands down to any demuxer a demuxer opens inside
itself, such as AVI's GAB2 subtitles), and any attempt of a demuxer to open a second file or
URL is refused. Opening a container also decodes a few frames of each stream to learn its
parameters (``avformat_find_stream_info``), before the caller has looked at any codec: those
decoders are limited to the caller's allowlist too (``codec_whitelist``), so a file cannot
get an arbitrary FFmpeg decoder run by naming it for a second stream (AVI's codec tags reach
almost every decoder FFmpeg has).
"""

from __future__ import annotations

import functools
import io
from types import ModuleType
from typing import Any

from gateway.errors import DecoderUnavailable

__all__ = ["av_errors", "codec_ids", "decoder_names", "open_bytes", "pyav"]


@functools.cache
def pyav() -> ModuleType:
    """The ``av`` module, imported the first time a video or audio is decoded. Without it the
    server cannot decode video or audio at all: a 503 of its own, never a 400 blaming the
    client's media."""
    try:
        import av
    except ImportError as exc:
        raise DecoderUnavailable(
            "This server cannot decode video or audio: its media decoder (PyAV, with FFmpeg) "
            f"is not installed ({exc}). This is not a fault of the request; the operator must "
            "install it."
        ) from None
    return av


@functools.cache
def av_errors() -> tuple[type[BaseException], ...]:
    """What PyAV raises on malformed input (its own errors subclass OSError and friends)."""
    return (pyav().FFmpegError, ValueError, IndexError, EOFError, OSError, ZeroDivisionError)


def open_bytes(data: bytes, demuxer: str, codecs: tuple[str, ...]) -> Any:
    """An input container over ``data`` with the demuxer ``demuxer``, probing streams with
    the decoders of ``codecs`` only; use it as a context."""
    options = {"format_whitelist": demuxer, "codec_whitelist": decoder_names(codecs)}
    return pyav().open(
        io.BytesIO(data), format=demuxer, container_options=options, io_open=_refuse_nested_open
    )


@functools.cache
def decoder_names(codecs: tuple[str, ...]) -> str:
    """The software decoders of the codecs named (AV1's is ``libdav1d``; MP3 has ``mp3`` and
    ``mp3float``), comma-separated, as ``codec_whitelist`` takes them."""
    av = pyav()
    ids = set(codec_ids(codecs))
    wrappers = av.codec.codec.Capabilities.hardware | av.codec.codec.Capabilities.hybrid
    names = set()
    for name in av.codecs_available:
        try:
            codec = av.Codec(name, "r")
        except av.codec.codec.UnknownCodecError:
            continue  # an encoder only
        if codec.id in ids and not codec.capabilities & wrappers:
            names.add(name)
    return ",".join(sorted(names))


@functools.cache
def codec_ids(names: tuple[str, ...]) -> dict[int, str]:
    """FFmpeg codec id -> name, for an allowlist that holds whichever decoder FFmpeg picks
    (AV1 decodes with libdav1d, whose name is not "av1"; its id is)."""
    return {pyav().Codec(name, "r").id: name for name in names}


def _refuse_nested_open(url: str, flags: int, options: dict[str, Any]) -> Any:
    """FFmpeg asks for this when a file points at another (references, playlists): never."""
    raise PermissionError("nested opens are not allowed")
