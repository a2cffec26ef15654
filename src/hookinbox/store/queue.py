"""The job queue: claiming, leases, settling, dead letters and their retry.

States of a job: ``accepted`` (waiting, incl. a scheduled retry) -> ``processing``
(leased) -> ``completed`` | back to ``accepted`` | ``failed`` (a dead letter). Every
time comes from the database clock, never a worker's. Claim and settle are the hot path
(:mod:`hookinbox.store.hot_path`, one statement each on PostgreSQL); the rest is here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Literal, get_args

from hookinbox import sealing
from hookinbox.codes import DEFERRING_STATUSES, SettleOutcome, http_status_code
from hookinbox.sealing import Sealer
from hookinbox.store.audit import AUDIT
from hookinbox.store.hot_path import HotPath, settle_params
from hookinbox.store.operator_records import JobDetail
from hookinbox.store.records import (
    EVERY_DEAD_LETTER,
    AttemptDetail,
    AttemptView,
    ClaimedJob,
    DeadLetterCriteria,
    JobState,
    Settlement,
    WaitingBehind,
)
from hookinbox.store.sql import WAKE, Sql, Tx, many, rows
from hookinbox.store.statements import load_statements

if TYPE_CHECKING:
    from hookinbox.store.driver import Driver

_SQL = load_statements("queue")
_GET_JOB = _SQL["get_job"]

#: How the one dead-letter list is ordered: ``newest_job`` walks the time-ordered job id
#: (the admin's pages), the others the failure time (the CLI's list, a bulk retry).
#: ``before`` (a job id) continues after that job in the same order; with a failure
#: order it must still be a dead letter (a retried job has no failure time).
DeadLetterOrder = Literal["newest_job", "newest_failure", "oldest_failure"]
_DEAD_LETTERS: dict[DeadLetterOrder, Sql] = {
    order: _SQL[f"dead_letters_{order}"] for order in get_args(DeadLetterOrder)
}
_COUNT_DEAD = _SQL["count_dead"]
#: The ended attempts, oldest first, then the running one: an attempt row is written only
#: when it ends (:mod:`hookinbox.store.hot_path`), so a leased job's attempt under way
#: (or whose lease ran out, not yet taken over) is read from the job's lease.
_ATTEMPTS = _SQL["attempts"]
#: Waits a target asked for (429/503 with Retry-After) that gave their attempt back.
_TARGET_DEFERRALS = _SQL["target_deferrals"]
#: The head of an ordered job's key that it waits behind, and how many are before it.
_WAITING_BEHIND = _SQL["waiting_behind"]
#: Attempts are never reset: a requeued job is granted ``:more`` attempts on top of those
#: it spent, so attempt numbers count on across replays and retries (``attempts`` is
#: every attempt the job ever made, ``max_attempts`` the last one it may make).
_REQUEUE = _SQL["requeue"]
#: Renewing every lease a worker holds, in one statement. A lease token is one claim's
#: and random: a job whose token is one of ours is leased to us.
_RENEW_LEASES = _SQL["renew_leases"]


def _requeue(
    job_ids: Sequence[str],
    states: Sequence[JobState],
    trigger: str,
    more_attempts: int,
    actor: str,
    command: str,
) -> Tx[list[str]]:
    moved = yield rows(
        _REQUEUE, ids=list(job_ids), states=list(states), trigger=trigger, more=more_attempts
    )
    by_id = {job["id"]: job for job in moved}
    ordered = [by_id[job_id] for job_id in dict.fromkeys(job_ids) if job_id in by_id]
    if ordered:
        audit = {"actor": actor, "command": command, "detail": f"trigger={trigger}"}
        lines = [
            {**audit, "source": j["source"], "delivery_id": j["delivery_id"], "job_id": j["id"]}
            for j in ordered
        ]
        yield many(AUDIT, lines)
        yield WAKE
    return [job["id"] for job in ordered]


class Queue:
    def __init__(self, db: Driver, hot_path: HotPath, sealer: Sealer) -> None:
        self._db = db
        self._hot = hot_path
        self._sealer = sealer

    async def claim_due_jobs(
        self, worker_id: str, limit: int, lease_seconds: float, *, order_grace: float = 0.0
    ) -> list[ClaimedJob]:
        """Lease up to ``limit`` due jobs: accepted and due, or processing with an expired
        lease and attempts left. Each claim counts an attempt. A job of an ordered route
        is due only at the head of its key, and once ``order_grace`` seconds old (a
        worker passes ``[worker] order_grace_seconds``; docs/concepts/ordering.md). A job's
        body is as stored (perhaps sealed): the worker opens it with ``store.sealer``, so
        a job whose key is missing fails alone instead of the whole claim."""
        return await self._hot.claim(worker_id, limit, float(lease_seconds), order_grace)

    async def renew_leases(self, leases: Mapping[str, str], lease_seconds: float) -> set[str]:
        """Renew every lease a worker holds (job id -> lease token) in one statement;
        answers the ids still leased to it (a job missing lost its lease)."""
        if not leases:
            return set()
        found = await self._db.rows(
            _RENEW_LEASES,
            ids=list(leases),
            tokens=sorted(set(leases.values())),
            lease=float(lease_seconds),
        )
        return {r["id"] for r in found if r["id"] in leases}

    async def settle_jobs(self, settlements: Sequence[Settlement]) -> list[bool]:
        """End many leased attempts in ONE commit (a worker's settlements of one loop
        turn). Each applies only while its lease token still holds the job's lease;
        answers, per settlement, whether it did (False: the lease was lost)."""
        if not settlements:
            return []
        return await self._hot.settle([settle_params(s) for s in settlements])

    async def settle_and_claim(
        self,
        settlements: Sequence[Settlement],
        worker_id: str,
        limit: int,
        lease_seconds: float,
        *,
        order_grace: float = 0.0,
    ) -> tuple[list[bool], list[ClaimedJob]]:
        """A worker's loop turn in ONE commit (one statement on PostgreSQL): what
        :meth:`settle_jobs` does to ``settlements`` (each lease checked on its own, the
        answers per settlement), then what :meth:`claim_due_jobs` does for ``limit``
        slots, never taking one of the jobs it has just settled."""
        return await self._hot.settle_and_claim(
            [settle_params(s) for s in settlements],
            worker_id,
            limit,
            float(lease_seconds),
            order_grace,
        )

    async def _settle_one(self, settlement: Settlement) -> bool:
        (ours,) = await self.settle_jobs([settlement])
        return ours

    async def complete_job(
        self,
        job_id: str,
        lease_token: str,
        business_id: str | None,
        *,
        detail: AttemptDetail | None = None,
    ) -> bool:
        """Mark completed if the lease is still ours; False when it was lost."""
        return await self._settle_one(
            Settlement(
                job_id, lease_token, SettleOutcome.COMPLETED, business_id=business_id, detail=detail
            )
        )

    async def retry_job(
        self,
        job_id: str,
        lease_token: str,
        error_code: str,
        delay_seconds: float,
        *,
        detail: AttemptDetail | None = None,
    ) -> bool:
        """Back to accepted, due after ``delay_seconds`` from the database clock."""
        return await self._settle_one(
            Settlement(
                job_id, lease_token, SettleOutcome.RETRY, error_code, delay_seconds, detail=detail
            )
        )

    async def fail_job(
        self,
        job_id: str,
        lease_token: str,
        error_code: str,
        *,
        detail: AttemptDetail | None = None,
    ) -> bool:
        """Dead-letter the job with its error code."""
        return await self._settle_one(
            Settlement(job_id, lease_token, SettleOutcome.FAILED, error_code, detail=detail)
        )

    async def count_target_deferrals(self, job_id: str) -> int:
        """How many times the job's target put it off (429/503 with ``Retry-After``)
        without spending an attempt."""
        codes = sorted(http_status_code(status) for status in DEFERRING_STATUSES)
        return int(await self._db.value(_TARGET_DEFERRALS, id=job_id, codes=codes) or 0)

    async def fail_exhausted_leases(self) -> int:
        """Dead-letter jobs whose lease expired with no attempts left (their worker died on
        the last attempt); return how many."""
        return await self._hot.fail_exhausted()

    async def wait_for_jobs(self, timeout: float) -> None:
        """Return when new jobs may be due (a notification) or after ``timeout``."""
        await self._db.wait_for_jobs(timeout)

    async def requeue_jobs(
        self,
        job_ids: Sequence[str],
        *,
        from_states: Sequence[JobState],
        trigger: str,
        more_attempts: int,
        actor: str,
        command: str,
    ) -> list[str]:
        """Atomically put back to ``accepted`` (due now, ``more_attempts`` granted beyond
        those spent, numbered on from them; ``trigger`` set for the next claim) those of
        ``job_ids`` that are in one of ``from_states`` right now; audit each as ``command``
        by ``actor``; wake the workers. Returns the ids moved."""
        return await self._db.run(
            _requeue(job_ids, from_states, trigger, more_attempts, actor, command)
        )

    async def get_job(self, job_id: str) -> JobDetail | None:
        """One job with its delivery's identity, or None."""
        found = await self._db.row(_GET_JOB, id=job_id)
        return JobDetail.from_row(found, self._db.decode_time) if found is not None else None

    async def waiting_behind(self, job_id: str) -> WaitingBehind | None:
        """The unfinished job of its key an ordered job waits behind (the key's head), or
        None (not ordered, not waiting, or first of its key)."""
        found = await self._db.row(_WAITING_BEHIND, id=job_id)
        return None if found is None else WaitingBehind.from_row(found, self._db.decode_time)

    async def list_attempts(self, job_id: str) -> list[AttemptView]:
        """Every attempt of a job, oldest first."""
        found = await self._db.rows(_ATTEMPTS, id=job_id)
        views = [AttemptView.from_row(r, self._db.decode_time) for r in found]
        return [self._opened(job_id, view) for view in views]

    def _opened(self, job_id: str, view: AttemptView) -> AttemptView:
        """The attempt with its answer snippet opened, when it was sealed."""
        if not sealing.is_sealed_text(view.response_snippet):
            return view
        assert view.response_snippet is not None
        aad = sealing.snippet_aad(job_id, view.number)
        return replace(view, response_snippet=self._sealer.open_text(view.response_snippet, aad))

    async def list_dead_letters(
        self,
        matching: DeadLetterCriteria = EVERY_DEAD_LETTER,
        *,
        before: str | None = None,
        order: DeadLetterOrder = "newest_job",
        limit: int = 50,
    ) -> list[JobDetail]:
        """Failed jobs (the one dead-letter listing) that meet ``matching``; a keyset
        page after the job ``before`` in ``order``."""
        found = await self._db.rows(
            _DEAD_LETTERS[order], **matching.params(), before=before, limit=limit
        )
        return [JobDetail.from_row(r, self._db.decode_time) for r in found]

    async def count_dead_letters(self, matching: DeadLetterCriteria = EVERY_DEAD_LETTER) -> int:
        """How many failed jobs :meth:`list_dead_letters` would find with no limit."""
        return int(await self._db.value(_COUNT_DEAD, **matching.params()))
