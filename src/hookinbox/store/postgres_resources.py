"""PostgreSQL: tracked resources, the transition log, parked events and the outbox.

A mixin of :class:`~hookinbox.store.postgres.PostgresStore`. Applying an event is one
transaction: the job row is locked and its lease checked, the resource row is locked
(``SELECT ... FOR UPDATE``), so two workers applying events for the same resource run one
after the other and the second sees the first one's state; the transition, its outbox rows
and the job's completion commit together. The relay claims outbox rows with
``FOR UPDATE SKIP LOCKED``, like the workers claim jobs.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import replace
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import asyncpg

from hookinbox.errors import NotFound, OperationRefused
from hookinbox.resources.machine import StateMachine
from hookinbox.store.base import NewDelivery, Reservation
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
from hookinbox.store.sqlite_resources import outbox_body

_LOG = """
INSERT INTO resource_transitions (resource_id, from_state, to_state, outcome, reason,
    delivery_id, job_id, event_type, event_time, outbox_key)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
"""

_WAKE_PARKED = """
WITH woken AS (
    UPDATE jobs SET next_attempt_at = now(), updated_at = now()
    WHERE state = 'accepted' AND id IN (
        SELECT job_id FROM parked_events WHERE kind = $1 AND provider_ref = $2)
    RETURNING id
)
SELECT pg_notify('hookinbox_jobs', '') FROM (SELECT 1 FROM woken LIMIT 1) AS any_woken
"""

_JOB_SETTLE = """
UPDATE jobs
SET state = $2, last_error = $3, business_id = coalesce($4, business_id),
    next_attempt_at = coalesce($5::timestamptz, next_attempt_at),
    max_attempts = max_attempts + $6,
    completed_at = CASE WHEN $2 = 'completed' THEN now() ELSE completed_at END,
    failed_at = CASE WHEN $2 = 'failed' THEN now() ELSE failed_at END,
    lease_token = NULL, leased_by = NULL, lease_expires_at = NULL, updated_at = now()
WHERE id = $1
"""

_OUTBOX_EXHAUSTED = """
UPDATE outbox
SET state = 'failed', last_error = 'lease_expired', failed_at = now(), lease_token = NULL,
    leased_by = NULL, lease_expires_at = NULL, updated_at = now()
WHERE state = 'sending' AND lease_expires_at < now() AND attempts >= $1
"""

_OUTBOX_CLAIM = """
WITH due AS (
    SELECT key FROM outbox
    WHERE (state = 'pending' AND next_attempt_at <= now())
       OR (state = 'sending' AND lease_expires_at < now() AND attempts < $4)
    ORDER BY next_attempt_at
    LIMIT $1
    FOR UPDATE SKIP LOCKED
)
UPDATE outbox o
SET state = 'sending', attempts = o.attempts + 1, lease_token = $2, leased_by = $3,
    lease_expires_at = now() + make_interval(secs => $5), updated_at = now()
FROM due WHERE o.key = due.key
RETURNING o.key, o.kind, o.resource_id, o.body, o.attempts
"""

_OUTBOX_FINISH = """
UPDATE outbox
SET state = $3, last_error = coalesce($4, last_error),
    next_attempt_at = now() + make_interval(secs => $5),
    sent_at = CASE WHEN $3 = 'sent' THEN now() ELSE sent_at END,
    failed_at = CASE WHEN $3 = 'failed' THEN now() ELSE failed_at END,
    lease_token = NULL, leased_by = NULL, lease_expires_at = NULL, updated_at = now()
