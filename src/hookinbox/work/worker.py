"""Workers: claim due jobs with a lease, run them, retry with backoff, dead-letter.

A worker claims as many due jobs as it has free slots, in one statement, and sleeps until
the store signals new work (LISTEN/NOTIFY on PostgreSQL, an in-process event on SQLite)
or the poll interval passes. While an action runs, its lease is renewed; a worker that
dies stops renewing, the lease expires, and any worker takes the job again. ``completed``
is written only after the action returned, and with the lease token, so a worker that
lost its lease cannot overwrite what another worker did.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import time
from collections.abc import Mapping
from typing import Any

import httpx

from hookinbox.backoff import JITTER, backoff_seconds
from hookinbox.codes import JobCode, error_code_of
from hookinbox.config import Config
from hookinbox.errors import MalformedJson, TargetAnswered
from hookinbox.logs import get_logger
from hookinbox.metrics import Metrics
from hookinbox.store import AttemptDetail, ClaimedJob, Store
from hookinbox.tracing import Tracing, build_tracing
from hookinbox.verify.bodies import BodyReader
from hookinbox.work.actions import Action, Event
from hookinbox.work.effects import EffectInProgress, JobContext, JobSettled
from hookinbox.work.handlers import PayloadInvalid, load_services
from hookinbox.work.retry_policy import Decision, Failure, RetryPolicy
from hookinbox.work.route_actions import build_actions, build_retry_policies, build_targets

log = get_logger("hookinbox.worker")


class WorkerPool:
    def __init__(
        self,
        config: Config,
        store: Store,
        *,
        actions: Mapping[tuple[str, str], Action] | None = None,
        name: str | None = None,
        metrics: Metrics | None = None,
        services: Mapping[str, Any] | None = None,
        tracing: Tracing | None = None,
    ) -> None:
        self._config = config
        #: Spans of claims, attempts and forwards (a no-op unless ``[otel] enabled``).
        self._tracing = tracing if tracing is not None else build_tracing(config)
        self._own_tracing = tracing is None
        self.metrics = metrics or Metrics(
            config.sources, slowest_job_seconds=config.worker.job_timeout_seconds
        )
        self._settings = config.worker
        self._store = store
        #: What handlers ask for by name (see hookinbox.work.handlers), also ctx.services.
        self.services = load_services(config) if services is None else services
        self._client = httpx.AsyncClient()
        self._actions = (
            dict(actions)
            if actions is not None
            else build_actions(
                config,
                self._client,
                self.metrics,
                self.services,
                tracing=self._tracing,
                store=store,
            )
        )
        self.name = name or f"{socket.gethostname()}:{os.getpid()}"
        #: Each route's retry policy (its schedule and dead-letter statuses), and the
        #: default one for a job whose route is gone.
        self._policies = build_retry_policies(config)
        self._default_policy = RetryPolicy.build(config.worker)
        #: What each attempt records as its target (a forward's host and path, a handler).
        self._targets = build_targets(config)
        #: Each source's stored body read as its receiver read it (JSON, or a form).
        self._bodies = BodyReader(config)
        self._running: set[asyncio.Task[None]] = set()
        self._slot_freed = asyncio.Event()

    async def run(self, stop: asyncio.Event) -> None:
        """Work until ``stop`` is set, then let running jobs finish (their leases hold)."""
        log.info("worker_started", worker=self.name, concurrency=self._settings.concurrency)
        sweep_every = max(1.0, self._settings.lease_seconds / 2)
        next_sweep = 0.0
        try:
            while not stop.is_set():
                try:
                    if time.monotonic() >= next_sweep:
                        dead = await self._store.queue.fail_exhausted_leases()
                        if dead:
                            log.warning("leases_exhausted", jobs=dead)
                        next_sweep = time.monotonic() + sweep_every
                    claimed = await self._claim()
                except Exception as exc:
                    # Whatever the store raised, the pool keeps working: a pool that died
                    # here would leave the receiver accepting jobs nobody runs.
                    log.error("worker_store_error", worker=self.name, error=error_code_of(exc))
                    await _sleep_or_stop(stop, self._settings.poll_interval_seconds)
                    continue
                if claimed:
                    continue
                await self._idle(stop)
        finally:
            if self._running:
                # Bounded: a job still running after its lease is taken over anyway.
                await asyncio.wait(self._running, timeout=self._settings.lease_seconds)
            await self._client.aclose()
            if self._own_tracing:
                self._tracing.shutdown()
            log.info("worker_stopped", worker=self.name)

    async def _claim(self) -> int:
        free = self._settings.concurrency - len(self._running)
        if free <= 0:
            return 0
        started = self._tracing.now_ns()
        jobs = await self._store.queue.claim_due_jobs(self.name, free, self._settings.lease_seconds)
        self._tracing.claimed(started, jobs)
        for job in jobs:
            task = asyncio.create_task(self.run_job(job))
            self._running.add(task)
            task.add_done_callback(self._job_done)
        # A full claim means more may be waiting: claim again once a slot frees.
        return len(jobs) if len(jobs) == free and free > 0 else 0

    def _job_done(self, task: asyncio.Task[None]) -> None:
        self._running.discard(task)
        self._slot_freed.set()

    async def _idle(self, stop: asyncio.Event) -> None:
        self._slot_freed.clear()
        waiters = [
            asyncio.ensure_future(
                self._store.queue.wait_for_jobs(self._settings.poll_interval_seconds)
            ),
            asyncio.ensure_future(stop.wait()),
        ]
        if len(self._running) >= self._settings.concurrency:
            waiters.append(asyncio.ensure_future(self._slot_freed.wait()))
        try:
            await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in waiters:
                waiter.cancel()

    async def run_job(self, job: ClaimedJob) -> None:
        started = time.monotonic()
        fields = {
            "job_id": job.id,
            "delivery_id": job.delivery_id,
            "source": job.source,
            "action": job.action,
            "attempt": job.attempts,
            "trigger": job.trigger,
        }
        self.metrics.job_started(job.source, job.action)
        heartbeat = asyncio.create_task(self._renew(job))
        answered: list[JobContext] = []  # the job's context, for a forward's 2xx answer
        try:
            with self._tracing.attempt(job):
                business_id = await asyncio.wait_for(
                    self._execute(job, answered), self._settings.job_timeout_seconds
                )
        except (_Unrunnable, PayloadInvalid) as exc:
            failure = Failure(exc.code, final=True)
            await self._settle_failure(job, failure, fields, self._detail(job, started))
        except EffectInProgress as exc:
            await self._defer(job, exc.code, fields, self._detail(job, started))
        except TimeoutError:
            # A hung action would otherwise renew its lease forever. (A sync handler's
            # thread cannot be stopped; the effects ledger keeps its effect single.)
            failure = Failure(JobCode.JOB_TIMEOUT)
            await self._settle_failure(job, failure, fields, self._detail(job, started))
        except Exception as exc:
            failure = Failure.of(exc, error_code_of(exc))
            await self._settle_failure(job, failure, fields, self._detail(job, started, exc))
        else:
            if isinstance(business_id, JobSettled):
                self._log_settled(job, business_id, fields, started)
                return
            ctx = answered[0] if answered else None
            detail = self._detail(job, started, answered=ctx)
            ours = await self._complete(job, business_id, detail)
            log.info(
                "job_completed" if ours else "job_lease_lost",
                **fields,
                business_id=business_id,
                duration_ms=round((time.monotonic() - started) * 1000, 1),
            )
            if ours:
                self.metrics.job_completed(job.source, job.action)
        finally:
            heartbeat.cancel()

    def _log_settled(
        self, job: ClaimedJob, settled: JobSettled, fields: dict[str, object], started: float
    ) -> None:
        """The action settled its job in its own transaction (a resource route)."""
        log.info(
            f"job_{settled.state}" if settled.ours else "job_lease_lost",
            **fields,
            outcome=settled.outcome,
            business_id=settled.business_id,
            duration_ms=round((time.monotonic() - started) * 1000, 1),
        )
        if settled.ours and settled.state == "completed":
            self.metrics.job_completed(job.source, job.action)
        elif settled.ours and settled.state == "failed":
            self.metrics.job_failed(job.source, job.action, settled.outcome)

    def _detail(
        self,
        job: ClaimedJob,
        started: float,
        exc: BaseException | None = None,
        *,
        answered: JobContext | None = None,
    ) -> AttemptDetail:
        """What the attempt met: its target, the status and a snippet of the target's
        answer (never the payload sent), and how long it took."""
        status, snippet = None, None
        if isinstance(exc, TargetAnswered):
            status, snippet = exc.status, exc.snippet or None
        elif answered is not None:
            status, snippet = answered.answer_status, answered.answer_snippet or None
        return AttemptDetail(
            target=self._targets.get((job.source, job.action)),
            http_status=status,
            snippet=snippet,
            duration_ms=round((time.monotonic() - started) * 1000),
        )

    async def _execute(
        self, job: ClaimedJob, answered: list[JobContext]
    ) -> str | JobSettled | None:
        action = self._actions.get((job.source, job.action))
        if action is None:
            raise _Unrunnable(JobCode.UNKNOWN_ACTION)
        if job.body is None:
            raise _Unrunnable(JobCode.PAYLOAD_PURGED)
        try:
            payload = self._bodies.parse(job.source, job.body, job.headers)
        except MalformedJson:
            raise _Unrunnable(JobCode.MALFORMED_JSON) from None
        event = Event(
            delivery_id=job.delivery_id,
            source=job.source,
            event_id=job.event_id,
            type=job.event_type,
            payload=payload,
            body=job.body,
            headers=job.headers,
            attempt=job.attempts,
        )
        ctx = JobContext(
            store=self._store,
            job_id=job.id,
            delivery_id=job.delivery_id,
            attempt=job.attempts,
            trigger=job.trigger,
            lease_token=job.lease_token,
            services=self.services,
        )
        answered.append(ctx)
        ran = time.monotonic()
        try:
            result = await action.run(event, ctx)
            return ctx.settled if ctx.settled is not None else result
        finally:
            self.metrics.job_ran(job.source, job.action, time.monotonic() - ran)

    async def _defer(
        self, job: ClaimedJob, code: str, fields: dict[str, object], detail: AttemptDetail
    ) -> None:
        """Wait for another job without spending an attempt: at most a lease, since by
        then its effect is recorded or its worker is gone."""
        delay = min(self._settings.lease_seconds, self._backoff(job.attempts))
        try:
            await self._store.queue.defer_job(job.id, job.lease_token, code, delay, detail=detail)
            log.info("job_deferred", **fields, reason=code, retry_in_s=round(delay, 3))
        except Exception as exc:
            log.error("job_settle_failed", **fields, error=code, store_error=error_code_of(exc))

    async def _decide(self, job: ClaimedJob, failure: Failure) -> Decision:
        """The route's policy over this failure (see work/retry_policy.py)."""
        policy = self._policies.get((job.source, job.action), self._default_policy)
        deferrals = 0
        if policy.asks_to_wait(failure):
            deferrals = await self._store.queue.count_target_deferrals(job.id)
        return policy.decide(
            failure, attempts=job.attempts, max_attempts=job.max_attempts, deferrals=deferrals
        )

    async def _settle_failure(
        self,
        job: ClaimedJob,
        failure: Failure,
        fields: dict[str, object],
        detail: AttemptDetail,
    ) -> None:
        code, queue = failure.code, self._store.queue
        try:
            decision = await self._decide(job, failure)
            code, delay = decision.code, decision.delay
            if decision.kind == "dead_letter":
                await queue.fail_job(job.id, job.lease_token, code, detail=detail)
                log.error("job_failed", **fields, error=code)
                self.metrics.job_failed(job.source, job.action, code)
            elif decision.kind == "defer":
                await queue.defer_job(job.id, job.lease_token, code, delay, detail=detail)
                log.info("job_deferred", **fields, reason=code, retry_in_s=round(delay, 3))
            else:
                await queue.retry_job(job.id, job.lease_token, code, delay, detail=detail)
                log.warning("job_retry", **fields, error=code, retry_in_s=round(delay, 3))
                self.metrics.job_retried(job.source, job.action, code)
        except Exception as exc:
            # The lease will expire and the job comes back: nothing is lost.
            log.error("job_settle_failed", **fields, error=code, store_error=error_code_of(exc))

    def _backoff(self, attempt: int) -> float:
        return backoff_seconds(
            attempt,
            base=self._settings.backoff_base_seconds,
            cap=self._settings.backoff_max_seconds,
            rng=JITTER,
        )

    async def _complete(
        self, job: ClaimedJob, business_id: str | None, detail: AttemptDetail
    ) -> bool:
        for delay in (0.1, 0.5, 1.0, 2.0):
            try:
                return await self._store.queue.complete_job(
                    job.id, job.lease_token, business_id, detail=detail
                )
            except Exception:
                await asyncio.sleep(delay)
        # Could not record completion: the lease expires, the job runs again, and the
        # effects ledger makes sure its effects are not made twice.
        return False

    async def _renew(self, job: ClaimedJob) -> None:
        interval = max(0.5, self._settings.lease_seconds / 3)
        while True:
            await asyncio.sleep(interval)
            try:
                if not await self._store.queue.renew_lease(
                    job.id, job.lease_token, self._settings.lease_seconds
                ):
                    return
            except Exception:  # the store is away for a moment: the next renewal may do
                continue


class _Unrunnable(Exception):
    """The job cannot succeed by being retried."""

    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code


async def _sleep_or_stop(stop: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), seconds)
