"""Whether two replicas serve the same model: their configs compared, the difference named.

Replicas of one served model must be interchangeable: the gateway builds a request's tensors
once, from one contract, and may send it to any of them (or retry it on another). A replica
whose config declares other inputs, outputs, batch size, decoding policy or parameters (an
older engine, another checkpoint) is refused, and the log says which field differs.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from gateway.triton.contract import ModelContract


def difference(reference: ModelContract, other: ModelContract) -> str | None:
    """None when ``other`` declares what ``reference`` does; else what differs, in words."""
    for what in ("inputs", "outputs", "parameters"):
        ours: Mapping[str, object] = getattr(reference, what)
        theirs: Mapping[str, object] = getattr(other, what)
        changed = sorted(k for k in ours.keys() | theirs.keys() if ours.get(k) != theirs.get(k))
        if changed:
            return f"{what} differ: {', '.join(changed)}"
    if reference.max_batch_size != other.max_batch_size:
        return f"max_batch_size {other.max_batch_size} != {reference.max_batch_size}"
    if reference.decoupled != other.decoupled:
        return f"decoupled {other.decoupled} != {reference.decoupled}"
    return None


def majority(contracts: Mapping[str, ModelContract]) -> ModelContract:
    """The contract most replicas declare (ties: the one of the first replica by name)."""
    names = sorted(contracts)
    groups: Counter[str] = Counter()
    for name in names:
        leader = next((n for n in names if difference(contracts[n], contracts[name]) is None), name)
        groups[leader] += 1
    best = max(names, key=lambda n: (groups[n], -names.index(n)))
    return contracts[best]