WHERE key = $1 AND lease_token = $2 AND state = 'sending'
"""

_REF_TAKEN = "a resource of this kind already holds that provider reference"


def _resource(row: Any) -> ResourceView:
    return ResourceView(
        id=row["id"],
        kind=row["kind"],
        tenant=row["tenant"],
        owner=row["owner"],
        state=row["state"],
        provider_ref=row["provider_ref"],
        version=row["version"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


def _transition(r: Any) -> TransitionView:
    return TransitionView(
        id=r["id"],
        resource_id=r["resource_id"],
        from_state=r["from_state"],
        to_state=r["to_state"],
        outcome=r["outcome"],
        reason=r["reason"],
        delivery_id=r["delivery_id"],
        job_id=r["job_id"],
        event_type=r["event_type"],
        event_time=r["event_time"],
        outbox_key=r["outbox_key"],
        created_at=r["created_at"],
    )


def _outbox(row: Any) -> OutboxView:
    return OutboxView(
        key=row["key"],
        kind=row["kind"],
        resource_id=row["resource_id"],
        state=row["state"],
        attempts=row["attempts"],
        body=json.loads(row["body"]),
        last_error=row["last_error"],
        next_attempt_at=row["next_attempt_at"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        sent_at=row["sent_at"],
        failed_at=row["failed_at"],
    )


async def _log(
    conn: asyncpg.Connection,
    resource_id: str,
    from_state: str | None,
    to_state: str | None,
    outcome: str,
    reason: str | None = None,
    ev: ResourceEvent | None = None,
    outbox_key: str | None = None,
) -> None:
    await conn.execute(
        _LOG,
        resource_id,
        from_state,
        to_state,
        outcome,
        reason,
        ev.delivery_id if ev else None,
        ev.job_id if ev else None,
        ev.event_type if ev else None,
        ev.event_time if ev else None,
        outbox_key,
    )


async def _apply(
    conn: asyncpg.Connection, source: str, ev: ResourceEvent, machine: StateMachine
) -> ResourceOutcome | None:
    """Judge and write one event inside the caller's transaction; None: unknown ref."""
    row = await conn.fetchrow(
        "SELECT * FROM resources WHERE kind = $1 AND provider_ref = $2 FOR UPDATE",
        ev.kind,
        ev.provider_ref,
    )
    if row is None:
        return None
    for claimed, actual, code in (
        (ev.tenant, row["tenant"], "tenant_mismatch"),
        (ev.owner, row["owner"], "owner_mismatch"),
    ):
        if claimed is not None and claimed != actual:
            await _log(conn, row["id"], row["state"], ev.target, "rejected", code, ev)
            return ResourceOutcome(code)  # type: ignore[arg-type]
    done = await conn.fetchrow(
        "SELECT outbox_key FROM resource_transitions WHERE resource_id = $1"
        " AND delivery_id = $2 AND outcome = 'applied' LIMIT 1",
        row["id"],
        ev.delivery_id,
    )
    if done is not None:
        earlier = (done["outbox_key"],) if done["outbox_key"] else ()
        return ResourceOutcome(
            "already_applied", row["id"], row["state"], row["state"], None, earlier
        )
    reason = machine.judge(row["state"], ev.target)
    if reason is not None:
        await _log(conn, row["id"], row["state"], ev.target, "rejected", reason, ev)
        return ResourceOutcome("rejected_transition", row["id"], row["state"], ev.target, reason)
    await conn.execute(
        "UPDATE resources SET state = $1, version = version + 1, updated_at = now() WHERE id = $2",
        ev.target,
        row["id"],
    )
    keys: tuple[str, ...] = ()
    key = None
    outbox_kind = machine.notify.get(ev.target)
    if outbox_kind is not None:
        key = f"{outbox_kind}:{row['id']}"
        await conn.execute(
            "INSERT INTO outbox (key, kind, source, resource_id, body)"
            " VALUES ($1, $2, $3, $4, $5) ON CONFLICT (key) DO NOTHING",
            key,
            outbox_kind,
            source,
            row["id"],
            outbox_body(key, outbox_kind, row, row["state"], ev.target),
        )
        keys = (key,)
    await _log(conn, row["id"], row["state"], ev.target, "applied", None, ev, key)
    return ResourceOutcome("applied", row["id"], row["state"], ev.target, None, keys)


