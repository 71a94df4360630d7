"""The ``prompt_table_extra_id``: a content identity for KV-cache reuse across requests.

TensorRT-LLM gives every image the same fake token ids, so without an extra id two different
images share KV block keys and one request can reuse another image's cache: wrong answers,
silently (triton-contract.md section 3). The id must therefore change whenever the model would
see different input: the model, the processing options, and every processed array with its
dtype and shape, in order. It is derived from content, never from a URL.

``content_digest`` frames each field with a length prefix before hashing (BLAKE2b-256), so no
two different inputs can produce the same byte stream (the collision bugs seen elsewhere came
from missing framing, missing shapes and options left out). A tenant salt, when configured,
is framed in first, so tenants sharing one Triton never share a cache entry. The wire id is
only 64 bits, so ``ExtraIdRegistry`` keeps the full digest beside each id it hands out; when a
different digest arrives with an id already held (a 64-bit collision), that request gets no id
at all rather than a shared one. Where the arrays come from (decoding, ``families/``) is not
its job.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import numpy as np

__all__ = ["DEFAULT_MAX_ENTRIES", "DIGEST_SIZE", "ExtraIdRegistry", "content_digest"]

DIGEST_SIZE = 32
DEFAULT_MAX_ENTRIES = 65_536
_DOMAIN = b"mmgw/prompt_table_extra_id"


class Hasher(Protocol):
    """What the framing needs of a hashlib object (blake2b here)."""

    def update(self, data: bytes | memoryview, /) -> None: ...


_VERSION = 1  # bump when the framing changes, so old and new ids never meet


def _frame(hasher: Hasher, tag: bytes, payload: bytes | np.ndarray[Any, Any]) -> None:
    """One field: a one-byte-length tag, an 8-byte length, then the payload (any C buffer)."""
    size = payload.nbytes if isinstance(payload, np.ndarray) else len(payload)
    hasher.update(len(tag).to_bytes(1, "big") + tag + size.to_bytes(8, "big"))
    hasher.update(payload if isinstance(payload, bytes) else payload.data)


def _canonical_value(value: str | int | float) -> tuple[bytes, bytes]:
    """(type tag, bytes) of an option value; types are tagged so 1, 1.0, True and "1" differ."""
    if isinstance(value, bool):
        return b"b", b"1" if value else b"0"
    if isinstance(value, int):
        return b"i", str(value).encode()
    if isinstance(value, float):
        return b"f", value.hex().encode()  # exact, unlike repr in edge cases like -0.0
    if isinstance(value, str):
        return b"s", value.encode("utf-8")
    raise TypeError(f"option values must be str, int or float, got {type(value).__name__}")


def _frame_options(hasher: Hasher, options: Mapping[str, str | int | float] | str) -> None:
    """Options in canonical form: a string as given, a mapping sorted by key with typed values."""
    if isinstance(options, str):
        _frame(hasher, b"options:str", options.encode("utf-8"))
        return
    _frame(hasher, b"options:map", len(options).to_bytes(8, "big"))
    for key in sorted(options):
        tag, payload = _canonical_value(options[key])
        _frame(hasher, b"key", key.encode("utf-8"))
        _frame(hasher, b"value:" + tag, payload)


def _frame_array(hasher: Hasher, array: np.ndarray[Any, Any]) -> None:
    """dtype (little-endian form), shape, then the C-contiguous bytes."""
    if array.dtype.hasobject:
        raise TypeError("object arrays have no stable byte form to hash")
    # Little-endian, C order: equal values hash equal whatever the memory layout (a no-op,
    # without a copy, for the usual native little-endian contiguous arrays).
    contiguous = array.astype(array.dtype.newbyteorder("<"), order="C", copy=False)
    _frame(hasher, b"dtype", contiguous.dtype.str.encode())
    _frame(hasher, b"shape", b"".join(int(d).to_bytes(8, "big") for d in contiguous.shape))
    _frame(hasher, b"data", contiguous)


def content_digest(
    *,
    model: str,
    options: Mapping[str, str | int | float] | str,
    arrays: Sequence[np.ndarray[Any, Any]],
    kinds: Sequence[str] | None = None,
    salt: str | bytes = b"",
) -> bytes:
    """BLAKE2b-256 of everything that decides what the model sees, in order.

    ``options`` are the processing options (resize, crop, tiling, frame sampling, ...): a
    mapping (canonicalised here) or an already canonical string. ``arrays`` are the processed
    inputs, one per image or video, in request order; ``kinds`` names each one ("image",
    "video"), so an image and a one-frame video of the same pixels differ. ``salt`` isolates
    tenants: the same content under two salts gives unrelated digests.

    Salt and kinds are framed only when given, so digests without them are unchanged.
    """
    if kinds is not None and len(kinds) != len(arrays):
        raise ValueError("kinds must name every array")
    hasher = hashlib.blake2b(digest_size=DIGEST_SIZE)
    _frame(hasher, b"domain", _DOMAIN + b"/v" + str(_VERSION).encode())
    if salt:
        _frame(hasher, b"salt", salt.encode("utf-8") if isinstance(salt, str) else salt)
    _frame(hasher, b"model", model.encode("utf-8"))
    _frame_options(hasher, options)
    _frame(hasher, b"arrays", len(arrays).to_bytes(8, "big"))
    for index, array in enumerate(arrays):
        if kinds is not None:
            _frame(hasher, b"kind", kinds[index].encode("utf-8"))
        _frame_array(hasher, np.asarray(array))
    return hasher.digest()


class ExtraIdRegistry:
    """Maps content digests to UINT64 extra ids (>= 1), never sharing one id between two
    remembered digests.

    The id is a pure function of the digest (its first 8 bytes; 1 if they are all zero), so
    every gateway replica and every restart derives the same id for the same content, and
    requests routed to one Triton reuse each other's KV cache. If that id is already held by a
    different digest (a 64-bit collision, about 1 in 2**64 per pair), ``extra_id`` returns
    None: that request goes without an id (no reuse) rather than with one that names other
    content, and ``collisions`` counts it (exported as a metric). Re-deriving another id
    instead would make the id depend on this registry's history, which other replicas do not
    share. Ids are remembered in a bounded LRU. The lock makes it safe from worker threads too.
    """

    def __init__(self, max_entries: int = DEFAULT_MAX_ENTRIES) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        self._max_entries = max_entries
        self._by_id: OrderedDict[int, bytes] = OrderedDict()
        self._by_digest: dict[bytes, int] = {}
        self._lock = threading.Lock()
        self.collisions = 0

    def __len__(self) -> int:
        return len(self._by_id)

    def extra_id(self, digest: bytes) -> int | None:
        """The id for ``digest``, or None when a different digest holds that id."""
        if len(digest) < 8:
            raise ValueError("a digest must have at least 8 bytes")
        with self._lock:
            held = self._by_digest.get(digest)
            if held is not None:
                self._by_id.move_to_end(held)
                return held
            candidate = int.from_bytes(digest[:8], "big") or 1
            if candidate in self._by_id:  # held by a different digest: a 64-bit collision
                self.collisions += 1
                self._by_id.move_to_end(candidate)
                return None
            self._by_id[candidate] = digest
            self._by_digest[digest] = candidate
            while len(self._by_id) > self._max_entries:
                _, evicted = self._by_id.popitem(last=False)
                del self._by_digest[evicted]
            return candidate

    def digest_for(self, extra_id: int) -> bytes | None:
        """The full digest an id currently stands for, or None if it is not remembered."""
        with self._lock:
            return self._by_id.get(extra_id)
