"""Verdicts remembered by key, least recently used first out, bounded in bytes.

A bound in entries is no bound in memory when an entry holds a client's text: 1,024 entries of
a 4 MB error message each is 4 GB. Here every entry is charged its key, its value and a fixed
overhead, and the oldest go until the total fits; a value longer than ``max_value_chars`` is
cut before it is stored (the caller should have cut it already).
"""

from __future__ import annotations

from collections import OrderedDict

ENTRY_OVERHEAD = 200  # bytes: the dict slot, the bytes and str objects' headers


class VerdictCache:
    """key -> None (passed) or a short message; ``max_bytes`` bounds the total."""

    def __init__(self, max_bytes: int = 4 << 20, max_value_chars: int = 2000) -> None:
        self.max_bytes = max_bytes
        self.max_value_chars = max_value_chars
        self._entries: OrderedDict[bytes, str | None] = OrderedDict()
        self.bytes = 0
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: bytes) -> tuple[bool, str | None]:
        """(found, verdict)."""
        if key in self._entries:
            self.hits += 1
            self._entries.move_to_end(key)
            return True, self._entries[key]
        self.misses += 1
        return False, None

    def put(self, key: bytes, verdict: str | None) -> None:
        if verdict is not None:
            verdict = verdict[: self.max_value_chars]
        if key in self._entries:
            self.bytes -= self._cost(key, self._entries.pop(key))
        cost = self._cost(key, verdict)
        if cost > self.max_bytes:
            return
        self._entries[key] = verdict
        self.bytes += cost
        while self.bytes > self.max_bytes:
            old_key, old = self._entries.popitem(last=False)
            self.bytes -= self._cost(old_key, old)

    @staticmethod
    def _cost(key: bytes, verdict: str | None) -> int:
        return ENTRY_OVERHEAD + len(key) + (len(verdict.encode()) if verdict else 0)
