"""SQLite: tracked resources, the transition log, parked events and the outbox.

A mixin of :class:`~hookinbox.store.sqlite.SQLiteStore`. Every write runs on the store's
one connection under ``BEGIN IMMEDIATE``: SQLite's write lock serializes two workers
applying events to the same resource (across processes too), so the read of the
resource, the judgement and the writes see one state. The transition, its outbox rows and
the job's completion commit together or not at all.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import sqlite3
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

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
from hookinbox.store.sqlite_clock import NOW
from hookinbox.store.sqlite_journal import reserve_one

if TYPE_CHECKING:
    from hookinbox.store.sqlite import _DatabaseThread


_LOG = f"""
INSERT INTO resource_transitions (resource_id, from_state, to_state, outcome, reason,
    delivery_id, job_id, event_type, event_time, outbox_key, created_at)
VALUES (:resource_id, :from_state, :to_state, :outcome, :reason, :delivery_id, :job_id,
    :event_type, :event_time, :outbox_key, {NOW})
"""

_WAKE_PARKED = f"""
UPDATE jobs SET next_attempt_at = {NOW}, updated_at = {NOW}
WHERE state = 'accepted' AND id IN (
    SELECT job_id FROM parked_events WHERE kind = ? AND provider_ref = ?)
"""

_JOB_SETTLE = f"""
UPDATE jobs
SET state = :state, last_error = :error, business_id = coalesce(:business_id, business_id),
    next_attempt_at = coalesce(:due, next_attempt_at),
    max_attempts = max_attempts + :extra_attempt,
    completed_at = CASE WHEN :state = 'completed' THEN {NOW} ELSE completed_at END,
    failed_at = CASE WHEN :state = 'failed' THEN {NOW} ELSE failed_at END,
    lease_token = NULL, leased_by = NULL, lease_expires_at = NULL, updated_at = {NOW}
WHERE id = :id
"""

_END_ATTEMPT = f"""
UPDATE attempts SET ended_at = {NOW}, outcome = :outcome, error_code = :error
WHERE job_id = :id AND ended_at IS NULL
"""

_OUTBOX_CLAIM = f"""
UPDATE outbox
SET state = 'sending', attempts = attempts + 1, lease_token = :token, leased_by = :worker,
    lease_expires_at = {NOW} + :lease, updated_at = {NOW}
WHERE key IN (
    SELECT key FROM outbox
    WHERE (state = 'pending' AND next_attempt_at <= {NOW})
       OR (state = 'sending' AND lease_expires_at < {NOW} AND attempts < :max)
    ORDER BY next_attempt_at
    LIMIT :limit
)
RETURNING key, kind, resource_id, body, attempts
"""

_OUTBOX_EXHAUSTED = f"""
UPDATE outbox
SET state = 'failed', last_error = 'lease_expired', failed_at = {NOW}, lease_token = NULL,
    leased_by = NULL, lease_expires_at = NULL, updated_at = {NOW}
WHERE state = 'sending' AND lease_expires_at < {NOW} AND attempts >= :max
"""

_OUTBOX_FINISH = f"""
UPDATE outbox
SET state = :state, last_error = coalesce(:error, last_error),
    next_attempt_at = {NOW} + :delay,
    sent_at = CASE WHEN :state = 'sent' THEN {NOW} ELSE sent_at END,
    failed_at = CASE WHEN :state = 'failed' THEN {NOW} ELSE failed_at END,
    lease_token = NULL, leased_by = NULL, lease_expires_at = NULL, updated_at = {NOW}
