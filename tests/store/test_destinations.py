"""A destination's shared state in the store, on both stores: the token bucket, the
forwards in flight (a dead worker's slot runs out), and the circuit (opens after N
failures in a row, holds during the cool-down, one half-open probe, closes on success)."""

from __future__ import annotations

import asyncio
from typing import Any

from hookinbox.store import DestinationLimits, Store

LEASE = "lease-1"


def limits(**given: Any) -> DestinationLimits:
    base: dict[str, Any] = {
        "rate_per_second": None,
        "burst": 1.0,
        "max_in_flight": None,
        "circuit_failures": None,
        "circuit_cooldown": 30.0,
        "slot_seconds": 30.0,
    }
    return DestinationLimits(**{**base, **given})


async def test_the_bucket_admits_its_burst_then_holds_for_the_next_token(store: Store) -> None:
    rule = limits(rate_per_second=1.0, burst=2.0)
    answers = [await store.destinations.admit("crm", f"j{n}", LEASE, rule) for n in range(3)]
    assert [a.admitted for a in answers] == [True, True, False]
    held = answers[2]
    # The next token in 1 s, less what has refilled since the burst: half a second of
    # slack for the three commits on a loaded machine.
    assert held.code == "destination_rate" and 0.5 < held.wait_seconds <= 1.0
    await asyncio.sleep(held.wait_seconds + 0.05)
    assert (await store.destinations.admit("crm", "j3", LEASE, rule)).admitted


async def test_max_in_flight_holds_until_a_slot_is_released(store: Store) -> None:
    rule = limits(max_in_flight=2)
    assert (await store.destinations.admit("crm", "j1", LEASE, rule)).admitted
    assert (await store.destinations.admit("crm", "j2", LEASE, rule)).admitted
    busy = await store.destinations.admit("crm", "j3", LEASE, rule)
    assert (busy.admitted, busy.code) == (False, "destination_busy")
    # The same lease asking again has its one slot still.
    assert (await store.destinations.admit("crm", "j2", LEASE, rule)).admitted
    # The same job claimed again (its worker died) under a new lease: the dead worker's
    # forward may still be at the target, so its slot counts until it runs out.
    again = await store.destinations.admit("crm", "j2", "lease-2", rule)
    assert (again.admitted, again.code) == (False, "destination_busy")
    await store.destinations.release("crm", "j1", LEASE, healthy=True, opens_after=None)
    assert (await store.destinations.admit("crm", "j2", "lease-2", rule)).admitted
    # Its release frees its own slot only: the earlier lease's holds until it runs out.
    await store.destinations.release("crm", "j2", "lease-2", healthy=True, opens_after=None)
    assert (await store.destinations.admit("crm", "j3", LEASE, rule)).admitted
    assert not (await store.destinations.admit("crm", "j4", LEASE, rule)).admitted
    (state,) = await store.destinations.states()
    assert state.in_flight == 2


async def test_a_dead_workers_slot_runs_out(store: Store) -> None:
    rule = limits(max_in_flight=1, slot_seconds=1.5)
    assert (await store.destinations.admit("crm", "j1", LEASE, rule)).admitted
    assert not (await store.destinations.admit("crm", "j2", LEASE, rule)).admitted
    await asyncio.sleep(1.6)
    assert (await store.destinations.admit("crm", "j2", LEASE, rule)).admitted


async def test_the_circuit_opens_holds_half_opens_for_one_probe_and_closes(
    store: Store,
) -> None:
    rule = limits(circuit_failures=2, circuit_cooldown=2.0)
    d = store.destinations
    for job in ("j1", "j2"):
        assert (await d.admit("crm", job, LEASE, rule)).admitted
    assert not (await d.release("crm", "j1", LEASE, healthy=False, opens_after=2)).opened
    assert (await d.release("crm", "j2", LEASE, healthy=False, opens_after=2)).opened
    held = await d.admit("crm", "j3", LEASE, rule)
    assert (held.admitted, held.code) == (False, "circuit_open")
    assert 1.0 < held.wait_seconds <= 2.0
    await asyncio.sleep(2.1)
    probe = await d.admit("crm", "j3", LEASE, rule)
    assert probe.admitted and probe.probe
    waiting = await d.admit("crm", "j4", LEASE, rule)  # one probe at a time
    assert (waiting.admitted, waiting.code) == (False, "circuit_open")
    assert (await d.release("crm", "j3", LEASE, healthy=True, opens_after=2)).closed
    assert (await d.admit("crm", "j4", LEASE, rule)).admitted
    (state,) = await d.states()
    assert (state.open_for, state.failures, state.openings) == (None, 0, 1)
    assert state.last_opened_at is not None


async def test_a_failed_probe_opens_the_circuit_again(store: Store) -> None:
    rule = limits(circuit_failures=1, circuit_cooldown=1.5)
    d = store.destinations
    assert (await d.admit("crm", "j1", LEASE, rule)).admitted
    assert (await d.release("crm", "j1", LEASE, healthy=False, opens_after=1)).opened
    await asyncio.sleep(1.6)
    assert (await d.admit("crm", "j2", LEASE, rule)).probe
    again = await d.release("crm", "j2", LEASE, healthy=False, opens_after=1)
    assert not again.opened  # still open: not a new opening
    assert (await d.admit("crm", "j3", LEASE, rule)).code == "circuit_open"


async def test_a_success_resets_the_failures_in_a_row(store: Store) -> None:
    rule = limits(circuit_failures=2)
    d = store.destinations
    for job, ok in (("j1", False), ("j2", True), ("j3", False)):
        assert (await d.admit("crm", job, LEASE, rule)).admitted
        assert not (await d.release("crm", job, LEASE, healthy=ok, opens_after=2)).opened
    (state,) = await d.states()
    assert (state.failures, state.open_for) == (1, None)
