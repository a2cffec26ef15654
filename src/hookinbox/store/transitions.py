"""Applying one event to its resource: the transaction both stores run, written once.

In the caller's transaction (a worker's, with the job's lease checked, or the receiver's
inline reservation): lock the resource row (PostgreSQL ``FOR UPDATE``; SQLite's write
lock already serializes), check source, tenant and owner, let the machine judge the
transition (the first one applied binds a resource created without sources to its sender),
write it or its rejection to the log with the outbox row it produces, and settle the job;
an unknown reference parks the job instead, until its deadline dead-letters it. The
decisions are :mod:`hookinbox.store.decisions`; here are only the reads and writes.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Any

from hookinbox.codes import RECEIVER, Trigger
from hookinbox.errors import StoreError
from hookinbox.store.decisions import (
    TransitionRules,
    claim_mismatch,
    job_settlement,
    line_tenant,
    outbox_row,
    park_due,
)
from hookinbox.store.resource_records import ParkPolicy, ResourceEvent, ResourceOutcome
from hookinbox.store.sql import DecodeTime, Tx, count, row
from hookinbox.store.statements import load_statements

_SQL = load_statements("transitions")
END_LEASED_ATTEMPT = _SQL["end_leased_attempt"]
_FIND = _SQL["find"]
LOG = _SQL["log"]
_APPLIED_BEFORE = _SQL["applied_before"]
_MOVE = _SQL["move"]
_NOTIFY = _SQL["notify"]
_PARK_AGAIN = _SQL["park_again"]
_PARK = _SQL["park"]
_UNPARK = _SQL["unpark"]
_SETTLE = _SQL["settle"]
_FIRST_ATTEMPT = _SQL["first_attempt"]
_RECEIVER_ATTEMPT = _SQL["receiver_attempt"]


def log_params(resource_id: str, from_state: str | None, to_state: str | None) -> dict[str, Any]:
    """A transition log line with no event behind it (created, attached)."""
    return {
        "resource_id": resource_id,
        "from_state": from_state,
        "to_state": to_state,
        "reason": None,
        "delivery_id": None,
        "job_id": None,
        "event_type": None,
        "event_time": None,
        "outbox_key": None,
        "source": None,
        "tenant": None,
    }


def apply_event(
    source: str, ev: ResourceEvent, rules: TransitionRules
) -> Tx[ResourceOutcome | None]:
    """Judge and write one event; None when no resource holds its reference (yet)."""
    found = yield row(_FIND, kind=ev.kind, ref=ev.provider_ref)
    if found is None:
        return None
    resource_id, current = found["id"], found["state"]
    log = {
        **log_params(resource_id, current, ev.target),
        "delivery_id": ev.delivery_id,
        "job_id": ev.job_id,
        "event_type": ev.event_type,
        "event_time": ev.event_time,
    }
    mismatch = claim_mismatch(source, ev, found)
    log.update(source=source, tenant=line_tenant(ev, found, mismatch))
    if mismatch is not None:
        yield count(LOG, **{**log, "outcome": "rejected", "reason": mismatch})
        return ResourceOutcome(mismatch)
    earlier = yield row(_APPLIED_BEFORE, resource_id=resource_id, delivery_id=ev.delivery_id)
    if earlier is not None:
        keys = (earlier["outbox_key"],) if earlier["outbox_key"] else ()
        return ResourceOutcome("already_applied", resource_id, current, current, None, keys)
    reason = rules.judge(current, ev.target)
    if reason is not None:
        yield count(LOG, **{**log, "outcome": "rejected", "reason": reason})
        return ResourceOutcome("rejected_transition", resource_id, current, ev.target, reason)
    moved = yield count(
        _MOVE, id=resource_id, state=ev.target, source=source, version=found["version"]
    )
    if moved != 1:  # pragma: no cover - the row is locked (or the write lock held)
        raise StoreError("the resource changed under its lock")
    keys = ()
    kind = rules.notify.get(ev.target)
    if kind is not None:
        key, body = outbox_row(kind, found, current, ev.target)
        yield count(_NOTIFY, key=key, kind=kind, source=source, resource_id=resource_id, body=body)
        keys, log["outbox_key"] = (key,), key
    yield count(LOG, **log, outcome="applied")
    return ResourceOutcome("applied", resource_id, current, ev.target, None, keys)


def park(
    job_id: str, source: str, ev: ResourceEvent, policy: ParkPolicy, decode_time: DecodeTime
) -> Tx[datetime | None]:
    """Record (or count again) the job's wait for its reference; when it is looked at
    next, or None once its deadline has passed."""
    parked = yield row(_PARK_AGAIN, job_id=job_id)
    if parked is None:
        parked = yield row(
            _PARK,
            job_id=job_id,
            source=source,
            kind=ev.kind,
            ref=ev.provider_ref,
            park=float(policy.park_seconds),
        )
    now, deadline = decode_time(parked["now"]), decode_time(parked["deadline"])
    assert now is not None and deadline is not None
    return park_due(int(parked["checks"]), now, deadline, policy)


def settle(
    job_id: str, outcome: ResourceOutcome, due: datetime | None, *, leased: bool
) -> Tx[None]:
    """Write what the outcome means for the job, in the same transaction. A re-check of a
    parked event gives its attempt back: waiting does not spend the retry budget."""
    state, error, attempt = job_settlement(outcome.outcome)
    if state != "accepted":
        yield count(_UNPARK, job_id=job_id)
    if leased:
        # Written from the lease, so before the job's update clears it.
        yield count(END_LEASED_ATTEMPT, id=job_id, outcome=attempt, error=error)
    yield count(
        _SETTLE,
        id=job_id,
        state=state,
        error=error,
        business_id=outcome.resource_id,
        due=due,
        extra=1 if leased and state == "accepted" else 0,
    )
    if not leased and state != "accepted":
        # Applied inside the receiver's commit: the attempt is the receiver's own.
        yield count(_FIRST_ATTEMPT, id=job_id)
        yield count(
            _RECEIVER_ATTEMPT,
            id=job_id,
            trigger=Trigger.DELIVERY,
            worker=RECEIVER,
            outcome=attempt,
            error=error,
        )


def apply_or_park(
    job_id: str,
    source: str,
    ev: ResourceEvent,
    rules: TransitionRules,
    policy: ParkPolicy,
    decode_time: DecodeTime,
    *,
    leased: bool,
) -> Tx[ResourceOutcome]:
    """The whole of one event: applied (or refused), or parked, and the job settled."""
    outcome = yield from apply_event(source, ev, rules)
    due = None
    if outcome is None:
        due = yield from park(job_id, source, ev, policy, decode_time)
        outcome = ResourceOutcome("parked" if due is not None else "unknown_resource")
    yield from settle(job_id, outcome, due, leased=leased)
    return replace(outcome, kind=ev.kind)
