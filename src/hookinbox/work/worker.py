"""Workers: claim due jobs with a lease, run them, retry with backoff, dead-letter.

A worker claims as many due jobs as it has free slots, in one statement, and sleeps until
the store signals new work (LISTEN/NOTIFY on PostgreSQL, an in-process event on SQLite)
or the poll interval passes. While an action runs, its lease is renewed; a worker that
dies stops renewing, the lease expires, and any worker takes the job again. ``completed``
is written only after the action returned, and with the lease token, so a worker that
lost its lease cannot overwrite what another worker did.

The pool here is the loop, its slots and its claims; an attempt is run and judged by
:mod:`hookinbox.work.attempt`, settled through :mod:`hookinbox.work.settling`, reported
by :mod:`hookinbox.work.outcomes`; leases are renewed by :mod:`hookinbox.work.leases`.
Its collaborators (actions, HTTP client, metrics, tracing, services) are handed in by
the composition root (:func:`hookinbox.app.build_worker_pool`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import time
from collections.abc import Mapping, Sequence
from typing import Any

import httpx

from hookinbox.codes import error_code_of
from hookinbox.config import Config
from hookinbox.logs import get_logger
from hookinbox.metrics import Metrics
from hookinbox.store import ClaimedJob, Settlement, Store
from hookinbox.tracing import Tracing
from hookinbox.work.actions import Action
from hookinbox.work.attempt import AttemptRunner, Ended
from hookinbox.work.effects import JobSettled
from hookinbox.work.leases import LeaseKeeper
from hookinbox.work.outcomes import report_self_settled, report_settled, report_unsettled
from hookinbox.work.settling import SettleBatcher

log = get_logger("hookinbox.worker")


class WorkerPool:
    """``client`` is the one the actions forward through: the pool closes it when it
    stops."""

    def __init__(
        self,
        config: Config,
        store: Store,
        *,
        actions: Mapping[tuple[str, str], Action],
        client: httpx.AsyncClient,
        metrics: Metrics,
        services: Mapping[str, Any],
        tracing: Tracing,
        name: str | None = None,
    ) -> None:
        #: Spans of claims, attempts and forwards (a no-op unless ``[otel] enabled``).
        self._tracing = tracing
        self.metrics = metrics
        self._settings = config.worker
        self._store = store
        #: What handlers ask for by name (see hookinbox.work.handlers), also ctx.services.
        self.services = services
        self._client = client
        self.name = name or f"{socket.gethostname()}:{os.getpid()}"
        self._attempts = AttemptRunner(
            config, store, actions=actions, metrics=metrics, services=services, tracing=tracing
        )
        self._running: set[asyncio.Task[None]] = set()
        #: Handlers running now (a slot is free again once its handler returns).
        self._busy = 0
        #: Slots a claim on its way to the store will fill (no other claim counts them).
        self._claiming = 0
        self._slot_freed = asyncio.Event()
        #: Jobs this worker holds a lease on, claim to settlement.
        self._leases = LeaseKeeper(store, self._settings.lease_seconds)
        #: Set while :meth:`run` works: only then does a settle batch claim jobs too.
        self._stop: asyncio.Event | None = None
        self._settler = SettleBatcher(store, settle_batch=self._settle_and_claim)

    async def run(self, stop: asyncio.Event) -> None:
        """Work until ``stop`` is set, then let running jobs finish (their leases hold)."""
        log.info("worker_started", worker=self.name, concurrency=self._settings.concurrency)
        sweep_every = max(1.0, self._settings.lease_seconds / 2)
        next_sweep = 0.0
        renewer = asyncio.create_task(self._leases.run())
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
                    _, more = await self._claim()
                except Exception as exc:
                    # Whatever the store raised, the pool keeps working: a pool that died
                    # here would leave the receiver accepting jobs nobody ran.
                    log.error("worker_store_error", worker=self.name, error=error_code_of(exc))
                    await _sleep_or_stop(stop, self._settings.poll_interval_seconds)
                    continue
                if more:
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
            log.info("worker_stopped", worker=self.name)

    def _free_slots(self) -> int:
        return self._settings.concurrency - self._busy - self._claiming

    async def _claim(self, settling: Sequence[Settlement] = ()) -> tuple[list[bool], bool]:
        """Every claim of the pool: the free slots claimed alone (the run loop), or with
        a settle batch in the same statement (one round trip and one commit per loop turn
        where there were two; only while the pool runs). The slots a claim will fill are
        counted as taken until it answers, so no other claim takes them too.

        The batch's answers, and whether the claim filled every slot it asked for (more
        may be waiting: claim again once a slot frees)."""
        free = self._free_slots()
        if settling and (self._stop is None or self._stop.is_set()):
            free = 0
        if free <= 0:
            return (await self._store.queue.settle_jobs(settling) if settling else []), False
        started = self._tracing.now_ns()
        self._claiming += free
        answers: list[bool] = []
        jobs: list[ClaimedJob] = []
        lease = self._settings.lease_seconds
        grace = self._settings.order_grace_seconds
        try:
            if settling:
                answers, jobs = await self._store.queue.settle_and_claim(
                    settling, self.name, free, lease, order_grace=grace
                )
            else:
                jobs = await self._store.queue.claim_due_jobs(
                    self.name, free, lease, order_grace=grace
                )
        finally:
            self._claiming -= free
            if settling and len(jobs) < free:
                # Slots this claim did not fill: the run loop claims (or idles) again.
                self._slot_freed.set()
        self._start(jobs, started)
        return answers, len(jobs) == free

    async def _settle_and_claim(self, settlements: Sequence[Settlement]) -> list[bool]:
        """How the settle batcher writes a batch: through :meth:`_claim`."""
        answers, _ = await self._claim(settlements)
        return answers

    def _start(self, jobs: list[ClaimedJob], claim_started_ns: int) -> None:
        self._tracing.claimed(claim_started_ns, jobs)
        self._busy += len(jobs)
        if not jobs:
            return
        # One loop lookup per claim: asyncio.create_task asks for the running loop per job,
        # a getpid() system call on CPython 3.11.
        loop = asyncio.get_running_loop()
        for job in jobs:
            task = loop.create_task(self._work(job))
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
        self._leases.hold(job)
        try:
            try:
                ended = await self._attempts.run(job, started)
            finally:
                self._busy -= 1
                self._slot_freed.set()
            await self._settle(job, ended, started)
        finally:
            self._leases.release(job)

    async def run_job(self, job: ClaimedJob) -> None:
        """Run one claimed job to its settlement (how ``hookinbox.testing`` runs jobs)."""
        started = time.monotonic()
        await self._settle(job, await self._attempts.run(job, started), started)

    async def _settle(self, job: ClaimedJob, ended: Ended, started: float) -> None:
        if ended is None:
            return
        if isinstance(ended, JobSettled):
            report_self_settled(job, ended, started, self.metrics)
            return
        try:
            ours = await self._settler.settle(ended)
        except Exception as exc:
            # The lease will expire and the job comes back: nothing is lost, and the
            # effects ledger keeps its effects single.
            report_unsettled(job, ended.error_code, error_code_of(exc))
            return
        report_settled(job, ended, ours, started, self.metrics)


async def _sleep_or_stop(stop: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), seconds)