WHERE key = :key AND lease_token = :token AND state = 'sending'
"""


def _time(value: float | None) -> datetime | None:
    return datetime.fromtimestamp(value, UTC) if value is not None else None


def _at(value: float) -> datetime:
    return datetime.fromtimestamp(value, UTC)


def _resource(row: sqlite3.Row) -> ResourceView:
    return ResourceView(
        id=row["id"],
        kind=row["kind"],
        tenant=row["tenant"],
        owner=row["owner"],
        state=row["state"],
        provider_ref=row["provider_ref"],
        version=row["version"],
        created_at=_at(row["created_at"]),
        updated_at=_at(row["updated_at"]),
    )


def _outbox(row: sqlite3.Row) -> OutboxView:
    return OutboxView(
        key=row["key"],
        kind=row["kind"],
        resource_id=row["resource_id"],
        state=row["state"],
        attempts=row["attempts"],
        body=json.loads(row["body"]),
        last_error=row["last_error"],
        next_attempt_at=_time(row["next_attempt_at"]),
        created_at=_at(row["created_at"]),
        updated_at=_at(row["updated_at"]),
        sent_at=_time(row["sent_at"]),
        failed_at=_time(row["failed_at"]),
    )


def _transition(r: sqlite3.Row) -> TransitionView:
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
        created_at=_at(r["created_at"]),
    )


def outbox_body(key: str, kind: str, resource: Any, previous: str, state: str) -> str:
    """The notification's small JSON: ids and states only, never the provider's body."""
    return json.dumps(
        {
            "key": key,
            "kind": kind,
            "resource_id": resource["id"],
            "resource_kind": resource["kind"],
            "tenant": resource["tenant"],
            "owner": resource["owner"],
            "provider_ref": resource["provider_ref"],
            "previous_state": previous,
            "state": state,
        },
        sort_keys=True,
    )


def _apply(
    conn: sqlite3.Connection, source: str, ev: ResourceEvent, machine: StateMachine
) -> ResourceOutcome | None:
    """Judge and write one event inside the caller's transaction; None: unknown ref."""
    row = conn.execute(
        "SELECT * FROM resources WHERE kind = ? AND provider_ref = ?", (ev.kind, ev.provider_ref)
    ).fetchone()
    if row is None:
        return None
    log = {
        "resource_id": row["id"],
        "from_state": row["state"],
        "to_state": ev.target,
        "delivery_id": ev.delivery_id,
        "job_id": ev.job_id,
        "event_type": ev.event_type,
        "event_time": ev.event_time,
        "outbox_key": None,
    }
    for claimed, actual, code in (
        (ev.tenant, row["tenant"], "tenant_mismatch"),
        (ev.owner, row["owner"], "owner_mismatch"),
    ):
        if claimed is not None and claimed != actual:
            conn.execute(_LOG, {**log, "outcome": "rejected", "reason": code})
            return ResourceOutcome(code)  # type: ignore[arg-type]
    done = conn.execute(
        "SELECT outbox_key FROM resource_transitions WHERE resource_id = ? AND delivery_id = ?"
        " AND outcome = 'applied' LIMIT 1",
        (row["id"], ev.delivery_id),
    ).fetchone()
    if done is not None:
        earlier = (done["outbox_key"],) if done["outbox_key"] else ()
        return ResourceOutcome(
            "already_applied", row["id"], row["state"], row["state"], None, earlier
        )
    reason = machine.judge(row["state"], ev.target)
    if reason is not None:
        conn.execute(_LOG, {**log, "outcome": "rejected", "reason": reason})
        return ResourceOutcome("rejected_transition", row["id"], row["state"], ev.target, reason)
    changed = conn.execute(
        f"UPDATE resources SET state = ?, version = version + 1, updated_at = {NOW}"
        " WHERE id = ? AND version = ?",
        (ev.target, row["id"], row["version"]),
    ).rowcount
    if changed != 1:  # pragma: no cover - the write lock makes this impossible
        raise sqlite3.OperationalError("resource changed under the write lock")
    keys: tuple[str, ...] = ()
    outbox_kind = machine.notify.get(ev.target)
    if outbox_kind is not None:
        key = f"{outbox_kind}:{row['id']}"
        conn.execute(
            "INSERT INTO outbox (key, kind, source, resource_id, body, next_attempt_at,"
            f" created_at, updated_at) VALUES (?, ?, ?, ?, ?, {NOW}, {NOW}, {NOW})"
            " ON CONFLICT (key) DO NOTHING",
            (
                key,
                outbox_kind,
                source,
                row["id"],
                outbox_body(key, outbox_kind, row, row["state"], ev.target),
            ),
        )
        keys = (key,)
        log["outbox_key"] = key
    conn.execute(_LOG, {**log, "outcome": "applied", "reason": None})
    return ResourceOutcome("applied", row["id"], row["state"], ev.target, None, keys)


