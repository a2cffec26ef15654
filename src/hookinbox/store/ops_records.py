"""Records the operator commands read from a store: jobs in detail, pause state, audit.

They live apart from :mod:`hookinbox.store.base` so the receiving and working contract
stays small; both stores build them, :mod:`hookinbox.ops` hands them to the CLI and the
admin page. Every ``as_json`` holds ids, codes and times only, never a payload.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from hookinbox.store.base import JobState, iso


@dataclass(frozen=True, slots=True)
class JobDetail:
    """One job with its delivery's identity: what a dead-letter view or a replay shows."""

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
        }


@dataclass(frozen=True, slots=True)
class SourceState:
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
class OperatorAction:
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
