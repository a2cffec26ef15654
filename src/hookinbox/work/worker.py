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
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

import httpx

from hookinbox.backoff import JITTER, backoff_seconds
from hookinbox.codes import JobCode, SettleOutcome, error_code_of
from hookinbox.config import Config
from hookinbox.errors import MalformedJson, TargetAnswered
from hookinbox.logs import get_logger
from hookinbox.metrics import Metrics
from hookinbox.store import AttemptDetail, ClaimedJob, Settlement, Store
from hookinbox.tracing import Tracing, build_tracing
from hookinbox.verify.bodies import BodyReader
from hookinbox.work.actions import Action, Event
from hookinbox.work.effects import EffectInProgress, JobContext, JobSettled
from hookinbox.work.handlers import PayloadInvalid, load_services
from hookinbox.work.retry_policy import Decision, Failure, RetryPolicy
from hookinbox.work.route_actions import build_actions, build_retry_policies, build_targets
from hookinbox.work.settling import SettleBatcher

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
        #: Handlers running now (a slot is free again once its handler returns).
        self._busy = 0
        #: Slots a claim on its way to the store will fill (no other claim counts them).
        self._claiming = 0
        self._slot_freed = asyncio.Event()
        #: Jobs this worker holds a lease on (id -> lease token), claim to settlement.
        self._leases: dict[str, str] = {}
        #: Set while :meth:`run` works: only then does a settle batch claim jobs too.
        self._stop: asyncio.Event | None = None
        self._settler = SettleBatcher(store, settle_batch=self._settle_and_refill)
        self._timeouts = _JobTimeouts(self._settings.job_timeout_seconds)

    async def run(self, stop: asyncio.Event) -> None:
        """Work until ``stop`` is set, then let running jobs finish (their leases hold)."""
        log.info("worker_started", worker=self.name, concurrency=self._settings.concurrency)
        sweep_every = max(1.0, self._settings.lease_seconds / 2)
        next_sweep = 0.0
        renewer = asyncio.create_task(self._renew_leases())
        self._stop = stop
        try:
            while not stop.is_set():
                if self._free_slots() <= 0:
                    await self._slot_or_stop(stop)
                    continue
                try:
                    if time.monotonic() >= next_sweep:
                        dead = await self._store.queue.fail_exhausted_leases()
                        if dead:
                            log.warning("leases_exhausted", jobs=dead)
                        next_sweep = time.monotonic() + sweep_every
                    claimed = await self._claim()
                except Exception as exc:
                    # Whatever the store raised, the pool keeps working: a pool that died
                    # here would leave the receiver accepting jobs nobody ran.
                    log.error("worker_store_error", worker=self.name, error=error_code_of(exc))
                    await _sleep_or_stop(stop, self._settings.poll_interval_seconds)
                    continue
                if claimed:
                    continue
                await self._idle(stop)
        finally:
            # Bounded: a job still running after its lease is taken over anyway. A settle
            # batch on its way may still start the jobs it claimed: those run too.
            deadline = time.monotonic() + self._settings.lease_seconds
            while self._running and (left := deadline - time.monotonic()) > 0:
                await asyncio.wait(set(self._running), timeout=left)
            renewer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await renewer
            await self._client.aclose()
            if self._own_tracing:
                self._tracing.shutdown()
            log.info("worker_stopped", worker=self.name)

    def _free_slots(self) -> int:
        return self._settings.concurrency - self._busy - self._claiming

    async def _claim(self) -> int:
        free = self._free_slots()
        if free <= 0:
            return 0
        started = self._tracing.now_ns()
        self._claiming += free
        try:
            jobs = await self._store.queue.claim_due_jobs(
                self.name, free, self._settings.lease_seconds
            )
        finally:
            self._claiming -= free
        self._start(jobs, started)
        # A full claim means more may be waiting: claim again once a slot frees.
        return len(jobs) if len(jobs) == free else 0

    async def _settle_and_refill(self, settlements: Sequence[Settlement]) -> list[bool]:
        """A settle batch, and while the pool runs, the claim of the slots free now in
        the same statement (one round trip and one commit per loop turn where there
        were two). The run loop does not claim the slots this claim will fill."""
        free = self._free_slots() if self._stop is not None and not self._stop.is_set() else 0
        if free <= 0:
            return await self._store.queue.settle_jobs(settlements)
        started = self._tracing.now_ns()
        self._claiming += free
        jobs: list[ClaimedJob] = []
        try:
            answers, jobs = await self._store.queue.settle_and_claim(
                settlements, self.name, free, self._settings.lease_seconds
            )
        finally:
            self._claiming -= free
            if len(jobs) < free:
                # Slots this claim did not fill: the run loop claims (or idles) again.
                self._slot_freed.set()
        self._start(jobs, started)
        return answers

    def _start(self, jobs: list[ClaimedJob], claim_started_ns: int) -> None:
        self._tracing.claimed(claim_started_ns, jobs)
        self._busy += len(jobs)
        for job in jobs:
            task = asyncio.create_task(self._work(job))
            self._running.add(task)
            task.add_done_callback(self._running.discard)

    async def _slot_or_stop(self, stop: asyncio.Event) -> None:
        """Every slot is running a handler or about to be filled: nothing to claim until
        one is free."""
        self._slot_freed.clear()
        if self._free_slots() > 0:
            return
        freed = asyncio.ensure_future(self._slot_freed.wait())
        stopped = asyncio.ensure_future(stop.wait())
        try:
            await asyncio.wait((freed, stopped), return_when=asyncio.FIRST_COMPLETED)
        finally:
            freed.cancel()
            stopped.cancel()
        # One more turn of the loop: the handlers that return together free their slots
        # together, and one claim fills them all (not a claim of one job per slot).
        await asyncio.sleep(0)

    async def _idle(self, stop: asyncio.Event) -> None:
        self._slot_freed.clear()
        waiters = [
            asyncio.ensure_future(
                self._store.queue.wait_for_jobs(self._settings.poll_interval_seconds)
            ),
            asyncio.ensure_future(stop.wait()),
        ]
        try:
            await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in waiters:
                waiter.cancel()

    async def _work(self, job: ClaimedJob) -> None:
        """A claimed job: its slot is free again as soon as its handler returns, while its
        settlement waits for the next batch."""
        started = time.monotonic()
        self._leases[job.id] = job.lease_token
        try:
            try:
                ended = await self._attempt(job, started)
            finally:
                self._busy -= 1
                self._slot_freed.set()
            await self._settle(job, ended, started)
        finally:
            self._leases.pop(job.id, None)

    async def run_job(self, job: ClaimedJob) -> None:
        """Run one claimed job to its settlement (how ``hookinbox.testing`` runs jobs)."""
        started = time.monotonic()
        await self._settle(job, await self._attempt(job, started), started)

    async def _attempt(self, job: ClaimedJob, started: float) -> Settlement | JobSettled | None:
        """Run the job's action; how its attempt ends, with what it met (or what the action
        settled; None: the store could not say how, and the lease is left to expire)."""
        self.metrics.job_started(job.source, job.action)
        answered: list[JobContext] = []  # the job's context, for a forward's 2xx answer
        try:
            with self._tracing.attempt(job):
                # A hung action would otherwise hold its lease forever. (A sync handler's
                # thread cannot be stopped; the effects ledger keeps its effect single.)
                task = self._timeouts.watch()
                try:
                    result = await self._execute(job, answered)
                except asyncio.CancelledError:
                    if self._timeouts.done(task):
                        raise TimeoutError from None
                    raise
                finally:
                    self._timeouts.done(task)
        except (_Unrunnable, PayloadInvalid) as exc:
            failure = Failure(exc.code, final=True)
            return await self._failure(job, failure, self._detail(job, started))
        except EffectInProgress as exc:
            # Wait for another job without spending an attempt: at most a lease, since by
            # then its effect is recorded or its worker is gone.
            delay = min(self._settings.lease_seconds, self._backoff(job.attempts))
            detail = self._detail(job, started)
            return Settlement(
                job.id, job.lease_token, SettleOutcome.DEFERRED, exc.code, delay, detail=detail
            )
        except TimeoutError:
            failure = Failure(JobCode.JOB_TIMEOUT)
            return await self._failure(job, failure, self._detail(job, started))
        except Exception as exc:
            failure = Failure.of(exc, error_code_of(exc))
            return await self._failure(job, failure, self._detail(job, started, exc))
        if isinstance(result, JobSettled):
            return result
        detail = self._detail(job, started, answered=answered[0] if answered else None)
        completed = SettleOutcome.COMPLETED
        return Settlement(job.id, job.lease_token, completed, business_id=result, detail=detail)

    async def _failure(
        self, job: ClaimedJob, failure: Failure, detail: AttemptDetail
    ) -> Settlement | None:
        """The route's policy over a failed attempt, as its settlement: a retry, a wait
        that gives the attempt back (Retry-After, a held destination) or a dead letter."""
        try:
            decision = await self._decide(job, failure)
        except Exception as exc:
            # The lease will expire and the job comes back: nothing is lost.
            fields = _log_fields(job)
            log.error(
                "job_settle_failed", **fields, error=failure.code, store_error=error_code_of(exc)
            )
            return None
        return Settlement(
            job.id, job.lease_token, decision.outcome, decision.code, decision.delay, detail=detail
        )

    async def _settle(
        self, job: ClaimedJob, ended: Settlement | JobSettled | None, started: float
    ) -> None:
        fields = _log_fields(job)
        if ended is None:
            return
        if isinstance(ended, JobSettled):
            self._log_settled(job, ended, fields, started)
            return
        try:
            ours = await self._settler.settle(ended)
        except Exception as exc:
            # The lease will expire and the job comes back: nothing is lost, and the
            # effects ledger keeps its effects single.
            log.error(
                "job_settle_failed",
                **fields,
                error=ended.error_code,
                store_error=error_code_of(exc),
            )
            return
        duration_ms = round((time.monotonic() - started) * 1000, 1)
        if not ours:
            log.info("job_lease_lost", **fields, duration_ms=duration_ms)
        elif ended.outcome == SettleOutcome.COMPLETED:
            log.info(
                "job_completed", **fields, business_id=ended.business_id, duration_ms=duration_ms
            )
            self.metrics.job_completed(job.source, job.action)
        elif ended.outcome == SettleOutcome.RETRY:
            retry_in_s = round(ended.delay_seconds, 3)
            log.warning("job_retry", **fields, error=ended.error_code, retry_in_s=retry_in_s)
            self.metrics.job_retried(job.source, job.action, ended.error_code or "")
        elif ended.outcome == SettleOutcome.DEFERRED:
            retry_in_s = round(ended.delay_seconds, 3)
            log.info("job_deferred", **fields, reason=ended.error_code, retry_in_s=retry_in_s)
        else:
            log.error("job_failed", **fields, error=ended.error_code)
            self.metrics.job_failed(job.source, job.action, ended.error_code or "")

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

    async def _decide(self, job: ClaimedJob, failure: Failure) -> Decision:
        """The route's policy over this failure (see work/retry_policy.py)."""
        policy = self._policies.get((job.source, job.action), self._default_policy)
        deferrals = 0
        if policy.asks_to_wait(failure):
            deferrals = await self._store.queue.count_target_deferrals(job.id)
        return policy.decide(
            failure, attempts=job.attempts, max_attempts=job.max_attempts, deferrals=deferrals
        )

    def _backoff(self, attempt: int) -> float:
        return backoff_seconds(
            attempt,
            base=self._settings.backoff_base_seconds,
            cap=self._settings.backoff_max_seconds,
            rng=JITTER,
        )

    async def _renew_leases(self) -> None:
        """Renew the lease of every job this worker holds, in one statement, a few times
        per lease (a job is held from its claim until its settlement commits)."""
        interval = max(0.5, self._settings.lease_seconds / 3)
        while True:
            await asyncio.sleep(interval)
            held = dict(self._leases)
            if not held:
                continue
            try:
                kept = await self._store.queue.renew_leases(held, self._settings.lease_seconds)
            except Exception:  # the store is away for a moment: the next renewal may do
                continue
            for job_id in held.keys() - kept:
                # Lost (another worker took it over): stop renewing it; its settlement
                # will find the lease gone.
                if self._leases.get(job_id) == held[job_id]:
                    del self._leases[job_id]