def _park(
    conn: sqlite3.Connection,
    job_id: str,
    source: str,
    ev: ResourceEvent,
    park: ParkPolicy,
) -> tuple[str, float | None]:
    """Record (or advance) the parking of a job; ``("parked", due)`` or
    ``("unknown_resource", None)`` once the deadline has passed."""
    now = float(conn.execute(f"SELECT {NOW}").fetchone()[0])
    row = conn.execute(
        "SELECT checks, deadline FROM parked_events WHERE job_id = ?", (job_id,)
    ).fetchone()
    if row is None:
        deadline = now + park.park_seconds
        checks = 1
        conn.execute(
            "INSERT INTO parked_events (job_id, source, kind, provider_ref, checks, parked_at,"
            " deadline) VALUES (?, ?, ?, ?, 1, ?, ?)",
            (job_id, source, ev.kind, ev.provider_ref, now, deadline),
        )
    else:
        deadline = float(row["deadline"])
        checks = int(row["checks"]) + 1
        conn.execute("UPDATE parked_events SET checks = ? WHERE job_id = ?", (checks, job_id))
    if now >= deadline:
        conn.execute("DELETE FROM parked_events WHERE job_id = ?", (job_id,))
        return "unknown_resource", None
    delay = min(park.recheck_max_seconds, park.recheck_seconds * 2 ** (checks - 1))
    return "parked", min(now + delay, deadline)


def _settle_job(
    conn: sqlite3.Connection,
    job_id: str,
    outcome: ResourceOutcome,
    due: float | None,
    *,
    leased: bool,
) -> None:
    """Write what the outcome means for the job, in the same transaction."""
    error: str | None
    if outcome.outcome == "parked":
        state, error, attempt_outcome = "accepted", "parked", "parked"
    elif outcome.outcome == "unknown_resource":
        state, error, attempt_outcome = "failed", "unknown_resource", "failed"
        conn.execute("DELETE FROM parked_events WHERE job_id = ?", (job_id,))
    else:
        state, attempt_outcome = "completed", "completed"
        error = None if outcome.outcome == "applied" else outcome.outcome
        conn.execute("DELETE FROM parked_events WHERE job_id = ?", (job_id,))
    conn.execute(
        _JOB_SETTLE,
        {
            "id": job_id,
            "state": state,
            "error": error,
            "business_id": outcome.resource_id,
            "due": due,
            # A re-check of a parked event does not spend the retry budget.
            "extra_attempt": 1 if leased and state == "accepted" else 0,
        },
    )
    if leased:
        conn.execute(_END_ATTEMPT, {"id": job_id, "outcome": attempt_outcome, "error": error})
    elif state != "accepted":
        conn.execute("UPDATE jobs SET attempts = 1 WHERE id = ?", (job_id,))
        conn.execute(
            "INSERT INTO attempts (job_id, number, trigger, worker, started_at, ended_at,"
            f" outcome, error_code) VALUES (?, 1, 'delivery', 'receiver', {NOW}, {NOW}, ?, ?)",
            (job_id, attempt_outcome, error),
        )


