"""The records of tracked resources, their transition log, parked events and the outbox.

Resources carry ids, tenant, owner and state; outbox bodies are small JSON built from
those (:func:`hookinbox.store.decisions.outbox_row`), never from the provider's body.
Times are UTC datetimes, read from rows as in :mod:`hookinbox.store.records`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, Self, get_args

from hookinbox.store.records import Record, build, iso, no_times
from hookinbox.store.sql import DecodeTime, Row

#: What applying one event did. ``source_mismatch``: the resource is bound to other
#: sources; ``parked``: the reference is not known yet, re-checked later;
#: ``unknown_resource``: still unknown at the deadline (dead letter); ``lease_lost``:
#: another worker owns the job now, nothing was written.
Outcome = Literal[
    "applied",
    "rejected_transition",
    "source_mismatch",
    "tenant_mismatch",
    "owner_mismatch",
    "already_applied",
    "parked",
    "unknown_resource",
    "lease_lost",
]
OUTCOMES: tuple[Outcome, ...] = get_args(Outcome)
#: The refusals of an event whose sender has no claim on the resource it named: never
#: applied, and reviewed as the sender's, without naming that resource.
Mismatch = Literal["source_mismatch", "tenant_mismatch", "owner_mismatch"]
MISMATCHES: tuple[Mismatch, ...] = get_args(Mismatch)
OutboxState = Literal["pending", "sending", "sent", "failed"]
OUTBOX_STATES: tuple[OutboxState, ...] = get_args(OutboxState)


def sources_text(sources: Iterable[str]) -> str | None:
    """How a resource's sources are stored: sorted, comma-separated; None for none."""
    return ",".join(sorted(set(sources))) or None


@dataclass(frozen=True, slots=True)
class ResourceView(Record):
    id: str
    kind: str
    tenant: str
    owner: str
    state: str
    provider_ref: str | None
    version: int
    #: The sources whose events may move it; empty until the first applied event binds
    #: the resource to its sender (when it was created without).
    sources: tuple[str, ...]
    created_at: datetime
    updated_at: datetime

    @classmethod
    def from_row(cls, row: Row, decode_time: DecodeTime, **given: Any) -> Self:
        stored = row["sources"]
        return build(
            cls, row, decode_time, sources=tuple(stored.split(",")) if stored else (), **given
        )

    @property
    def bound(self) -> bool:
        return bool(self.sources)

    def as_json(self) -> dict[str, Any]:
        return {
            "resource_id": self.id,
            "kind": self.kind,
            "tenant": self.tenant,
            "owner": self.owner,
            "state": self.state,
            "provider_ref": self.provider_ref,
            "sources": list(self.sources),
            "version": self.version,
            "created_at": iso(self.created_at),
            "updated_at": iso(self.updated_at),
        }


@dataclass(frozen=True, slots=True)
class TransitionView(Record):
    """One line of the transition log: applied, rejected (with its reason), created or
    attached (a provider reference)."""

    id: int
    resource_id: str
    from_state: str | None
    to_state: str | None
    outcome: str
    reason: str | None
    delivery_id: str | None
    job_id: str | None
    event_type: str | None
    event_time: str | None
    outbox_key: str | None
    #: The source that sent the event (None on a line no event wrote, and on lines
    #: written before sources were recorded).
    source: str | None
    created_at: datetime

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "from": self.from_state,
            "to": self.to_state,
            "outcome": self.outcome,
            "reason": self.reason,
            "source": self.source,
            "delivery_id": self.delivery_id,
            "job_id": self.job_id,
            "event_type": self.event_type,
            "event_time": self.event_time,
            "outbox_key": self.outbox_key,
            "at": iso(self.created_at),
        }


@dataclass(frozen=True, slots=True)
class OutboxView(Record):
    key: str
    kind: str
    resource_id: str | None
    state: OutboxState
    attempts: int
    body: dict[str, Any]
    last_error: str | None
    next_attempt_at: datetime | None
    created_at: datetime
    updated_at: datetime
    sent_at: datetime | None
    failed_at: datetime | None

    @classmethod
    def from_row(cls, row: Row, decode_time: DecodeTime, **given: Any) -> Self:
        return build(cls, row, decode_time, body=json.loads(row["body"]), **given)

    def as_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "kind": self.kind,
            "resource_id": self.resource_id,
            "state": self.state,
            "attempts": self.attempts,
            "last_error": self.last_error,
            "next_attempt_at": iso(self.next_attempt_at) if self.state == "pending" else None,
            "created_at": iso(self.created_at),
            "updated_at": iso(self.updated_at),
            "sent_at": iso(self.sent_at),
            "failed_at": iso(self.failed_at),
            "body": self.body,
        }


@dataclass(frozen=True, slots=True)
class ClaimedOutbox:
    """An outbox row leased to one relay until its lease expires; the token proves it."""

    key: str
    kind: str
    resource_id: str | None
    body: dict[str, Any]
    attempts: int
    lease_token: str

    @classmethod
    def from_row(cls, row: Row, lease_token: str) -> ClaimedOutbox:
        return build(cls, row, no_times, body=json.loads(row["body"]), lease_token=lease_token)


@dataclass(frozen=True, slots=True)
class ResourceEvent:
    """What one delivery asks of one resource. ``tenant``/``owner`` are what the event
    claims: None when the route does not check them, ``""`` when it should but the
    event carries none (which never matches); ``tenant_pinned`` when the tenant is the
    route's literal, whatever the body says."""

    kind: str
    provider_ref: str
    target: str
    tenant: str | None
    owner: str | None
    event_type: str
    event_time: str | None
    delivery_id: str
    job_id: str
    tenant_pinned: bool = False


@dataclass(frozen=True, slots=True)
class ParkPolicy:
    """How an event whose reference is not known yet waits: until ``park_seconds`` after
    it was first parked, re-checked after ``recheck_seconds``, doubling up to the max."""

    park_seconds: float = 900.0
    recheck_seconds: float = 2.0
    recheck_max_seconds: float = 60.0


@dataclass(frozen=True, slots=True)
class ResourceOutcome:
    outcome: Outcome
    #: The resource the event was applied to or rejected by; None on a mismatch (the
    #: other party's resource is not named) or an unknown reference.
    resource_id: str | None = None
    from_state: str | None = None
    to_state: str | None = None
    reason: str | None = None
    outbox_keys: tuple[str, ...] = ()
    #: The machine the event was for (set by the store; for metrics and logs).
    kind: str | None = None


@dataclass(frozen=True, slots=True)
class ResourceFinding:
    """One thing reconciliation found that does not add up: a check name and an id."""

    check: str
    ref: str
    detail: str = ""

    def as_json(self) -> dict[str, Any]:
        return {"check": self.check, "ref": self.ref, "detail": self.detail}
