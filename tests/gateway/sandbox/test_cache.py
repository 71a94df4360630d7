"""The verdict cache is bounded in bytes, not entries: big messages cannot grow it past its
budget, and a message is cut before it is kept."""

from __future__ import annotations

from gateway.sandbox import VerdictCache
from gateway.sandbox.cache import ENTRY_OVERHEAD


def test_the_total_stays_within_its_bytes() -> None:
    cache = VerdictCache(max_bytes=64 * 1024, max_value_chars=2000)
    for index in range(1000):
        cache.put(index.to_bytes(16, "big"), "x" * 1_000_000)  # a 1 MB message each
    assert cache.bytes <= 64 * 1024
    assert len(cache) == (64 * 1024) // (ENTRY_OVERHEAD + 16 + 2000)
    found, verdict = cache.get((999).to_bytes(16, "big"))
    assert found and verdict == "x" * 2000  # cut, then kept


def test_least_recently_used_goes_first_and_passes_are_remembered() -> None:
    cache = VerdictCache(max_bytes=3 * (ENTRY_OVERHEAD + 1))
    for key in (b"a", b"b", b"c"):
        cache.put(key, None)
    assert cache.get(b"a") == (True, None)  # a is now the most recent
    cache.put(b"d", None)
    assert cache.get(b"b") == (False, None)
    assert [cache.get(k)[0] for k in (b"a", b"c", b"d")] == [True, True, True]
    assert (cache.hits, cache.misses) == (4, 1)