async def _park(
    conn: asyncpg.Connection, job_id: str, source: str, ev: ResourceEvent, park: ParkPolicy
) -> tuple[str, Any]:
    row = await conn.fetchrow(
        "UPDATE parked_events SET checks = checks + 1 WHERE job_id = $1"
        " RETURNING checks, deadline, now() AS now",
        job_id,
    )
    if row is None:
        row = await conn.fetchrow(
            "INSERT INTO parked_events (job_id, source, kind, provider_ref, deadline)"
            " VALUES ($1, $2, $3, $4, now() + make_interval(secs => $5))"
            " RETURNING checks, deadline, now() AS now",
            job_id,
            source,
            ev.kind,
            ev.provider_ref,
            float(park.park_seconds),
        )
    if row["now"] >= row["deadline"]:
        await conn.execute("DELETE FROM parked_events WHERE job_id = $1", job_id)
        return "unknown_resource", None
    delay = min(park.recheck_max_seconds, park.recheck_seconds * 2 ** (row["checks"] - 1))
    return "parked", min(row["now"] + timedelta(seconds=delay), row["deadline"])


async def _settle_job(
    conn: asyncpg.Connection, job_id: str, outcome: ResourceOutcome, due: Any, *, leased: bool
) -> None:
    error: str | None
    if outcome.outcome == "parked":
        state, error, attempt_outcome = "accepted", "parked", "parked"
    else:
        if outcome.outcome == "unknown_resource":
            state, error, attempt_outcome = "failed", "unknown_resource", "failed"
        else:
            state, attempt_outcome = "completed", "completed"
            error = None if outcome.outcome == "applied" else outcome.outcome
        await conn.execute("DELETE FROM parked_events WHERE job_id = $1", job_id)
    extra = 1 if leased and state == "accepted" else 0
    await conn.execute(_JOB_SETTLE, job_id, state, error, outcome.resource_id, due, extra)
    if leased:
        await conn.execute(
            "UPDATE attempts SET ended_at = now(), outcome = $2, error_code = $3"
            " WHERE job_id = $1 AND ended_at IS NULL",
            job_id,
            attempt_outcome,
            error,
        )
    elif state != "accepted":
        await conn.execute("UPDATE jobs SET attempts = 1 WHERE id = $1", job_id)
        await conn.execute(
            "INSERT INTO attempts (job_id, number, trigger, worker, ended_at, outcome,"
            " error_code) VALUES ($1, 1, 'delivery', 'receiver', now(), $2, $3)",
            job_id,
            attempt_outcome,
            error,
        )


