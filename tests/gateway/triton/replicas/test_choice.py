"""Placement policies: rendezvous hashing, its load bound, least loaded, round robin."""

from __future__ import annotations

from collections import Counter

from gateway.triton.replicas import choice

NAMES = ["10.0.0.1:8001", "10.0.0.2:8001", "10.0.0.3:8001"]


def test_rendezvous_spreads_keys_and_every_caller_agrees() -> None:
    firsts = Counter(choice.rendezvous(key, NAMES)[0] for key in range(3000))
    assert set(firsts) == set(NAMES)
    assert min(firsts.values()) > 850  # about a third each
    # Order-independent: any gateway, listing the replicas in any order, agrees.
    assert choice.rendezvous(42, NAMES) == choice.rendezvous(42, list(reversed(NAMES)))


def test_a_replica_leaving_moves_only_the_keys_it_held() -> None:
    before = {key: choice.rendezvous(key, NAMES)[0] for key in range(2000)}
    after = {key: choice.rendezvous(key, NAMES[:2])[0] for key in range(2000)}
    moved = [key for key in before if before[key] != after[key]]
    assert moved and all(before[key] == NAMES[2] for key in moved)
    # ... and each moved key goes to its second choice, the retry target.
    assert all(after[key] == choice.rendezvous(key, NAMES)[1] for key in moved)


def test_spill_bound_is_a_ratio_of_the_mean_with_a_floor() -> None:
    assert choice.spill_bound(0, 3, 1.5, 2) == 2  # a light load never spills
    assert choice.spill_bound(29, 3, 1.5, 2) == 15  # 1.5 x 30 / 3
    assert choice.spill_bound(29, 3, 1.0, 1) == 10


def test_a_hot_key_spills_to_its_next_choice_at_the_bound() -> None:
    order = choice.rendezvous(7, NAMES)
    hot = order[0]
    spill = {hot: 2, order[1]: 0, order[2]: 0}
    assert choice.order("affinity", sorted(NAMES), {hot: 1}, 7, 0, 1.5, 2)[0] == hot
    assert choice.order("affinity", sorted(NAMES), spill, 7, 0, 1.5, 2) == [order[1], hot, order[2]]


def test_affinity_without_a_key_is_least_loaded() -> None:
    loads = {NAMES[0]: 3, NAMES[1]: 0, NAMES[2]: 1}
    assert choice.order("affinity", NAMES, loads, None, 0, 1.5, 2) == [NAMES[1], NAMES[2], NAMES[0]]
    assert choice.order("least_loaded", NAMES, loads, 7, 0, 1.5, 2)[0] == NAMES[1]


def test_round_robin_takes_turns_whatever_the_key() -> None:
    firsts = [choice.order("round_robin", NAMES, {}, 7, turn, 1.5, 2)[0] for turn in range(6)]
    assert firsts == NAMES + NAMES