def _log_fields(job: ClaimedJob) -> dict[str, object]:
    """What every log line of a job's attempt says about it (ids, never its payload)."""
    return {
        "job_id": job.id,
        "delivery_id": job.delivery_id,
        "source": job.source,
        "action": job.action,
        "attempt": job.attempts,
        "trigger": job.trigger,
    }


class _JobTimeouts:
    """Every running job's timeout, on one timer.

    ``asyncio.timeout`` per job schedules a timer and cancels it again for every job (in
    a profile of a no-op drain, 8% of the worker's CPU). A pool's jobs all have the same
    timeout, so their deadlines come in the order they start: the running jobs wait in
    start order, and one timer, set for the oldest, cancels each job whose time ran out.
    The job's :meth:`done` then says its cancellation was this timeout's (taken back, as
    ``asyncio.timeout`` takes it back), and the attempt raises ``TimeoutError``.
    """

    def __init__(self, seconds: float) -> None:
        self._seconds = seconds
        self._running: OrderedDict[asyncio.Task[Any], float] = OrderedDict()
        self._expired: set[asyncio.Task[Any]] = set()
        self._timer: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def watch(self) -> asyncio.Task[Any]:
        """Start the current task's time (inside the job's task)."""
        task = asyncio.current_task()
        assert task is not None
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            # A pool used from another event loop (hookinbox.testing may): the timer and
            # the tasks of the former one are gone with it.
            self._running.clear()
            self._expired.clear()
            self._timer, self._loop = None, loop
        deadline = loop.time() + self._seconds
        self._running[task] = deadline
        if self._timer is None:
            self._timer = loop.call_at(deadline, self._expire)
        return task

    def done(self, task: asyncio.Task[Any]) -> bool:
        """Stop watching ``task``; whether its time ran out and nothing else cancelled it
        (its cancellation is then a timeout's)."""
        self._running.pop(task, None)
        if task not in self._expired:
            return False
        self._expired.discard(task)
        return task.uncancel() == 0

    def _expire(self) -> None:
        loop = asyncio.get_running_loop()
        self._timer = None
        now = loop.time()
        while self._running:
            task, deadline = next(iter(self._running.items()))
            if deadline > now:
                self._timer = loop.call_at(deadline, self._expire)
                return
            del self._running[task]
            self._expired.add(task)
            task.cancel()


class _Unrunnable(Exception):
    """The job cannot succeed by being retried."""

    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code


async def _sleep_or_stop(stop: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), seconds)
