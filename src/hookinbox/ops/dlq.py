"""Dead letters: list them with reason, attempts and review deadline; retry one or many.

A retry puts a failed job back to ``accepted`` with its attempts reset and trigger
``dlq-retry``; the normal workers run it, so the effects ledger still holds: an effect
recorded before the failure is not made again. Bulk retry always needs a limit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

from hookinbox.codes import Trigger
from hookinbox.config import Config
from hookinbox.errors import InvalidArgument, NotFound, OperationRefused, PayloadPurged
from hookinbox.ops.eligibility import why_not_runnable
from hookinbox.store import JobDetail, Store, iso

#: The most dead letters one bulk retry may touch.
MAX_BULK = 10_000


@dataclass(frozen=True, slots=True)
class DeadLetterList:
    jobs: list[JobDetail]
    review_days: float

    def deadline(self, job: JobDetail) -> datetime | None:
        """Investigate by then: ``dlq_review_days`` after the job was dead-lettered."""
        return job.failed_at + timedelta(days=self.review_days) if job.failed_at else None

    def as_json(self) -> dict[str, Any]:
        return {
            "count": len(self.jobs),
            "review_days": self.review_days,
            "dead_letters": [
                {**job.as_json(), "review_deadline": iso(self.deadline(job))} for job in self.jobs
            ],
        }


@dataclass(frozen=True, slots=True)
class RetryItem:
    job_id: str
    delivery_id: str
    source: str
    action: str
    outcome: Literal["requeued", "would_requeue", "refused"]
    reason: str | None = None
    last_error: str | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "job_id": self.job_id,
            "delivery_id": self.delivery_id,
            "source": self.source,
            "action": self.action,
            "outcome": self.outcome,
            "reason": self.reason,
            "last_error": self.last_error,
        }


@dataclass(frozen=True, slots=True)
class RetryReport:
    dry_run: bool
    items: list[RetryItem] = field(default_factory=list)

    @property
    def requeued(self) -> int:
        return sum(item.outcome == "requeued" for item in self.items)

    def as_json(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "requeued": self.requeued,
            "refused": sum(item.outcome == "refused" for item in self.items),
            "items": [item.as_json() for item in self.items],
        }


async def dlq_list(
    store: Store,
    config: Config,
    *,
    source: str | None = None,
    since: datetime | None = None,
    limit: int = 50,
) -> DeadLetterList:
    """Failed jobs, newest failure first."""
    if limit < 1:
        raise InvalidArgument("--limit must be at least 1")
    jobs = await store.queue.list_dead_letters(
        order="newest_failure", source=source, since=since, limit=limit
    )
    return DeadLetterList(jobs, config.operations.dlq_review_days)


async def dlq_retry(
    store: Store, config: Config, job_id: str, *, actor: str, dry_run: bool = False
) -> RetryReport:
    """Retry one dead letter. Refuses a job that is not failed or cannot run again."""
    job = await store.queue.get_job(job_id)
    if job is None:
        raise NotFound(f"no job with id {job_id!r}")
    if job.state != "failed":
        hint = " (use `hookinbox replay` for a completed job)" if job.state == "completed" else ""
        raise OperationRefused(f"job {job_id} is {job.state}, not failed{hint}")
    if not job.payload_retained:
        # Purges keep dead letters' payloads, so this is a row from before that rule or
        # one emptied by hand; the worker could only fail it again.
        raise PayloadPurged(
            f"job {job_id}: its payload was purged, so it cannot run again "
            "(the journal row and its history remain)"
        )
    reason = why_not_runnable(job, config)
    if reason is not None:
        raise OperationRefused(f"job {job_id}: {reason}")
    report = await _requeue(store, config, [job], actor=actor, dry_run=dry_run)
    if not dry_run and not report.requeued:
        raise OperationRefused(f"job {job_id} changed state meanwhile; nothing retried")
    return report


async def dlq_retry_all(
    store: Store,
    config: Config,
    *,
    limit: int,
    actor: str,
    source: str | None = None,
    dry_run: bool = False,
) -> RetryReport:
    """Retry up to ``limit`` dead letters, oldest failure first."""
    if not 1 <= limit <= MAX_BULK:
        raise InvalidArgument(f"--limit must be between 1 and {MAX_BULK}")
    jobs = await store.queue.list_dead_letters(source=source, limit=limit, order="oldest_failure")
    return await _requeue(store, config, jobs, actor=actor, dry_run=dry_run)


async def _requeue(
    store: Store, config: Config, jobs: list[JobDetail], *, actor: str, dry_run: bool
) -> RetryReport:
    items: dict[str, RetryItem] = {}
    runnable: list[JobDetail] = []
    for job in jobs:
        reason = why_not_runnable(job, config)
        if reason is not None:
            items[job.id] = _item(job, "refused", reason)
        else:
            runnable.append(job)
    moved: set[str] = set()
    if runnable and not dry_run:
        # Each job gets its route's attempts again (a retry schedule's length + 1).
        by_attempts: dict[int, list[str]] = {}
        for job in runnable:
            by_attempts.setdefault(config.attempts_for(job.source, job.action), []).append(job.id)
        for max_attempts, ids in by_attempts.items():
            moved.update(
                await store.queue.requeue_jobs(
                    ids,
                    from_states=("failed",),
                    trigger=Trigger.DLQ_RETRY,
                    max_attempts=max_attempts,
                    actor=actor,
                    command="dlq-retry",
                )
            )
    for job in runnable:
        if dry_run:
            items[job.id] = _item(job, "would_requeue")
        elif job.id in moved:
            items[job.id] = _item(job, "requeued")
        else:
            items[job.id] = _item(job, "refused", "changed state meanwhile")
    return RetryReport(dry_run, [items[job.id] for job in jobs])


def _item(job: JobDetail, outcome: Any, reason: str | None = None) -> RetryItem:
    return RetryItem(
        job_id=job.id,
        delivery_id=job.delivery_id,
        source=job.source,
        action=job.action,
        outcome=outcome,
        reason=reason,
        last_error=job.last_error,
    )
