"""Which replica takes a request: rendezvous hashing bounded by load, least loaded, or in turn.

Pure functions over the replicas' names and in-flight counts, so the policy is tested without
a server. Each returns the replicas in the order they are tried: the first takes the request,
the second is the retry when the first fails before its first byte.

- ``affinity``: rendezvous (highest-random-weight) hashing on the request's content key. Every
  gateway computes the same order for the same key without sharing any state, and a replica that
  joins or leaves moves only the keys it wins or held. Bounded by load (Mirrokni, Thorup and
  Zadimoghaddam's consistent hashing with bounded loads): a replica whose in-flight count has
  reached ``spill_bound`` is passed over for the next in the key's order, so a hot image spills
  instead of drowning its replica.
- ``least_loaded``: fewest requests in flight first (ties in turn).
- ``round_robin``: in turn, whatever the request.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from typing import Literal

Policy = Literal["affinity", "least_loaded", "round_robin"]


def weight(key: int, name: str) -> int:
    """The rendezvous weight of ``name`` for ``key``: 64 bits of BLAKE2b over both."""
    digest = hashlib.blake2b(key.to_bytes(8, "little", signed=False), digest_size=8)
    digest.update(name.encode())
    return int.from_bytes(digest.digest(), "little")


def rendezvous(key: int, names: Sequence[str]) -> list[str]:
    """``names`` by descending weight for ``key`` (ties, vanishingly rare, by name)."""
    return sorted(names, key=lambda name: (-weight(key, name), name))


def spill_bound(total_in_flight: int, replicas: int, ratio: float, floor: int) -> int:
    """The most requests one replica may hold once this one is admitted: ``ratio`` times the
    mean load counting the new request, and never below ``floor`` (a light load never spills).

    With ``ratio >= 1`` some replica is always under it: the least loaded holds at most the
    mean, which is below the bound."""
    if replicas <= 0:
        return floor
    return max(floor, math.ceil(ratio * (total_in_flight + 1) / replicas))


def bounded(order: Sequence[str], in_flight: Mapping[str, int], bound: int) -> list[str]:
    """``order`` with its first replica under ``bound`` moved to the front (the rest keep
    their order, so the retry is the key's next choice)."""
    for index, name in enumerate(order):
        if in_flight.get(name, 0) < bound:
            return [name, *order[:index], *order[index + 1 :]]
    return list(order)


def least_loaded(names: Sequence[str], in_flight: Mapping[str, int], turn: int) -> list[str]:
    """Fewest in flight first; equal loads in turn, so idle replicas share the work."""
    rotated = rotate(names, turn)
    return sorted(rotated, key=lambda name: in_flight.get(name, 0))  # sort is stable


def rotate(names: Sequence[str], turn: int) -> list[str]:
    if not names:
        return []
    start = turn % len(names)
    return [*names[start:], *names[:start]]


def order(
    policy: Policy,
    names: Sequence[str],
    in_flight: Mapping[str, int],
    key: int | None,
    turn: int,
    spill_ratio: float,
    spill_floor: int,
) -> list[str]:
    """The replicas in the order to try them for one request. ``names`` is sorted, so every
    gateway agrees; affinity without a key (nothing to be affine to) is least loaded."""
    if policy == "round_robin":
        return rotate(names, turn)
    if policy == "least_loaded" or key is None:
        return least_loaded(names, in_flight, turn)
    total = sum(in_flight.get(name, 0) for name in names)
    bound = spill_bound(total, len(names), spill_ratio, spill_floor)
    return bounded(rendezvous(key, names), in_flight, bound)