class PostgresResourcesMixin:
    if TYPE_CHECKING:

        def _conn(self) -> AbstractAsyncContextManager[asyncpg.Connection]: ...

    # -- resources ------------------------------------------------------------------
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
        async with self._conn() as conn, conn.transaction():
            row = await conn.fetchrow(
                "INSERT INTO resources (id, kind, tenant, owner, state, provider_ref)"
                " VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING RETURNING *",
                resource_id,
                kind,
                tenant,
                owner,
                state,
                provider_ref,
            )
            if row is None:
                raise OperationRefused(_REF_TAKEN)
            await _log(conn, resource_id, None, state, "created")
            if provider_ref is not None:
                await conn.fetch(_WAKE_PARKED, kind, provider_ref)
        return _resource(row)

    async def attach_provider_ref(self, resource_id: str, provider_ref: str) -> ResourceView:
        async with self._conn() as conn, conn.transaction():
            row = await conn.fetchrow(
                "SELECT * FROM resources WHERE id = $1 FOR UPDATE", resource_id
            )
            if row is None:
                raise NotFound(f"no resource {resource_id!r}")
            if row["provider_ref"] == provider_ref:
                return _resource(row)
            if row["provider_ref"] is not None:
                raise OperationRefused("the resource already has another provider reference")
            try:
                async with conn.transaction():
                    updated = await conn.fetchrow(
                        "UPDATE resources SET provider_ref = $2, version = version + 1,"
                        " updated_at = now() WHERE id = $1 RETURNING *",
                        resource_id,
                        provider_ref,
                    )
            except asyncpg.UniqueViolationError:
                # The one place a taken reference becomes a domain error.
                raise OperationRefused(_REF_TAKEN) from None
            await _log(conn, resource_id, row["state"], row["state"], "attached")
            await conn.fetch(_WAKE_PARKED, row["kind"], provider_ref)
        return _resource(updated)

    async def get_resource(self, resource_id: str) -> ResourceView | None:
        async with self._conn() as conn:
            row = await conn.fetchrow("SELECT * FROM resources WHERE id = $1", resource_id)
        return _resource(row) if row else None

    async def find_resource(self, kind: str, provider_ref: str) -> ResourceView | None:
        async with self._conn() as conn:
            row = await conn.fetchrow(
                "SELECT * FROM resources WHERE kind = $1 AND provider_ref = $2", kind, provider_ref
            )
        return _resource(row) if row else None

    async def list_resources(
        self,
        *,
        kind: str | None = None,
        tenant: str | None = None,
        state: str | None = None,
        limit: int = 50,
        before: str | None = None,
    ) -> list[ResourceView]:
        async with self._conn() as conn:
            rows = await conn.fetch(
                "SELECT * FROM resources WHERE ($1::text IS NULL OR kind = $1)"
                " AND ($2::text IS NULL OR tenant = $2) AND ($3::text IS NULL OR state = $3)"
                " AND ($4::text IS NULL OR id < $4) ORDER BY id DESC LIMIT $5",
                kind,
                tenant,
                state,
                before,
                limit,
            )
        return [_resource(r) for r in rows]

    async def list_transitions(self, resource_id: str) -> list[TransitionView]:
        async with self._conn() as conn:
            rows = await conn.fetch(
                "SELECT * FROM resource_transitions WHERE resource_id = $1 ORDER BY id",
                resource_id,
            )
        return [_transition(r) for r in rows]

    async def list_delivery_transitions(self, delivery_id: str) -> list[TransitionView]:
        async with self._conn() as conn:
            rows = await conn.fetch(
                "SELECT * FROM resource_transitions WHERE delivery_id = $1 ORDER BY id",
                delivery_id,
            )
        return [_transition(r) for r in rows]

    # -- applying events ------------------------------------------------------------
    async def apply_resource_event(
        self,
        job_id: str,
        lease_token: str,
        source: str,
        event: ResourceEvent,
        machine: StateMachine,
        park: ParkPolicy,
    ) -> ResourceOutcome:
        async with self._conn() as conn, conn.transaction():
            ours = await conn.fetchrow(
                "SELECT 1 FROM jobs WHERE id = $1 AND lease_token = $2 AND state = 'processing'"
                " FOR UPDATE",
                job_id,
                lease_token,
            )
            if ours is None:
                return ResourceOutcome("lease_lost")
            outcome = await _apply(conn, source, event, machine)
            due = None
            if outcome is None:
                code, due = await _park(conn, job_id, source, event, park)
                outcome = ResourceOutcome(code)  # type: ignore[arg-type]
            await _settle_job(conn, job_id, outcome, due, leased=True)
        return replace(outcome, kind=event.kind)

    async def reserve_inline(
        self,
        item: NewDelivery,
        applies: Sequence[tuple[ResourceEvent, StateMachine, ParkPolicy]],
    ) -> tuple[Reservation, list[ResourceOutcome]]:
        async with self._conn() as conn, conn.transaction():
            inserted = await conn.fetchval(
                "INSERT INTO deliveries (id, source, event_id, event_type, body_sha256,"
                " delivery_count) VALUES ($1, $2, $3, $4, $5, $6)"
                " ON CONFLICT (source, event_id) DO NOTHING RETURNING id",
                item.id,
                item.source,
                item.event_id,
                item.event_type,
                item.body_sha256,
                item.seen,
            )
            if inserted is None:
                first = await conn.fetchrow(
                    "UPDATE deliveries SET last_seen_at = now(),"
                    " delivery_count = delivery_count + $3,"
                    " conflicts = conflicts + $3 * (body_sha256 <> $4)::int"
                    " WHERE source = $1 AND event_id = $2 RETURNING id, body_sha256",
                    item.source,
                    item.event_id,
                    item.seen,
                    item.body_sha256,
                )
                conflict = first["body_sha256"] != item.body_sha256
                return Reservation("duplicate", first["id"], conflict, first["body_sha256"]), []
            await conn.execute(
                "INSERT INTO payloads (delivery_id, body, headers) VALUES ($1, $2, $3)",
                item.id,
                item.body,
                json.dumps(item.headers),
            )
            await conn.executemany(
                "INSERT INTO jobs (id, delivery_id, source, action, max_attempts)"
                " VALUES ($1, $2, $3, $4, $5)",
                [
                    (job.id, item.id, item.source, job.action, item.max_attempts)
                    for job in item.jobs
                ],
            )
            outcomes = []
            for event, machine, park in applies:
                outcome = await _apply(conn, item.source, event, machine)
                due = None
                if outcome is None:
                    code, due = await _park(conn, event.job_id, item.source, event, park)
                    outcome = ResourceOutcome(code)  # type: ignore[arg-type]
                await _settle_job(conn, event.job_id, outcome, due, leased=False)
                outcomes.append(replace(outcome, kind=event.kind))
            await conn.execute("SELECT pg_notify('hookinbox_jobs', '')")
        return Reservation("accepted", item.id), outcomes

    # -- outbox ---------------------------------------------------------------------
    async def claim_outbox(
        self, worker_id: str, limit: int, lease_seconds: float, max_attempts: int
    ) -> list[ClaimedOutbox]:
        token = secrets.token_hex(8)
        async with self._conn() as conn, conn.transaction():
            await conn.execute(_OUTBOX_EXHAUSTED, max_attempts)
            rows = await conn.fetch(
                _OUTBOX_CLAIM, limit, token, worker_id, max_attempts, float(lease_seconds)
            )
        return [
            ClaimedOutbox(
                key=r["key"],
                kind=r["kind"],
                resource_id=r["resource_id"],
                body=json.loads(r["body"]),
                attempts=r["attempts"],
                lease_token=token,
            )
            for r in rows
        ]

    async def finish_outbox(
        self,
        key: str,
        lease_token: str,
        state: OutboxState,
        *,
        error_code: str | None = None,
        delay_seconds: float = 0.0,
    ) -> bool:
        async with self._conn() as conn:
            status = await conn.execute(
                _OUTBOX_FINISH, key, lease_token, state, error_code, float(delay_seconds)
            )
        return bool(status.endswith(" 1"))

    async def renew_outbox_lease(self, key: str, lease_token: str, lease_seconds: float) -> bool:
        async with self._conn() as conn:
            status = await conn.execute(
                "UPDATE outbox SET lease_expires_at = now() + make_interval(secs => $3)"
                " WHERE key = $1 AND lease_token = $2 AND state = 'sending'",
                key,
                lease_token,
                float(lease_seconds),
            )
        return bool(status.endswith(" 1"))

    async def requeue_outbox(self, key: str, *, only_failed: bool) -> OutboxView:
        async with self._conn() as conn, conn.transaction():
            row = await conn.fetchrow("SELECT state FROM outbox WHERE key = $1 FOR UPDATE", key)
            if row is None:
                raise NotFound(f"no outbox row {key!r}")
            if only_failed and row["state"] != "failed":
                raise OperationRefused(f"outbox row is {row['state']}, not failed")
            if row["state"] == "sending":
                raise OperationRefused("outbox row is being sent right now")
            updated = await conn.fetchrow(
                "UPDATE outbox SET state = 'pending', attempts = 0, next_attempt_at = now(),"
                " failed_at = NULL, updated_at = now() WHERE key = $1 RETURNING *",
                key,
            )
        return _outbox(updated)

    async def get_outbox(self, key: str) -> OutboxView | None:
        async with self._conn() as conn:
            row = await conn.fetchrow("SELECT * FROM outbox WHERE key = $1", key)
        return _outbox(row) if row else None

    async def list_outbox(
        self,
        *,
        state: OutboxState | None = None,
        kind: str | None = None,
        limit: int = 50,
    ) -> list[OutboxView]:
        async with self._conn() as conn:
            rows = await conn.fetch(
                "SELECT * FROM outbox WHERE ($1::text IS NULL OR state = $1)"
                " AND ($2::text IS NULL OR kind = $2) ORDER BY created_at DESC, key LIMIT $3",
                state,
                kind,
                limit,
            )
        return [_outbox(r) for r in rows]

    # -- reconciliation ---------------------------------------------------------------
    async def resource_findings(
        self,
        machines: Sequence[StateMachine],
        *,
        outbox_unsent_seconds: float,
        limit: int = 100,
    ) -> list[Finding]:
        found: list[Finding] = []
        async with self._conn() as conn:
            for machine in machines:
                for state in sorted(machine.terminal):
                    rows = await conn.fetch(
                        "SELECT r.id FROM resources r WHERE r.kind = $1 AND r.state = $2"
                        " AND NOT EXISTS (SELECT 1 FROM resource_transitions t"
                        "  WHERE t.resource_id = r.id AND t.outcome = 'applied'"
                        "  AND t.to_state = r.state AND t.delivery_id IS NOT NULL)"
                        " ORDER BY r.id LIMIT $3",
                        machine.name,
                        state,
                        limit,
                    )
                    found += [Finding("terminal_without_delivery", r["id"], state) for r in rows]
                for state, outbox_kind in sorted(machine.notify.items()):
                    rows = await conn.fetch(
                        "SELECT t.resource_id FROM resource_transitions t"
                        " JOIN resources r ON r.id = t.resource_id"
                        " WHERE r.kind = $1 AND t.outcome = 'applied' AND t.to_state = $2"
                        " AND NOT EXISTS (SELECT 1 FROM outbox o"
                        "  WHERE o.key = $3 || ':' || t.resource_id) ORDER BY t.id LIMIT $4",
                        machine.name,
                        state,
                        outbox_kind,
                        limit,
                    )
                    found += [
                        Finding("transition_without_outbox", r["resource_id"], state) for r in rows
                    ]
            rows = await conn.fetch(
                "SELECT key, state FROM outbox WHERE state IN ('pending', 'sending')"
                " AND created_at < now() - make_interval(secs => $1)"
                " ORDER BY created_at LIMIT $2",
                float(outbox_unsent_seconds),
                limit,
            )
            found += [Finding("outbox_unsent", r["key"], r["state"]) for r in rows]
            rows = await conn.fetch(
                "SELECT p.job_id FROM parked_events p JOIN jobs j ON j.id = p.job_id"
                " WHERE p.deadline < now() AND j.state IN ('accepted', 'processing')"
                " ORDER BY p.deadline LIMIT $1",
                limit,
            )
            found += [Finding("parked_past_deadline", r["job_id"]) for r in rows]
        return found

    async def transition_counts(self) -> dict[str, int]:
        async with self._conn() as conn:
            rows = await conn.fetch(
                "SELECT outcome, reason, count(*) AS n FROM resource_transitions"
                " WHERE outcome IN ('applied', 'rejected') GROUP BY outcome, reason"
            )
        return {
            r["outcome"] + (f":{r['reason']}" if r["reason"] else ""): int(r["n"]) for r in rows
        }
