"""Dead letters: list them with reason, attempts and review deadline; retry one or many.

A retry puts a failed job back to ``accepted`` with its attempts reset and trigger
``dlq-retry``; the normal workers run it, so the effects ledger still holds: an effect
recorded before the failure is not made again. Bulk retry always needs a limit, and
takes a filter (:class:`DeadLetterFilter`: source, action, reason, failure time range).
Its dry run is the preview: how many match in all, and exactly which the limit selects,
oldest failure first. A confirmed retry may say how many it expects (``expect``); when
the selection has changed since the preview, it refuses instead of retrying others.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, Literal

from hookinbox.codes import JobState, Trigger
from hookinbox.config import Config
from hookinbox.errors import InvalidArgument, NotFound, OperationRefused, PayloadPurged
from hookinbox.ops.eligibility import why_not_runnable
from hookinbox.ops.search import JOB_CURSOR, clean_term, page_cursor, source_name
from hookinbox.store import DeadLetterCriteria, JobDetail, Store, iso

#: The most dead letters one bulk retry may touch.
MAX_BULK = 10_000
#: The one rule of every bulk retry (dead letters, rejected deliveries) on every surface:
#: it changes nothing without an explicit limit; a dry run needs none and previews up to
#: this many.
BULK_PREVIEW = 100


def bulk_limit(limit: int | None, *, dry_run: bool) -> int | None:
    """The limit a bulk retry runs with: the one given, the preview's for a dry run, or
    None for a real run without one (the caller refuses it in its own surface's words)."""
    if limit is not None:
        return limit
    return BULK_PREVIEW if dry_run else None


@dataclass(frozen=True, slots=True)
class DeadLetterFilter(DeadLetterCriteria):
    """Which dead letters a listing or a bulk retry takes, as an operator gives it: the
    store's criteria, checked against the config before the store sees them."""

    def checked(self, config: Config) -> DeadLetterFilter:
        """The filter with its source resolved and its terms cleaned (a bad one refused)."""
        return replace(
            self,
            source=source_name(config, self.source),
            action=clean_term(self.action, "action"),
            reason=clean_term(self.reason, "reason"),
        )

    def as_json(self) -> dict[str, Any]:
        return {**self.params(), "since": iso(self.since), "until": iso(self.until)}


@dataclass(frozen=True, slots=True)
class DeadLetterListing:
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
class RetriedJob:
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
class DlqRetryResult:
    dry_run: bool
    items: list[RetriedJob] = field(default_factory=list)
    #: A bulk retry: the dead letters its filter matched in all (the limit took ``items``).
    matched: int | None = None

    @property
    def requeued(self) -> int:
        return sum(item.outcome == "requeued" for item in self.items)

    def as_json(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "matched": self.matched,
            "selected": len(self.items),
            "requeued": self.requeued,
            "would_requeue": sum(item.outcome == "would_requeue" for item in self.items),
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
    matching: DeadLetterFilter | None = None,
    before: str | None = None,
) -> DeadLetterListing:
    """Failed jobs, newest failure first; a page after the dead letter ``before``."""
    if limit < 1:
        raise InvalidArgument("--limit must be at least 1")
    wanted = (matching or DeadLetterFilter(source=source, since=since)).checked(config)
    jobs = await store.queue.list_dead_letters(
        wanted,
        order="newest_failure",
        before=page_cursor(before, JOB_CURSOR, "a job id (dlv_...:action)"),
        limit=limit,
    )
    return DeadLetterListing(jobs, config.operations.dlq_review_days)


async def dlq_retry(
    store: Store, config: Config, job_id: str, *, actor: str, dry_run: bool = False
) -> DlqRetryResult:
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
    matching: DeadLetterFilter | None = None,
    expect: int | None = None,
    max_limit: int = MAX_BULK,
) -> DlqRetryResult:
    """Retry up to ``limit`` dead letters (at most ``max_limit``) that match, oldest
    failure first. ``dry_run`` is the preview. With ``expect``, refuse (retrying
    nothing) unless the limit selects exactly that many now, as the preview showed."""
    if not 1 <= limit <= max_limit:
        raise InvalidArgument(f"--limit must be between 1 and {max_limit}")
    if source is not None and matching is not None and matching.source != source:
        raise InvalidArgument("two different sources given")
    wanted = (matching or DeadLetterFilter(source=source)).checked(config)
    if wanted.since and wanted.until and wanted.since >= wanted.until:
        raise InvalidArgument("since must be before until")
    matched = await store.queue.count_dead_letters(wanted)
    jobs = await store.queue.list_dead_letters(wanted, limit=limit, order="oldest_failure")
    if expect is not None and not dry_run and len(jobs) != expect:
        raise OperationRefused(
            f"the selection changed since the preview: {len(jobs)} dead letters now, "
            f"{expect} previewed; preview again"
        )
    report = await _requeue(store, config, jobs, actor=actor, dry_run=dry_run)
    return DlqRetryResult(report.dry_run, report.items, matched=matched)


async def _requeue(
    store: Store, config: Config, jobs: list[JobDetail], *, actor: str, dry_run: bool
) -> DlqRetryResult:
    items: dict[str, RetriedJob] = {}
    runnable: list[JobDetail] = []
    for job in jobs:
        reason = why_not_runnable(job, config)
        if reason is not None:
            items[job.id] = _item(job, "refused", reason)
        else:
            runnable.append(job)
    moved: set[str] = set()
    if runnable and not dry_run:
        # Each job gets its route's attempts again (a retry schedule's length + 1), numbered
        # on from those it spent.
        by_grant: dict[int, list[str]] = {}
        for job in runnable:
            by_grant.setdefault(config.attempts_for(job.source, job.action), []).append(job.id)
        for grant, ids in by_grant.items():
            moved.update(
                await store.queue.requeue_jobs(
                    ids,
                    from_states=(JobState.FAILED,),
                    trigger=Trigger.DLQ_RETRY,
                    more_attempts=grant,
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
    return DlqRetryResult(dry_run, [items[job.id] for job in jobs])


def _item(job: JobDetail, outcome: Any, reason: str | None = None) -> RetriedJob:
    return RetriedJob(
        job_id=job.id,
        delivery_id=job.delivery_id,
        source=job.source,
        action=job.action,
        outcome=outcome,
        reason=reason,
        last_error=job.last_error,
    )
