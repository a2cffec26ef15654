"""The store interface: everything hookinbox keeps, behind one contract, two backends.

SQLite (embedded, one file, WAL) and PostgreSQL (production, scale-out) implement the
same methods with the same meaning; the contract tests in ``tests/store`` run against
both and never import a concrete backend. Times come from the database clock, never a
worker's, so leases and due times agree across processes and hosts. Every driver error
is wrapped where it happens: a connection failure or failed commit is
:class:`~hookinbox.errors.StoreUnavailable`, so the receiver can answer 503.
"""

from __future__ import annotations

import abc
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from hookinbox.resources.machine import StateMachine
    from hookinbox.store.metrics_records import (
        DeadLetter,
        DeliverySearch,
        StoreGaugeReadings,
    )
    from hookinbox.store.ops_records import Anomalies, JobDetail, OperatorAction, SourceState
    from hookinbox.store.resource_types import (
        ClaimedOutbox,
        Finding,
        OutboxState,
        OutboxView,
        ParkPolicy,
        ResourceEvent,
        ResourceOutcome,
        ResourceView,
        TransitionView,
    )

JobState = Literal["accepted", "processing", "completed", "failed"]
JOB_STATES: tuple[JobState, ...] = ("accepted", "processing", "completed", "failed")
DeliveryStatus = Literal["accepted", "processing", "completed", "failed"]


@dataclass(frozen=True, slots=True)
class NewJob:
    id: str
    action: str


@dataclass(frozen=True, slots=True)
class NewDelivery:
    """A verified delivery ready to be reserved, with the jobs its routes produce."""

    id: str
    source: str
    event_id: str
    event_type: str
    body_sha256: str
    body: bytes
    #: The headers a forward needs again (content type and the provider's signature headers).
    headers: dict[str, str]
    jobs: tuple[NewJob, ...]
    max_attempts: int
    #: How many identical deliveries of this event the batch folded into this one.
    seen: int = 1


@dataclass(frozen=True, slots=True)
class Reservation:
    """The answer to one reservation: accepted (first time) or duplicate."""

    outcome: Literal["accepted", "duplicate"]
    delivery_id: str
    #: A duplicate whose body hash differs from the first delivery's.
    conflict: bool = False
    #: The body hash recorded by the first delivery (to log both on a conflict).
    first_body_sha256: str = ""


@dataclass(frozen=True, slots=True)
class ClaimedJob:
    """A job leased to one worker until ``lease_expires_at``; ``lease_token`` proves it."""

    id: str
    delivery_id: str
    source: str
    action: str
    attempts: int
    max_attempts: int
    lease_token: str
    event_id: str
    event_type: str
    trigger: str
    #: None once the payload is purged.
    body: bytes | None
    headers: dict[str, str]

    @classmethod
    def from_row(cls, row: Mapping[str, Any], lease_token: str) -> ClaimedJob:
        """From a claim's row joined with its delivery and payload (both stores)."""
        return cls(
            id=row["id"],
            delivery_id=row["delivery_id"],
            source=row["source"],
            action=row["action"],
            attempts=row["attempts"],
            max_attempts=row["max_attempts"],
            lease_token=lease_token,
            event_id=row["event_id"],
            event_type=row["event_type"],
            trigger=row["trigger"],
            body=bytes(row["body"]) if row["body"] is not None else None,
            headers=json.loads(row["headers"]) if row["headers"] else {},
        )


@dataclass(frozen=True, slots=True)
class EffectRecord:
    key: str
    state: Literal["started", "recorded"]
    job_id: str | None
    result: Any
    created_at: datetime
    recorded_at: datetime | None


@dataclass(frozen=True, slots=True)
class EffectStart:
    """The answer of ``start_effect``."""

    record: EffectRecord
    #: This call wrote the ``started`` row: nobody made the effect before.
    created: bool
    #: The row was started by another job that still holds a live lease: its effect may
    #: be under way right now, so this job must not look it up or make it again yet.
    held_by_live_job: bool


@dataclass(frozen=True, slots=True)
class JobView:
    id: str
    action: str
    state: JobState
    attempts: int
    max_attempts: int
    last_error: str | None
    next_attempt_at: datetime | None
    lease_expires_at: datetime | None
    business_id: str | None
    created_at: datetime
    updated_at: datetime

    def as_json(self) -> dict[str, Any]:
        return {
            "job_id": self.id,
            "action": self.action,
            "state": self.state,
            "attempts": self.attempts,
            "max_attempts": self.max_attempts,
            "last_error": self.last_error,
            "next_attempt_at": iso(self.next_attempt_at) if self.state == "accepted" else None,
            "lease_expires_at": iso(self.lease_expires_at) if self.state == "processing" else None,
            "business_id": self.business_id,
            "created_at": iso(self.created_at),
            "updated_at": iso(self.updated_at),
        }


