"""What each settled attempt logs and counts: one line a job's end, ids and codes only.

Written once the store has answered (a settlement applies only while its lease holds),
so a line says what the store kept: ``job_completed``, ``job_retry``, ``job_deferred``,
``job_failed`` or ``job_lease_lost``.
"""

from __future__ import annotations

import time

from hookinbox.codes import SettleOutcome
from hookinbox.logs import get_logger
from hookinbox.metrics import Metrics
from hookinbox.store import ClaimedJob, Settlement
from hookinbox.work.effects import JobSettled

log = get_logger("hookinbox.worker")


def log_fields(job: ClaimedJob) -> dict[str, object]:
    """What every log line of a job's attempt says about it (ids, never its payload)."""
    return {
        "job_id": job.id,
        "delivery_id": job.delivery_id,
        "source": job.source,
        "action": job.action,
        "attempt": job.attempts,
        "trigger": job.trigger,
    }


def report_settled(
    job: ClaimedJob, ended: Settlement, ours: bool, started: float, metrics: Metrics
) -> None:
    """A settlement the store took (``ours``) or refused (the lease was lost)."""
    fields = log_fields(job)
    duration_ms = round((time.monotonic() - started) * 1000, 1)
    if not ours:
        log.info("job_lease_lost", **fields, duration_ms=duration_ms)
    elif ended.outcome == SettleOutcome.COMPLETED:
        log.info("job_completed", **fields, business_id=ended.business_id, duration_ms=duration_ms)
        metrics.job_completed(job.source, job.action)
    elif ended.outcome == SettleOutcome.RETRY:
        retry_in_s = round(ended.delay_seconds, 3)
        log.warning("job_retry", **fields, error=ended.error_code, retry_in_s=retry_in_s)
        metrics.job_retried(job.source, job.action, ended.error_code or "")
    elif ended.outcome == SettleOutcome.DEFERRED:
        retry_in_s = round(ended.delay_seconds, 3)
        log.info("job_deferred", **fields, reason=ended.error_code, retry_in_s=retry_in_s)
    else:
        log.error("job_failed", **fields, error=ended.error_code)
        metrics.job_failed(job.source, job.action, ended.error_code or "")


def report_self_settled(
    job: ClaimedJob, settled: JobSettled, started: float, metrics: Metrics
) -> None:
    """The action settled its job in its own transaction (a resource route)."""
    log.info(
        f"job_{settled.state}" if settled.ours else "job_lease_lost",
        **log_fields(job),
        outcome=settled.outcome,
        business_id=settled.business_id,
        duration_ms=round((time.monotonic() - started) * 1000, 1),
    )
    if settled.ours and settled.state == "completed":
        metrics.job_completed(job.source, job.action)
    elif settled.ours and settled.state == "failed":
        metrics.job_failed(job.source, job.action, settled.outcome)


def report_unsettled(job: ClaimedJob, error: str | None, store_error: str) -> None:
    """The store could not take the settlement: the lease will expire and the job comes
    back (the effects ledger keeps its effects single)."""
    log.error("job_settle_failed", **log_fields(job), error=error, store_error=store_error)
