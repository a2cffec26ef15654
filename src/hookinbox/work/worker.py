"""Workers: claim due jobs with a lease, run them, retry with backoff, dead-letter.

A worker claims as many due jobs as it has free slots, in one statement, and sleeps until
the store signals new work (LISTEN/NOTIFY on PostgreSQL, an in-process event on SQLite)
or the poll interval passes. While an action runs, its lease is renewed; a worker that
dies stops renewing, the lease expires, and any worker takes the job again. ``completed``
is written only after the action returned, and with the lease token, so a worker that
lost its lease cannot overwrite what another worker did.

The pool here is the process's: its lanes, the lease sweep, the stop. Its slots are cut
into claim lanes (:mod:`hookinbox.work.lanes`: claims, slots, settle batches) no wider
than ``[worker] claim_batch``; an attempt is run and judged by
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
from collections.abc import Mapping
from typing import Any

import httpx

from hookinbox.codes import error_code_of
from hookinbox.config import Config
from hookinbox.logs import get_logger
from hookinbox.metrics import Metrics
from hookinbox.store import ClaimedJob, Store
from hookinbox.tracing import Tracing
from hookinbox.work.actions import Action
from hookinbox.work.attempt import AttemptRunner
from hookinbox.work.lanes import ClaimLane, IdleLanes, lane_widths
from hookinbox.work.leases import LeaseKeeper

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
        attempts = AttemptRunner(
            config, store, actions=actions, metrics=metrics, services=services, tracing=tracing
        )
        #: Every lane's running jobs: the pool waits for them when it stops.
        self._running: set[asyncio.Task[None]] = set()
        #: Jobs this worker holds a lease on, claim to settlement.
        self._leases = LeaseKeeper(store, self._settings.lease_seconds)
        #: The lanes waiting for work, woken one at a time by the store's signals.
        self._idle_lanes = IdleLanes()
        self._lanes = [
            ClaimLane(
                name=self.name,
                index=index,
                width=width,
                idle_lanes=self._idle_lanes,
                settings=self._settings,
                store=store,
                attempts=attempts,
                leases=self._leases,
                metrics=metrics,
                tracing=tracing,
                running=self._running,
            )
            for index, width in enumerate(
                lane_widths(self._settings.concurrency, self._settings.claim_batch)
            )
        ]

    async def run(self, stop: asyncio.Event) -> None:
        """Work until ``stop`` is set, then let running jobs finish (their leases hold)."""
        log.info(
            "worker_started",
            worker=self.name,
            concurrency=self._settings.concurrency,
            lanes=len(self._lanes),
        )
        renewer = asyncio.create_task(self._leases.run())
        listener = asyncio.create_task(self._listen(stop))
        try:
            # One lane sweeps expired leases for the pool, before its claims.
            sweeps = [self._sweep] + [None] * (len(self._lanes) - 1)
            await asyncio.gather(
                *(lane.run(stop, sweep) for lane, sweep in zip(self._lanes, sweeps, strict=True))
            )
        finally:
            # Bounded: a job still running after its lease is taken over anyway. A settle
            # batch on its way may still start the jobs it claimed: those run too.
            deadline = time.monotonic() + self._settings.lease_seconds
            while self._running and (left := deadline - time.monotonic()) > 0:
                await asyncio.wait(set(self._running), timeout=left)
            for task in (listener, renewer):
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            await self._client.aclose()
            log.info("worker_stopped", worker=self.name)

    async def _listen(self, stop: asyncio.Event) -> None:
        """The store's signals of new jobs (or the poll interval), each handed to one
        idle lane: one waiter on the store for the whole pool."""
        poll = self._settings.poll_interval_seconds
        while not stop.is_set():
            try:
                await self._store.queue.wait_for_jobs(poll)
            except Exception as exc:
                # The lanes poll on their own meanwhile: nothing waits on this alone.
                log.error("worker_store_error", worker=self.name, error=error_code_of(exc))
                await asyncio.sleep(poll)
            self._idle_lanes.wake_one()

    async def _sweep(self) -> None:
        """Dead-letter the jobs whose lease expired on their last attempt."""
        dead = await self._store.queue.fail_exhausted_leases()
        if dead:
            log.warning("leases_exhausted", jobs=dead)

    async def run_job(self, job: ClaimedJob) -> None:
        """Run one claimed job to its settlement (how ``hookinbox.testing`` runs jobs)."""
        await self._lanes[0].run_job(job)