@dataclass(frozen=True, slots=True)
class AttemptView:
    number: int
    trigger: str
    worker: str
    started_at: datetime
    ended_at: datetime | None
    outcome: str | None
    error_code: str | None

    def as_json(self) -> dict[str, Any]:
        return {
            "number": self.number,
            "trigger": self.trigger,
            "worker": self.worker,
            "started_at": iso(self.started_at),
            "ended_at": iso(self.ended_at),
            "outcome": self.outcome,
            "error_code": self.error_code,
        }


@dataclass(frozen=True, slots=True)
class DeliveryView:
    id: str
    source: str
    event_id: str
    event_type: str
    body_sha256: str
    first_seen_at: datetime
    last_seen_at: datetime
    delivery_count: int
    conflicts: int
    payload_retained: bool
    jobs: tuple[JobView, ...] = field(default=())
    #: Set by list queries, which do not load the jobs themselves.
    job_states: tuple[JobState, ...] = field(default=())

    @property
    def status(self) -> DeliveryStatus:
        return delivery_status(self.job_states or tuple(job.state for job in self.jobs))

    def as_json(self) -> dict[str, Any]:
        return {
            "delivery_id": self.id,
            "source": self.source,
            "event_id": self.event_id,
            "type": self.event_type,
            "status": self.status,
            "first_seen_at": iso(self.first_seen_at),
            "last_seen_at": iso(self.last_seen_at),
            "delivery_count": self.delivery_count,
            "conflicts": self.conflicts,
            "body_sha256": self.body_sha256,
            "payload_retained": self.payload_retained,
            "jobs": [job.as_json() for job in self.jobs],
        }


def delivery_status(states: Sequence[JobState]) -> DeliveryStatus:
    """The contract: completed when every job is, failed when any is, processing when any
    is leased, else accepted. A delivery no route matched has nothing left to do."""
    if "failed" in states:
        return "failed"
    if "processing" in states:
        return "processing"
    if all(state == "completed" for state in states):
        return "completed"
    return "accepted"


def iso(value: datetime | None) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value is not None else None