class SQLiteResourcesMixin:
    if TYPE_CHECKING:
        _db: _DatabaseThread
        _wakeup: asyncio.Event | None

    def _wake_workers(self) -> None:
        if self._wakeup is not None:
            self._wakeup.set()

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
        def run(conn: sqlite3.Connection) -> tuple[ResourceView, int]:
            conn.execute("BEGIN IMMEDIATE")
            row = conn.execute(
                "INSERT INTO resources (id, kind, tenant, owner, state, provider_ref,"
                f" created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, {NOW}, {NOW})"
                " ON CONFLICT DO NOTHING RETURNING *",
                (resource_id, kind, tenant, owner, state, provider_ref),
            ).fetchone()
            if row is None:
                raise OperationRefused(
                    "a resource of this kind already holds that provider reference"
                )
            conn.execute(
                _LOG,
                {
                    "resource_id": resource_id,
                    "from_state": None,
                    "to_state": state,
                    "outcome": "created",
                    "reason": None,
                    "delivery_id": None,
                    "job_id": None,
                    "event_type": None,
                    "event_time": None,
                    "outbox_key": None,
                },
            )
            woken = conn.execute(_WAKE_PARKED, (kind, provider_ref)).rowcount if provider_ref else 0
            conn.execute("COMMIT")
            return _resource(row), woken

        view, woken = await self._db.run(run)
        if woken:
            self._wake_workers()
        return view

    async def attach_provider_ref(self, resource_id: str, provider_ref: str) -> ResourceView:
        def run(conn: sqlite3.Connection) -> tuple[ResourceView, int]:
            conn.execute("BEGIN IMMEDIATE")
            row = conn.execute("SELECT * FROM resources WHERE id = ?", (resource_id,)).fetchone()
            if row is None:
                raise NotFound(f"no resource {resource_id!r}")
            if row["provider_ref"] == provider_ref:
                conn.execute("COMMIT")
                return _resource(row), 0
            if row["provider_ref"] is not None:
                raise OperationRefused("the resource already has another provider reference")
            holder = conn.execute(
                "SELECT 1 FROM resources WHERE kind = ? AND provider_ref = ?",
                (row["kind"], provider_ref),
            ).fetchone()
            if holder is not None:
                raise OperationRefused(
                    "a resource of this kind already holds that provider reference"
                )
            updated = conn.execute(
                f"UPDATE resources SET provider_ref = ?, version = version + 1,"
                f" updated_at = {NOW} WHERE id = ? RETURNING *",
                (provider_ref, resource_id),
            ).fetchone()
            conn.execute(
                _LOG,
                {
                    "resource_id": resource_id,
                    "from_state": row["state"],
                    "to_state": row["state"],
                    "outcome": "attached",
                    "reason": None,
                    "delivery_id": None,
                    "job_id": None,
                    "event_type": None,
                    "event_time": None,
                    "outbox_key": None,
                },
            )
            woken = conn.execute(_WAKE_PARKED, (row["kind"], provider_ref)).rowcount
            conn.execute("COMMIT")
            return _resource(updated), woken

        view, woken = await self._db.run(run)
        if woken:
            self._wake_workers()
        return view

    async def get_resource(self, resource_id: str) -> ResourceView | None:
        def run(conn: sqlite3.Connection) -> ResourceView | None:
            row = conn.execute("SELECT * FROM resources WHERE id = ?", (resource_id,)).fetchone()
            return _resource(row) if row else None

        return await self._db.run(run)

    async def find_resource(self, kind: str, provider_ref: str) -> ResourceView | None:
        def run(conn: sqlite3.Connection) -> ResourceView | None:
            row = conn.execute(
                "SELECT * FROM resources WHERE kind = ? AND provider_ref = ?", (kind, provider_ref)
            ).fetchone()
            return _resource(row) if row else None

        return await self._db.run(run)

    async def list_resources(
        self,
        *,
        kind: str | None = None,
        tenant: str | None = None,
        state: str | None = None,
        limit: int = 50,
        before: str | None = None,
    ) -> list[ResourceView]:
        def run(conn: sqlite3.Connection) -> list[ResourceView]:
            rows = conn.execute(
                "SELECT * FROM resources WHERE (:kind IS NULL OR kind = :kind)"
                " AND (:tenant IS NULL OR tenant = :tenant) AND (:state IS NULL OR state = :state)"
                " AND (:before IS NULL OR id < :before) ORDER BY id DESC LIMIT :limit",
                {"kind": kind, "tenant": tenant, "state": state, "before": before, "limit": limit},
            ).fetchall()
            return [_resource(r) for r in rows]

        return await self._db.run(run)

    async def list_transitions(self, resource_id: str) -> list[TransitionView]:
        def run(conn: sqlite3.Connection) -> list[TransitionView]:
            rows = conn.execute(
                "SELECT * FROM resource_transitions WHERE resource_id = ? ORDER BY id",
                (resource_id,),
            ).fetchall()
            return [_transition(r) for r in rows]

        return await self._db.run(run)

    async def list_delivery_transitions(self, delivery_id: str) -> list[TransitionView]:
        def run(conn: sqlite3.Connection) -> list[TransitionView]:
            rows = conn.execute(
                "SELECT * FROM resource_transitions WHERE delivery_id = ? ORDER BY id",
                (delivery_id,),
            ).fetchall()
            return [_transition(r) for r in rows]

        return await self._db.run(run)

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
        def run(conn: sqlite3.Connection) -> ResourceOutcome:
            conn.execute("BEGIN IMMEDIATE")
            ours = conn.execute(
                "SELECT 1 FROM jobs WHERE id = ? AND lease_token = ? AND state = 'processing'",
                (job_id, lease_token),
            ).fetchone()
            if ours is None:
                conn.execute("ROLLBACK")
                return ResourceOutcome("lease_lost")
            outcome = _apply(conn, source, event, machine)
            due = None
            if outcome is None:
                code, due = _park(conn, job_id, source, event, park)
                outcome = ResourceOutcome(code)  # type: ignore[arg-type]
            _settle_job(conn, job_id, outcome, due, leased=True)
            conn.execute("COMMIT")
            return replace(outcome, kind=event.kind)

        return await self._db.run(run)

    async def reserve_inline(
        self,
        item: NewDelivery,
        applies: Sequence[tuple[ResourceEvent, StateMachine, ParkPolicy]],
    ) -> tuple[Reservation, list[ResourceOutcome]]:
        def run(conn: sqlite3.Connection) -> tuple[Reservation, list[ResourceOutcome]]:
            conn.execute("BEGIN IMMEDIATE")
            reservation = reserve_one(conn, item)
            if reservation.outcome == "duplicate":
                conn.execute("COMMIT")
                return reservation, []
            outcomes = []
            for event, machine, park in applies:
                outcome = _apply(conn, item.source, event, machine)
                due = None
                if outcome is None:
                    code, due = _park(conn, event.job_id, item.source, event, park)
                    outcome = ResourceOutcome(code)  # type: ignore[arg-type]
                _settle_job(conn, event.job_id, outcome, due, leased=False)
                outcomes.append(replace(outcome, kind=event.kind))
            conn.execute("COMMIT")
            return Reservation("accepted", item.id), outcomes

        reservation, outcomes = await self._db.run(run)
        if reservation.outcome == "accepted":
            self._wake_workers()
        return reservation, outcomes

    # -- outbox ---------------------------------------------------------------------
    async def claim_outbox(
        self, worker_id: str, limit: int, lease_seconds: float, max_attempts: int
    ) -> list[ClaimedOutbox]:
        token = secrets.token_hex(8)

        def run(conn: sqlite3.Connection) -> list[ClaimedOutbox]:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute(_OUTBOX_EXHAUSTED, {"max": max_attempts})
            rows = conn.execute(
                _OUTBOX_CLAIM,
                {
                    "token": token,
                    "worker": worker_id,
                    "lease": lease_seconds,
                    "limit": limit,
                    "max": max_attempts,
                },
            ).fetchall()
            conn.execute("COMMIT")
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

        return await self._db.run(run)

    async def finish_outbox(
        self,
        key: str,
        lease_token: str,
        state: OutboxState,
        *,
        error_code: str | None = None,
        delay_seconds: float = 0.0,
    ) -> bool:
        def run(conn: sqlite3.Connection) -> bool:
            conn.execute("BEGIN IMMEDIATE")
            changed = conn.execute(
                _OUTBOX_FINISH,
                {
                    "key": key,
                    "token": lease_token,
                    "state": state,
                    "error": error_code,
                    "delay": delay_seconds,
                },
            ).rowcount
            conn.execute("COMMIT")
            return bool(changed == 1)

        return await self._db.run(run)

    async def renew_outbox_lease(self, key: str, lease_token: str, lease_seconds: float) -> bool:
        def run(conn: sqlite3.Connection) -> bool:
            changed = conn.execute(
                f"UPDATE outbox SET lease_expires_at = {NOW} + ?"
                " WHERE key = ? AND lease_token = ? AND state = 'sending'",
                (lease_seconds, key, lease_token),
            ).rowcount
            return bool(changed == 1)

        return await self._db.run(run)

    async def requeue_outbox(self, key: str, *, only_failed: bool) -> OutboxView:
        def run(conn: sqlite3.Connection) -> OutboxView:
            conn.execute("BEGIN IMMEDIATE")
            row = conn.execute("SELECT state FROM outbox WHERE key = ?", (key,)).fetchone()
            if row is None:
                raise NotFound(f"no outbox row {key!r}")
            if only_failed and row["state"] != "failed":
                raise OperationRefused(f"outbox row is {row['state']}, not failed")
            if row["state"] == "sending":
                raise OperationRefused("outbox row is being sent right now")
            updated = conn.execute(
                f"UPDATE outbox SET state = 'pending', attempts = 0, next_attempt_at = {NOW},"
                f" failed_at = NULL, updated_at = {NOW} WHERE key = ? RETURNING *",
                (key,),
            ).fetchone()
            conn.execute("COMMIT")
            return _outbox(updated)

        return await self._db.run(run)

    async def get_outbox(self, key: str) -> OutboxView | None:
        def run(conn: sqlite3.Connection) -> OutboxView | None:
            row = conn.execute("SELECT * FROM outbox WHERE key = ?", (key,)).fetchone()
            return _outbox(row) if row else None

        return await self._db.run(run)

    async def list_outbox(
        self,
        *,
        state: OutboxState | None = None,
        kind: str | None = None,
        limit: int = 50,
    ) -> list[OutboxView]:
        def run(conn: sqlite3.Connection) -> list[OutboxView]:
            rows = conn.execute(
                "SELECT * FROM outbox WHERE (:state IS NULL OR state = :state)"
                " AND (:kind IS NULL OR kind = :kind) ORDER BY created_at DESC, key LIMIT :limit",
                {"state": state, "kind": kind, "limit": limit},
            ).fetchall()
            return [_outbox(r) for r in rows]

        return await self._db.run(run)

    # -- reconciliation ---------------------------------------------------------------
    async def resource_findings(
        self,
        machines: Sequence[StateMachine],
        *,
        outbox_unsent_seconds: float,
        limit: int = 100,
    ) -> list[Finding]:
        def run(conn: sqlite3.Connection) -> list[Finding]:
            found: list[Finding] = []
            for machine in machines:
                for state in sorted(machine.terminal):
                    rows = conn.execute(
                        "SELECT r.id FROM resources r WHERE r.kind = ? AND r.state = ?"
                        " AND NOT EXISTS (SELECT 1 FROM resource_transitions t"
                        "  WHERE t.resource_id = r.id AND t.outcome = 'applied'"
                        "  AND t.to_state = r.state AND t.delivery_id IS NOT NULL)"
                        " ORDER BY r.id LIMIT ?",
                        (machine.name, state, limit),
                    ).fetchall()
                    found += [Finding("terminal_without_delivery", r["id"], state) for r in rows]
                for state, outbox_kind in sorted(machine.notify.items()):
                    rows = conn.execute(
                        "SELECT t.resource_id FROM resource_transitions t"
                        " JOIN resources r ON r.id = t.resource_id"
                        " WHERE r.kind = ? AND t.outcome = 'applied' AND t.to_state = ?"
                        " AND NOT EXISTS (SELECT 1 FROM outbox o"
                        "  WHERE o.key = ? || ':' || t.resource_id) ORDER BY t.id LIMIT ?",
                        (machine.name, state, outbox_kind, limit),
                    ).fetchall()
                    found += [
                        Finding("transition_without_outbox", r["resource_id"], state) for r in rows
                    ]
            rows = conn.execute(
                f"SELECT key, state FROM outbox WHERE state IN ('pending', 'sending')"
                f" AND created_at < {NOW} - ? ORDER BY created_at LIMIT ?",
                (outbox_unsent_seconds, limit),
            ).fetchall()
            found += [Finding("outbox_unsent", r["key"], r["state"]) for r in rows]
            rows = conn.execute(
                f"SELECT p.job_id FROM parked_events p JOIN jobs j ON j.id = p.job_id"
                f" WHERE p.deadline < {NOW} AND j.state IN ('accepted', 'processing')"
                " ORDER BY p.deadline LIMIT ?",
                (limit,),
            ).fetchall()
            found += [Finding("parked_past_deadline", r["job_id"]) for r in rows]
            return found

        return await self._db.run(run)

    async def transition_counts(self) -> dict[str, int]:
        def run(conn: sqlite3.Connection) -> dict[str, int]:
            rows = conn.execute(
                "SELECT outcome, reason, count(*) AS n FROM resource_transitions"
                " WHERE outcome IN ('applied', 'rejected') GROUP BY outcome, reason"
            ).fetchall()
            return {
                r["outcome"] + (f":{r['reason']}" if r["reason"] else ""): int(r["n"]) for r in rows
            }

        return await self._db.run(run)
