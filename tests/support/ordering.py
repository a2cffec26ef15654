"""What an ordered route's handler calls must look like, whichever process made them."""

from __future__ import annotations

import collections
import itertools

#: One handler call: (key, delivery id, start, end, pid); times from ``time.time()``.
Call = tuple[str, str, float, float, int]


def assert_in_reservation_order(calls: list[Call], expected: dict[str, list[str]]) -> None:
    """Each key's calls: every delivery once, in delivery id (reservation) order, each
    starting after the one before it ended."""
    by_key: dict[str, list[tuple[str, float, float]]] = collections.defaultdict(list)
    for key, delivery_id, start, end, _pid in calls:
        by_key[key].append((delivery_id, start, end))
    assert set(by_key) == set(expected)
    for key, runs in by_key.items():
        runs.sort(key=lambda run: run[1])
        assert [run[0] for run in runs] == sorted(expected[key]), f"key {key} out of order"
        for before, after in itertools.pairwise(runs):
            assert after[1] >= before[2], f"key {key}: {after[0]} started before {before[0]} ended"