class Store(abc.ABC):
    """What the receiver, the workers and the operator commands need from storage."""

    url: str

    # -- lifecycle ------------------------------------------------------------------
    @abc.abstractmethod
    async def open(self, *, migrate: bool = True) -> None:
        """Connect, and apply pending migrations unless told not to."""

    @abc.abstractmethod
    async def close(self) -> None: ...

    @abc.abstractmethod
    async def migrate(self) -> list[str]:
        """Apply pending numbered migrations; return the names applied."""

    @abc.abstractmethod
    async def ping(self) -> None:
        """Raise StoreUnavailable unless the store answers now."""

    # -- receiving ------------------------------------------------------------------
    @abc.abstractmethod
    async def reserve_deliveries(self, items: Sequence[NewDelivery]) -> list[Reservation]:
        """Reserve every item in ONE commit: journal row, payload and jobs for the first
        delivery of an event id, last-seen/count for a repeat. Answers in item order.
        Raises StoreUnavailable (and writes nothing) when the commit fails."""

    # -- working --------------------------------------------------------------------
    @abc.abstractmethod
    async def claim_due_jobs(
        self, worker_id: str, limit: int, lease_seconds: float
    ) -> list[ClaimedJob]:
        """Lease up to ``limit`` due jobs: accepted and due, or processing with an expired
        lease and attempts left. Each claim counts an attempt."""

    @abc.abstractmethod
    async def renew_lease(self, job_id: str, lease_token: str, lease_seconds: float) -> bool: ...

    @abc.abstractmethod
    async def _finish(
        self,
        job_id: str,
        lease_token: str,
        *,
        state: JobState,
        outcome: str,
        error_code: str | None = None,
        business_id: str | None = None,
        delay_seconds: float = 0.0,
        refund_attempt: bool = False,
    ) -> bool:
        """End the job's current attempt with ``outcome`` and move the job to ``state``,
        only while ``lease_token`` still holds its lease; False when the lease was lost.
        ``refund_attempt`` gives the attempt back (one more allowed): the job waited on
        something outside itself and did not fail."""

    async def complete_job(self, job_id: str, lease_token: str, business_id: str | None) -> bool:
        """Mark completed if the lease is still ours; False when it was lost."""
        return await self._finish(
            job_id, lease_token, state="completed", outcome="completed", business_id=business_id
        )

    async def retry_job(
        self, job_id: str, lease_token: str, error_code: str, delay_seconds: float
    ) -> bool:
        """Back to accepted, due after ``delay_seconds`` from the database clock."""
        return await self._finish(
            job_id,
            lease_token,
            state="accepted",
            outcome="retry",
            error_code=error_code,
            delay_seconds=delay_seconds,
        )

    async def defer_job(
        self, job_id: str, lease_token: str, reason: str, delay_seconds: float
    ) -> bool:
        """Back to accepted after ``delay_seconds`` without spending an attempt: the job
        waits for something outside itself (another job holding its effect's key)."""
        return await self._finish(
            job_id,
            lease_token,
            state="accepted",
            outcome="deferred",
            error_code=reason,
            delay_seconds=delay_seconds,
            refund_attempt=True,
        )

    async def fail_job(self, job_id: str, lease_token: str, error_code: str) -> bool:
        """Dead-letter the job with its error code."""
        return await self._finish(
            job_id, lease_token, state="failed", outcome="failed", error_code=error_code
        )

    @abc.abstractmethod
    async def fail_exhausted_leases(self) -> int:
        """Dead-letter jobs whose lease expired with no attempts left (their worker died on
        the last attempt); return how many."""

    @abc.abstractmethod
    async def wait_for_jobs(self, timeout: float) -> None:
        """Return when new jobs may be due (a notification) or after ``timeout``."""

    # -- effects ledger ---------------------------------------------------------------
    @abc.abstractmethod
    async def get_effect(self, key: str) -> EffectRecord | None: ...

    @abc.abstractmethod
    async def start_effect(self, key: str, job_id: str) -> EffectStart:
        """Record that ``job_id`` is about to make the effect under ``key``, unless the key
        is already known; say how the record stands now and who holds it."""

    @abc.abstractmethod
    async def record_effect(self, key: str, result: Any) -> EffectRecord:
        """Store the effect's small JSON result; the first recorded result wins."""

    # -- reading --------------------------------------------------------------------
    @abc.abstractmethod
    async def get_delivery(self, ref: str, source: str | None = None) -> DeliveryView | None:
        """A delivery with its jobs, by internal id or by event id (newest first if the
        event id exists in several sources and none is given)."""

    @abc.abstractmethod
    async def list_deliveries(
        self,
        *,
        status: DeliveryStatus | None = None,
        source: str | None = None,
        limit: int = 50,
        before: str | None = None,
    ) -> list[DeliveryView]:
        """Newest first, keyset-paginated by delivery id (``before`` = last id seen)."""

    @abc.abstractmethod
    async def list_attempts(self, job_id: str) -> list[AttemptView]:
        """Every attempt of a job, oldest first."""

    @abc.abstractmethod
    async def count_rows(self) -> dict[str, int]:
        """Row counts per table (deliveries, jobs, payloads, effects): for tests and ops."""

    # -- metrics --- (issue 6: gauges for /metrics and the admin's read-only lists) -------
    @abc.abstractmethod
    async def read_store_gauges(self) -> StoreGaugeReadings:
        """Per source: unfinished jobs, the age of the oldest due unclaimed job, dead
        letters, parked events, unsent outbox rows, and how long it has been paused. A
        table a later migration adds reads as 0 until it exists."""

    @abc.abstractmethod
    async def deliveries_per_minute(self, since: float) -> list[tuple[str, int, int]]:
        """``(source, minute since the epoch, deliveries accepted)`` since a unix time."""

    @abc.abstractmethod
    async def search_deliveries(self, query: DeliverySearch) -> list[DeliveryView]:
        """A keyset page of the journal, newest first (never OFFSET)."""

    @abc.abstractmethod
    async def list_dead_letters(
        self,
        *,
        source: str | None = None,
        reason: str | None = None,
        before: str | None = None,
        limit: int = 50,
    ) -> list[DeadLetter]:
        """Failed jobs, newest job id first, keyset-paginated by job id."""

    @abc.abstractmethod
    async def dead_letter_reasons(self) -> list[tuple[str, str, str, int]]:
        """``(source, action, last error code, failed jobs)``, largest group first."""

    @abc.abstractmethod
    async def read_payload(self, delivery_id: str) -> bytes | None:
        """The raw body while it is retained, else None (for the admin's explicit view)."""

    # -- end metrics ---

    # -- operators --- (issue 3: dead letters, replay, purge, reconcile, pause, trace) ----
    @abc.abstractmethod
    async def get_job(self, job_id: str) -> JobDetail | None:
        """One job with its delivery's identity, or None."""

    @abc.abstractmethod
    async def list_failed_jobs(
        self,
        *,
        source: str | None = None,
        since: datetime | None = None,
        limit: int = 50,
        oldest_first: bool = False,
    ) -> list[JobDetail]:
        """Dead letters (state ``failed``), newest failure first unless ``oldest_first``;
        ``since`` keeps those that failed at or after it."""

    @abc.abstractmethod
    async def requeue_jobs(
        self,
        job_ids: Sequence[str],
        *,
        from_states: Sequence[JobState],
        trigger: str,
        max_attempts: int,
        actor: str,
        command: str,
    ) -> list[str]:
        """Atomically put back to ``accepted`` (due now, attempts reset, ``trigger`` set for
        the next claim) those of ``job_ids`` that are in one of ``from_states`` right now;
        audit each as ``command`` by ``actor``; wake the workers. Returns the ids moved."""

    @abc.abstractmethod
    async def supersede_effects(self, job_ids: Sequence[str], *, actor: str) -> list[str]:
        """Move the ledger rows made by these jobs to ``effects_superseded`` so the next run
        makes its effects again (``replay --force-effects``); return their keys."""

    @abc.abstractmethod
    async def list_effects(self, job_ids: Sequence[str]) -> list[EffectRecord]:
        """Ledger rows started by these jobs, oldest first."""

    @abc.abstractmethod
    async def find_deliveries_by_event(
        self, event_id: str, source: str | None = None
    ) -> list[DeliveryView]:
        """Every delivery (with its jobs) of an event id, in every source unless given."""

    @abc.abstractmethod
    async def record_operator_action(
        self,
        *,
        actor: str,
        command: str,
        source: str | None = None,
        delivery_id: str | None = None,
        job_id: str | None = None,
        detail: str | None = None,
    ) -> None: ...

    @abc.abstractmethod
    async def list_operator_actions(
        self, *, delivery_id: str | None = None, limit: int = 100
    ) -> list[OperatorAction]:
        """The audit, oldest first (of one delivery and its jobs when given)."""

    @abc.abstractmethod
    async def list_source_states(self) -> list[SourceState]:
        """Every source an operator ever paused or resumed."""

    @abc.abstractmethod
    async def set_source_paused(
        self, source: str, *, paused: bool, reason: str | None, actor: str
    ) -> SourceState:
        """Pause or resume a source (and audit it); every receiver sees it on refresh."""

    @abc.abstractmethod
    async def count_purgeable_payloads(self, older_than_seconds: float) -> int:
        """Payloads of deliveries whose jobs all completed more than this long ago (or
        that had no job and were first seen that long ago)."""

    @abc.abstractmethod
    async def purge_payloads(self, older_than_seconds: float, limit: int) -> int:
        """Delete up to ``limit`` of those payloads in one transaction; return how many."""

    @abc.abstractmethod
    async def count_purgeable_deliveries(self, older_than_seconds: float) -> tuple[int, int]:
        """``(purgeable, held)``: journal rows last seen more than this long ago whose jobs
        all completed, and those as old but kept because a job is unfinished or failed."""

    @abc.abstractmethod
    async def purge_deliveries(self, older_than_seconds: float, limit: int) -> int:
        """Delete up to ``limit`` purgeable journal rows with their jobs, attempts, payloads
        and ledger rows, in one transaction; return how many deliveries went."""

    @abc.abstractmethod
    async def find_anomalies(
        self, check: str, *, older_than_seconds: float = 0.0, limit: int = 20
    ) -> Anomalies:
        """Run one named reconciliation query (see ``ANOMALY_CHECKS`` in the store ops
        modules): ``expired_leases``, ``stale_accepted``, ``failed_past_review``,
        ``deliveries_without_jobs`` (samples grouped by source and type),
        ``unrecorded_effects``."""

    # -- end operators ---

    # -- resources --- (issue 4: tracked resources, transitions, parked events, outbox) --
    @abc.abstractmethod
    async def create_resource(
        self,
        resource_id: str,
        kind: str,
        *,
        tenant: str,
        owner: str,
        state: str,
        provider_ref: str | None = None,
    ) -> ResourceView:
        """Insert a resource in its initial state (logged as ``created``); a provider
        reference already held by another resource of the kind is OperationRefused.
        Parked events waiting for that reference become due now."""

    @abc.abstractmethod
    async def attach_provider_ref(self, resource_id: str, provider_ref: str) -> ResourceView:
        """Set the provider reference once (the same one again is a no-op); a different
        one, or one another resource holds, is OperationRefused; unknown id is NotFound.
        Parked events waiting for it become due now, in the same commit."""

    @abc.abstractmethod
    async def get_resource(self, resource_id: str) -> ResourceView | None: ...

    @abc.abstractmethod
    async def find_resource(self, kind: str, provider_ref: str) -> ResourceView | None: ...

    @abc.abstractmethod
    async def list_resources(
        self,
        *,
        kind: str | None = None,
        tenant: str | None = None,
        state: str | None = None,
        limit: int = 50,
        before: str | None = None,
    ) -> list[ResourceView]:
        """Newest first, keyset-paginated by resource id."""

    @abc.abstractmethod
    async def list_transitions(self, resource_id: str) -> list[TransitionView]:
        """The resource's transition log, oldest first."""

    @abc.abstractmethod
    async def list_delivery_transitions(self, delivery_id: str) -> list[TransitionView]:
        """The transition log lines one delivery wrote (applied or rejected, on any
        resource), oldest first: for the trace of that delivery."""

    @abc.abstractmethod
    async def apply_resource_event(
        self,
        job_id: str,
        lease_token: str,
        source: str,
        event: ResourceEvent,
        machine: StateMachine,
        park: ParkPolicy,
    ) -> ResourceOutcome:
        """In ONE transaction, with the job's lease checked: find the resource by
        reference (locked), check tenant and owner, judge the transition, write it (or
        its rejection) to the log, insert the outbox rows it produces and complete the
        job; or park the job (unknown reference) or dead-letter it at the park deadline
        (``unknown_resource``). ``lease_lost`` writes nothing."""

    @abc.abstractmethod
    async def reserve_inline(
        self,
        item: NewDelivery,
        applies: Sequence[tuple[ResourceEvent, StateMachine, ParkPolicy]],
    ) -> tuple[Reservation, list[ResourceOutcome]]:
        """``reserve_deliveries`` for one delivery, plus each of ``applies`` (one per
        inline resource job of the delivery) in the SAME commit: so a 2xx means the
        transition is durable. A duplicate applies nothing."""

    @abc.abstractmethod
    async def claim_outbox(
        self, worker_id: str, limit: int, lease_seconds: float, max_attempts: int
    ) -> list[ClaimedOutbox]:
        """Lease due outbox rows (pending and due, or sending with an expired lease and
        attempts left); each claim counts an attempt. Rows whose lease expired on their
        last attempt are dead-lettered (``lease_expired``)."""

    @abc.abstractmethod
    async def finish_outbox(
        self,
        key: str,
        lease_token: str,
        state: OutboxState,
        *,
        error_code: str | None = None,
        delay_seconds: float = 0.0,
    ) -> bool:
        """``sent``, back to ``pending`` after ``delay_seconds``, or ``failed``; only with
        the lease token. False when the lease was lost."""

    @abc.abstractmethod
    async def renew_outbox_lease(self, key: str, lease_token: str, lease_seconds: float) -> bool:
        """Extend a row's lease while it is being sent; False when the lease was lost."""

    @abc.abstractmethod
    async def requeue_outbox(self, key: str, *, only_failed: bool) -> OutboxView:
        """Send an existing row again, due now, attempts reset (the resource is not
        touched). ``only_failed``: refuse a row that is not a dead letter. NotFound."""

    @abc.abstractmethod
    async def get_outbox(self, key: str) -> OutboxView | None: ...

    @abc.abstractmethod
    async def list_outbox(
        self,
        *,
        state: OutboxState | None = None,
        kind: str | None = None,
        limit: int = 50,
    ) -> list[OutboxView]:
        """Newest first."""

    @abc.abstractmethod
    async def resource_findings(
        self,
        machines: Sequence[StateMachine],
        *,
        outbox_unsent_seconds: float,
        limit: int = 100,
    ) -> list[Finding]:
        """Reconciliation: ``terminal_without_delivery`` (a terminal resource no
        delivery's applied transition moved), ``transition_without_outbox``,
        ``outbox_unsent`` (pending or sending longer than the threshold) and
        ``parked_past_deadline``."""

    @abc.abstractmethod
    async def transition_counts(self) -> dict[str, int]:
        """Transition log lines per outcome (``applied``) or rejection reason
        (``rejected:from_terminal``, ``rejected:tenant_mismatch``...): for metrics."""

    # -- end resources ---
