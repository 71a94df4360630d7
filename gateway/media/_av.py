"""What video.py and audio.py share about PyAV: opening bytes safely, and its error types.

Room-private. FFmpeg only ever gets an in-memory buffer and an explicitly named demuxer (never
probing, which is how playlists and concat lists get in), and any attempt of a demuxer to
open a second file or URL is refused.
"""

from __future__ import annotations

import io
from typing import Any

import av

__all__ = ["AV_ERRORS", "codec_ids", "open_bytes"]

# What PyAV raises on malformed input (its own errors subclass OSError and friends).
AV_ERRORS = (av.FFmpegError, ValueError, IndexError, EOFError, OSError, ZeroDivisionError)


def open_bytes(data: bytes, demuxer: str) -> Any:
    """An input container over ``data`` with the demuxer ``demuxer``; use it as a context."""
    return av.open(io.BytesIO(data), format=demuxer, io_open=_refuse_nested_open)


def codec_ids(names: tuple[str, ...]) -> dict[int, str]:
    """FFmpeg codec id -> name, for an allowlist that holds whichever decoder FFmpeg picks
    (AV1 decodes with libdav1d, whose name is not "av1"; its id is)."""
    return {av.Codec(name, "r").id: name for name in names}


def _refuse_nested_open(url: str, flags: int, options: dict[str, Any]) -> Any:
    """FFmpeg asks for this when a file points at another (references, playlists): never."""
    raise PermissionError("nested opens are not allowed")
