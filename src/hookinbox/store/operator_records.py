"""The records operator commands read: jobs in detail (dead letters), pause state, the
audit, reconciliation samples and the store gauges.

Built from rows as in :mod:`hookinbox.store.records` (one time type: UTC datetimes); every
``as_json`` holds ids, codes, counts and times, never a payload.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from hookinbox.store.records import JobState, Record, iso


@dataclass(frozen=True, slots=True)
class JobDetail(Record):
    """One job with its delivery's identity: what a dead-letter list, a retry or a replay
    shows."""

    id: str
    delivery_id: str
    source: str
    action: str
    state: JobState
    attempts: int
    max_attempts: int
    last_error: str | None
    trigger: str
    event_id: str
    event_type: str
    business_id: str | None
    payload_retained: bool
    created_at: datetime
    updated_at: datetime
    completed_at: datetime | None
    failed_at: datetime | None
    #: The end of the first attempt that did not complete (from the attempt history).
    first_failed_at: datetime | None
    lease_expires_at: datetime | None
    #: A dead letter of an ordered route with ``on_dead_letter = "hold"``: nothing more of
    #: its key runs until it is retried.
    holds_key: bool

    @property
    def job_id(self) -> str:
        """The id under the name the dead-letter list uses."""
        return self.id

    def as_json(self) -> dict[str, Any]:
        return {
            "job_id": self.id,
            "delivery_id": self.delivery_id,
            "source": self.source,
            "action": self.action,
            "state": self.state,
            "attempts": self.attempts,
            "max_attempts": self.max_attempts,
            "last_error": self.last_error,
            "trigger": self.trigger,
            "event_id": self.event_id,
            "type": self.event_type,
            "business_id": self.business_id,
            "payload_retained": self.payload_retained,
            "created_at": iso(self.created_at),
            "updated_at": iso(self.updated_at),
            "completed_at": iso(self.completed_at),
            "failed_at": iso(self.failed_at),
            "first_failed_at": iso(self.first_failed_at),
            "lease_expires_at": iso(self.lease_expires_at) if self.state == "processing" else None,
            "holds_key": bool(self.holds_key),
        }


#: A dead letter is a failed job in detail: the one listing gives both.
DeadLetter = JobDetail


@dataclass(frozen=True, slots=True)
class SourceState(Record):
    """Whether an operator paused a source, why, since when and who."""

    source: str
    paused: bool
    reason: str | None
    changed_at: datetime | None
    changed_by: str | None

    def as_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "paused": self.paused,
            "reason": self.reason,
            "changed_at": iso(self.changed_at),
            "changed_by": self.changed_by,
        }


@dataclass(frozen=True, slots=True)
class OperatorAction(Record):
    """One line of the operator audit: who ran which command on what."""

    at: datetime
    actor: str
    command: str
    source: str | None
    delivery_id: str | None
    job_id: str | None
    detail: str | None

    def as_json(self) -> dict[str, Any]:
        return {
            "at": iso(self.at),
            "actor": self.actor,
            "command": self.command,
            "source": self.source,
            "delivery_id": self.delivery_id,
            "job_id": self.job_id,
            "detail": self.detail,
        }


@dataclass(frozen=True, slots=True)
class Anomalies:
    """What one reconciliation query found: how many in all, and the first few."""

    count: int
    #: Up to the asked limit, each ``{"id", "delivery_id", "source", "detail", "since"}``.
    samples: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class StoreGaugeReadings:
    """One reading of the store gauges, each keyed by source (missing means 0)."""

    #: Jobs accepted (incl. scheduled retries) or processing.
    queue_depth: dict[str, int] = field(default_factory=dict)
    #: Age in seconds of the oldest due job no worker has claimed.
    lag_seconds: dict[str, float] = field(default_factory=dict)
    dead_letters: dict[str, int] = field(default_factory=dict)
    parked: dict[str, int] = field(default_factory=dict)
    #: Outbox rows waiting or being sent (pending, sending).
    outbox_unsent: dict[str, int] = field(default_factory=dict)
    #: Outbox dead letters (failed): sent again only by ``hookinbox outbox retry``.
    outbox_failed: dict[str, int] = field(default_factory=dict)
    #: Paused sources only: seconds since the pause.
    paused_seconds: dict[str, float] = field(default_factory=dict)
