"""Replay: run a delivery's jobs again through the normal worker path.

Not a re-sent HTTP request: the delivery is picked by internal id (or event id), its state
shown, and each chosen job put back to ``accepted`` with trigger ``replay``. A worker (of
``serve`` or ``hookinbox worker``) runs it like any job, so the effects ledger still
applies: an effect already recorded is returned from the ledger, not made again. Only
``force_effects`` moves the job's ledger rows aside (kept in ``effects_superseded``) so
its effects are made anew. The report says, per job, what happened: ran (and which
effects the ledger already held, which were made), refused and why, or still queued.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any, Literal

from hookinbox.codes import JobState, Trigger
from hookinbox.config import Config
from hookinbox.errors import NotFound, OperationRefused, PayloadPurged
from hookinbox.ids import forward_effect_key
from hookinbox.ops.eligibility import why_not_runnable
from hookinbox.ops.search import find_delivery
from hookinbox.store import DeliveryView, EffectRecord, JobDetail, Store

ReplayOutcome = Literal["ran", "failed", "retrying", "queued", "would_run", "refused"]


@dataclass(frozen=True, slots=True)
class ReplayItem:
    job_id: str
    action: str
    state_before: str
    outcome: ReplayOutcome
    reason: str | None = None
    state_after: str | None = None
    error_code: str | None = None
    #: Recorded before the replay and returned from the ledger: no second effect.
    effects_skipped: tuple[str, ...] = ()
    #: Recorded during the replay: a new effect in the external system.
    effects_made: tuple[str, ...] = ()
    #: Moved aside by ``force_effects`` before the run.
    effects_superseded: tuple[str, ...] = ()
    #: The run POSTed to the forward target (its ledger row was made by this run).
    forwarded: bool = False

    def as_json(self) -> dict[str, Any]:
        return {
            "job_id": self.job_id,
            "action": self.action,
            "state_before": self.state_before,
            "outcome": self.outcome,
            "reason": self.reason,
            "state_after": self.state_after,
            "error_code": self.error_code,
            "effects_skipped": list(self.effects_skipped),
            "effects_made": list(self.effects_made),
            "effects_superseded": list(self.effects_superseded),
            "forwarded": self.forwarded,
        }

    def summary(self) -> str:
        """One line per job for the terminal."""
        if self.outcome == "refused":
            return f"refused: {self.reason}"
        if self.outcome == "would_run":
            return "would run again (dry run)" + (
                f"; would supersede {len(self.effects_superseded)} ledger row(s)"
                if self.effects_superseded
                else ""
            )
        if self.outcome in ("queued", "retrying", "failed"):
            return f"{self.outcome}: {self.reason}"
        parts = ["ran"]
        if self.effects_skipped:
            parts.append(
                f"effect skipped, the ledger already holds it: {', '.join(self.effects_skipped)}"
            )
        if self.effects_made:
            parts.append(f"effect made: {', '.join(self.effects_made)}")
        if self.forwarded:
            parts.append("forwarded again with the same Idempotency-Key")
        if len(parts) == 1:
            parts.append("no ledger effects")
        return "; ".join(parts)


@dataclass(frozen=True, slots=True)
class ReplayResult:
    delivery: DeliveryView
    dry_run: bool
    force_effects: bool
    items: list[ReplayItem] = field(default_factory=list)

    @property
    def all_refused(self) -> bool:
        return bool(self.items) and all(item.outcome == "refused" for item in self.items)

    def as_json(self) -> dict[str, Any]:
        return {
            "delivery": self.delivery.as_json(),
            "dry_run": self.dry_run,
            "force_effects": self.force_effects,
            "jobs": [item.as_json() for item in self.items],
        }


async def replay(
    store: Store,
    config: Config,
    ref: str,
    *,
    actor: str,
    action: str | None = None,
    dry_run: bool = False,
    force_effects: bool = False,
    wait_seconds: float = 30.0,
    poll_seconds: float = 0.1,
    source: str | None = None,
) -> ReplayResult:
    """Replay the jobs of delivery ``ref`` (internal id, job id or event id; an event id
    two sources share needs ``source``: AmbiguousId); wait up to ``wait_seconds`` for
    workers to run them (0: do not wait)."""
    delivery = await find_delivery(store, ref, source)
    if not delivery.payload_retained:
        raise PayloadPurged(
            f"delivery {delivery.id}: its payload was purged after retention, so it cannot "
            "be replayed (the journal row and its history remain)"
        )
    if not delivery.jobs:
        raise OperationRefused(
            f"delivery {delivery.id} has no jobs: no route matched {delivery.event_type!r} "
            "when it was received"
        )
    views = [job for job in delivery.jobs if action is None or job.action == action]
    if not views:
        actions = ", ".join(job.action for job in delivery.jobs)
        raise NotFound(f"delivery {delivery.id} has no job for action {action!r} (has: {actions})")

    items: dict[str, ReplayItem] = {}
    runnable: list[JobDetail] = []
    for view in views:
        job = await store.queue.get_job(view.id)
        if job is None:
            raise NotFound(f"job {view.id} vanished (purged meanwhile?)")
        reason = why_not_runnable(job, config)
        if reason is not None:
            items[job.id] = ReplayItem(job.id, job.action, job.state, "refused", reason)
        else:
            runnable.append(job)

    before = {e.key: e for e in await store.effects.list_effects([job.id for job in runnable])}
    if dry_run:
        for job in runnable:
            held = tuple(k for k, e in before.items() if e.job_id == job.id)
            items[job.id] = ReplayItem(
                job.id,
                job.action,
                job.state,
                "would_run",
                effects_superseded=held if force_effects else (),
                effects_skipped=() if force_effects else held,
            )
        return ReplayResult(delivery, dry_run, force_effects, [items[v.id] for v in views])

    superseded: dict[str, tuple[str, ...]] = {}
    if force_effects and runnable:
        for job in runnable:
            keys = await store.effects.supersede_effects([job.id], actor=actor)
            superseded[job.id] = tuple(keys)
            if keys:
                await store.audit.record_operator_action(
                    actor=actor,
                    command="force-effects",
                    source=job.source,
                    delivery_id=job.delivery_id,
                    job_id=job.id,
                    detail=f"superseded {len(keys)} ledger row(s)",
                )
        before = {}
    # Each job gets its route's attempts again (a retry schedule's length + 1), numbered
    # on from those it spent.
    by_grant: dict[int, list[str]] = {}
    for job in runnable:
        by_grant.setdefault(config.attempts_for(job.source, job.action), []).append(job.id)
    moved: set[str] = set()
    for grant, ids in by_grant.items():
        moved.update(
            await store.queue.requeue_jobs(
                ids,
                from_states=(JobState.COMPLETED, JobState.FAILED),
                trigger=Trigger.REPLAY,
                more_attempts=grant,
                actor=actor,
                command="replay",
            )
        )
    for job in runnable:
        if job.id not in moved:
            items[job.id] = ReplayItem(
                job.id, job.action, job.state, "refused", "changed state meanwhile"
            )
    queued = {job.id: job.attempts for job in runnable if job.id in moved}
    settled = await _wait_settled(store, queued, wait_seconds, poll_seconds)
    after = {e.key: e for e in await store.effects.list_effects(list(moved))}
    for job in runnable:
        if job.id not in moved:
            continue
        items[job.id] = _outcome(
            job,
            settled.get(job.id),
            before,
            after,
            superseded.get(job.id, ()),
            forwarded=_is_forward(config, job),
            waited=wait_seconds,
        )
    return ReplayResult(delivery, dry_run, force_effects, [items[v.id] for v in views])


async def _wait_settled(
    store: Store, attempts_before: dict[str, int], wait_seconds: float, poll_seconds: float
) -> dict[str, JobDetail]:
    """Poll until each job (``{job_id: its attempts before the replay}``) completed,
    failed, or ran once and is waiting for a retry."""
    settled: dict[str, JobDetail] = {}
    deadline = time.monotonic() + wait_seconds
    pending = list(attempts_before)
    while True:
        for job_id in list(pending):
            job = await store.queue.get_job(job_id)
            if job is None:
                pending.remove(job_id)
                continue
            settled[job_id] = job
            if _is_settled(job, attempts_before[job_id]):
                pending.remove(job_id)
        if not pending or time.monotonic() >= deadline:
            return settled
        await asyncio.sleep(poll_seconds)


def _is_settled(job: JobDetail, attempts_before: int) -> bool:
    """Attempted since the replay (attempt numbers count on) and not under way."""
    return job.attempts > attempts_before and job.state in ("completed", "failed", "accepted")


def _is_forward(config: Config, job: JobDetail) -> bool:
    source = config.source(job.source)
    return source is not None and any(
        route.action == job.action and (route.forward or route.destination) is not None
        for route in source.routes
    )


def _outcome(
    job: JobDetail,
    now: JobDetail | None,
    before: dict[str, EffectRecord],
    after: dict[str, EffectRecord],
    superseded: tuple[str, ...],
    *,
    forwarded: bool,
    waited: float,
) -> ReplayItem:
    base: dict[str, Any] = {
        "job_id": job.id,
        "action": job.action,
        "state_before": job.state,
        "effects_superseded": superseded,
    }
    if now is None or not _is_settled(now, job.attempts):
        reason = (
            "queued; not waiting for a worker"
            if waited <= 0
            else f"queued; no worker finished it within {waited:g}s (it runs when one is up)"
        )
        state = now.state if now is not None else None
        return ReplayItem(**base, outcome="queued", reason=reason, state_after=state)
    mine = {k: e for k, e in after.items() if e.job_id == job.id and e.state == "recorded"}
    skipped = tuple(k for k, e in mine.items() if k in before and _same_record(before[k], e))
    made = tuple(k for k in mine if k not in skipped)
    if now.state == "completed":
        return ReplayItem(
            **base,
            outcome="ran",
            state_after="completed",
            effects_skipped=skipped,
            effects_made=made,
            # Only when the POST was made by this run: a recorded forward is skipped.
            forwarded=forwarded and forward_effect_key(job.id) in made,
        )
    outcome: ReplayOutcome = "failed" if now.state == "failed" else "retrying"
    return ReplayItem(
        **base,
        outcome=outcome,
        reason=f"the run failed with {now.last_error}"
        + ("; dead-lettered again" if outcome == "failed" else "; a retry is scheduled"),
        state_after=now.state,
        error_code=now.last_error,
        effects_skipped=skipped,
        effects_made=made,
    )


def _same_record(old: EffectRecord, new: EffectRecord) -> bool:
    return old.state == "recorded" and old.recorded_at == new.recorded_at
