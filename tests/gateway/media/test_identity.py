"""content_digest framing and ExtraIdRegistry's collision guard."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from gateway.media.identity import ExtraIdRegistry, content_digest

PIXELS = np.arange(2 * 3 * 4, dtype=np.float16).reshape(2, 3, 4)
OPTIONS = {"shortest_edge": 336, "crop": "336x336", "rescale": 1 / 255}


def digest(model: str = "llava", options: object = OPTIONS, arrays: object = (PIXELS,)) -> bytes:
    return content_digest(model=model, options=options, arrays=list(arrays))  # type: ignore[arg-type]


def test_digest_is_pinned() -> None:
    """A framing change must bump _VERSION on purpose: replicas and restarts must agree."""
    assert digest() == digest()
    assert digest().hex() == "031920dd97f18e7e0c491e7f2494b8a4bc6f16f7c4bfce8f5a1e4851371fe8f6"
    small = content_digest(model="m", options={"a": 1}, arrays=[np.zeros((1, 2), np.uint8)])
    assert small.hex() == "3c2da71200c5d760ce0db3f80eef693363a9914146065a31a931334bc029d7ab"


@pytest.mark.parametrize(
    ("name", "changed"),
    [
        ("model", lambda: digest(model="llava-next")),
        ("option value", lambda: digest(options={**OPTIONS, "shortest_edge": 337})),
        ("option key", lambda: digest(options={**OPTIONS, "extra": 0})),
        ("int vs float", lambda: digest(options={**OPTIONS, "shortest_edge": 336.0})),
        ("int vs str", lambda: digest(options={**OPTIONS, "shortest_edge": "336"})),
        ("int vs bool", lambda: digest(options={"flag": 1}) != digest(options={"flag": True})),
        ("string options", lambda: digest(options="shortest_edge=336")),
        ("shape", lambda: digest(arrays=(PIXELS.reshape(3, 2, 4),))),
        ("dtype", lambda: digest(arrays=(PIXELS.view(np.int16),))),
        ("pixel", lambda: digest(arrays=(PIXELS + np.float16(1),))),
        ("second image", lambda: digest(arrays=(PIXELS, PIXELS))),
        ("no image", lambda: digest(arrays=())),
        (
            "image order",
            lambda: digest(arrays=(PIXELS, -PIXELS)) != digest(arrays=(-PIXELS, PIXELS)),
        ),
        (
            "0-d vs 1-d",
            lambda: digest(arrays=(np.array(1.0),)) != digest(arrays=(np.array([1.0]),)),
        ),
    ],
)
def test_every_field_changes_the_digest(name: str, changed: object) -> None:
    result = changed()  # type: ignore[operator]
    assert result is True or result != digest(), name


def test_framing_keeps_field_boundaries() -> None:
    assert digest(model="ab", options="c") != digest(model="a", options="bc")
    assert digest(options={"ab": "c"}) != digest(options={"a": "bc"})
    joined = np.zeros(8, np.uint8)
    assert digest(arrays=(joined,)) != digest(arrays=(joined[:4], joined[4:]))


def test_layout_and_key_order_do_not_matter() -> None:
    assert digest(options=dict(reversed(list(OPTIONS.items())))) == digest()
    fortran = np.asfortranarray(PIXELS)
    assert digest(arrays=(fortran,)) == digest()
    assert digest(arrays=(PIXELS.astype(">f2"),)) == digest()
    assert digest(arrays=(PIXELS.tolist(),)) != digest()  # float64 from a list: not the same


def test_rejects_unhashable_inputs() -> None:
    with pytest.raises(TypeError):
        digest(options={"x": None})
    with pytest.raises(TypeError):
        digest(arrays=(np.array([object()]),))


def _prefixed(prefix: int, tail: bytes) -> bytes:
    return prefix.to_bytes(8, "big") + tail.ljust(24, b"\0")


def test_extra_id_is_the_digest_prefix_and_stable() -> None:
    registry = ExtraIdRegistry()
    d = digest()
    extra = registry.extra_id(d)
    assert extra == int.from_bytes(d[:8], "big")
    assert 1 <= extra < 2**64
    assert registry.extra_id(d) == extra
    assert registry.digest_for(extra) == d
    assert registry.collisions == 0 and len(registry) == 1


def test_64_bit_collision_drops_the_id_and_counts() -> None:
    registry = ExtraIdRegistry()
    first, second = _prefixed(42, b"one"), _prefixed(42, b"two")
    assert registry.extra_id(first) == 42
    assert registry.extra_id(second) is None  # no id rather than one naming other content
    assert registry.extra_id(second) is None and registry.collisions == 2
    assert registry.digest_for(42) == first and registry.extra_id(first) == 42


def test_zero_prefix_maps_to_one() -> None:
    registry = ExtraIdRegistry()
    assert registry.extra_id(_prefixed(0, b"zero")) == 1  # 0 is not a valid extra id
    assert registry.extra_id(_prefixed(1, b"one")) is None and registry.collisions == 1


def test_salt_and_kinds() -> None:
    base = digest()
    assert content_digest(model="llava", options=OPTIONS, arrays=[PIXELS], salt="") == base
    salted = content_digest(model="llava", options=OPTIONS, arrays=[PIXELS], salt="tenant-a")
    other = content_digest(model="llava", options=OPTIONS, arrays=[PIXELS], salt=b"tenant-b")
    assert len({base, salted, other}) == 3
    image = content_digest(model="m", options="o", arrays=[PIXELS], kinds=["image"])
    video = content_digest(model="m", options="o", arrays=[PIXELS], kinds=["video"])
    assert image != video != content_digest(model="m", options="o", arrays=[PIXELS])
    with pytest.raises(ValueError):
        content_digest(model="m", options="o", arrays=[PIXELS], kinds=[])


def test_lru_bound_and_reuse_after_eviction() -> None:
    registry = ExtraIdRegistry(max_entries=2)
    a, b, c = (_prefixed(n, bytes([n])) for n in (1, 2, 3))
    registry.extra_id(a)
    registry.extra_id(b)
    registry.extra_id(a)  # a is now the most recent
    registry.extra_id(c)  # evicts b
    assert len(registry) == 2
    assert registry.digest_for(2) is None and registry.digest_for(1) == a
    # b's id is free again: a different digest with the same prefix takes it, no collision.
    assert registry.extra_id(_prefixed(2, b"other")) == 2
    assert registry.collisions == 0


def test_thread_safe_mapping() -> None:
    registry = ExtraIdRegistry(max_entries=10_000)
    digests = [_prefixed(n % 500 + 1, bytes([n % 7])) for n in range(3000)]
    with ThreadPoolExecutor(8) as pool:
        ids = list(pool.map(registry.extra_id, digests))
    by_digest: dict[bytes, int | None] = {}
    for d, extra in zip(digests, ids, strict=True):
        assert by_digest.setdefault(d, extra) == extra
    assert len(set(by_digest.values()) - {None}) == 500  # never one id for two digests
    assert registry.collisions == sum(1 for extra in ids if extra is None)


def test_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError):
        ExtraIdRegistry(max_entries=0)
    with pytest.raises(ValueError):
        ExtraIdRegistry().extra_id(b"short")
