"""data: URLs, base64 payloads and local files: no network, sizes checked before decoding."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.errors import MediaFetchError, MediaTooLarge, MediaURLError
from gateway.media.local import decode_base64_payload, decode_data_url, read_local_file


@pytest.mark.parametrize(
    ("url", "data", "media_type"),
    [
        ("data:image/png;base64,aGVsbG8=", b"hello", "image/png"),
        ("data:image/png;base64,aGVsbG8", b"hello", "image/png"),  # padding omitted
        ("data:IMAGE/PNG;BASE64,aGVs\nbG8=", b"hello", "image/png"),  # wrapped lines
        ("data:;base64,-_8=", b"\xfb\xff", None),  # URL-safe alphabet
        ("data:image/png;base64,aGVsbG8%3D", b"hello", "image/png"),  # percent-escaped padding
        ("data:text/plain,hi%20there%FF", b"hi there\xff", "text/plain"),
    ],
)
def test_data_urls(url: str, data: bytes, media_type: str | None) -> None:
    media = decode_data_url(url, 1024)
    assert (media.data, media.content_type) == (data, media_type)


def test_data_url_size_checked_before_decoding() -> None:
    # Not valid base64 at all: an oversize payload must be refused for its size, undecoded.
    with pytest.raises(MediaTooLarge):
        decode_data_url("data:image/png;base64," + "!" * 2000, 1000)
    with pytest.raises(MediaTooLarge):
        decode_data_url("data:image/png;base64," + "A" * 1400, 1000)
    with pytest.raises(MediaTooLarge):
        decode_data_url("data:," + "a" * 1001, 1000)
    assert len(decode_data_url("data:;base64," + "A" * 1332, 1000).data) == 999


@pytest.mark.parametrize("url", ["data:image/png;base64", "data:;base64,a$b=", "data:;base64,a"])
def test_malformed_data_urls(url: str) -> None:
    with pytest.raises(MediaURLError):
        decode_data_url(url, 1024)


def test_base64_payload_names_what_it_decodes() -> None:
    assert decode_base64_payload("aGk=", 10, "input_audio.data") == b"hi"
    with pytest.raises(MediaTooLarge, match=r"input_audio\.data is 7 bytes, over the limit of 5"):
        decode_base64_payload("aGVsbG8hIQ==", 5, "input_audio.data")
    with pytest.raises(MediaURLError, match=r"input_audio\.data is not valid base64"):
        decode_base64_payload("a$b=", 10, "input_audio.data")


def test_local_file_reads_are_confined_and_capped(tmp_path: Path) -> None:
    root = tmp_path / "media"
    root.mkdir()
    (root / "a.bin").write_bytes(b"abc")
    (root / "big.bin").write_bytes(b"x" * 11)
    (tmp_path / "secret").write_bytes(b"s")
    assert read_local_file(root / "a.bin", root, 10) == b"abc"
    with pytest.raises(MediaTooLarge):
        read_local_file(root / "big.bin", root, 10)
    with pytest.raises(MediaFetchError, match="outside the directory"):
        read_local_file(root / ".." / "secret", root, 10)
    with pytest.raises(MediaFetchError, match="does not exist"):
        read_local_file(root / "missing", root, 10)
