"""Claim lanes: a worker's slots in chains of claims that overlap.

A lane owns some of the pool's slots (at most ``[worker] claim_batch``) and claims only
for them: it claims its free slots in one statement, runs the jobs, and settles them in
one statement that also claims the slots they freed. Each of those steps waits for the
one before, so one lane alternates between running Python and waiting on the store, and
a worker with a single lane is idle while its statement is out. A pool wider than one
claim batch runs several lanes on the same event loop: while one lane's statement is in
the store, another's jobs run, and the store works on two statements at once
(docs/performance.md measures what that buys a drain).

Idle lanes are woken one at a time (:class:`IdleLanes`): a trickle of jobs is claimed
by one lane in the batches one lane would take, and a backlog, seen as a claim that came
back full, wakes the others in turn.

A lane is what one worker process with that many slots would be, sharing the process's
leases, attempt runner and tracing; lanes never take each other's slots, and every
claim is the store's usual ``FOR UPDATE SKIP LOCKED``, so two lanes claim different jobs
the way two workers do.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Sequence

from hookinbox.codes import error_code_of
from hookinbox.config import Worker as WorkerSettings
from hookinbox.logs import get_logger
from hookinbox.metrics import Metrics
from hookinbox.store import ClaimedJob, Settlement, Store
from hookinbox.tracing import Tracing
from hookinbox.work.attempt import AttemptRunner, Ended
from hookinbox.work.effects import JobSettled
from hookinbox.work.leases import LeaseKeeper
from hookinbox.work.outcomes import report_self_settled, report_settled, report_unsettled
from hookinbox.work.settling import SettleBatcher

log = get_logger("hookinbox.worker")


def lane_widths(concurrency: int, claim_batch: int) -> list[int]:
    """The pool's slots cut into as few lanes as no wider than ``claim_batch`` allows,
    as even as can be (40 slots in batches of 32: two lanes of 20, not 32 and 8)."""
    lanes = -(-concurrency // claim_batch)
    base, extra = divmod(concurrency, lanes)
    return [base + (1 if i < extra else 0) for i in range(lanes)]


class IdleLanes:
    """Which lane claims when there may be new work: one idle lane per signal, the first
    (a trickle of jobs goes to one lane, in the batches a pool of one lane would take),
    and one more each time a claim comes back full (a backlog wakes every lane in turn).
    Waking every idle lane at each signal would send a claim per lane for the few jobs
    of one receiver's commit. A signal with no lane idle is owed to the next lane that
    goes idle, which then claims at once."""

    def __init__(self) -> None:
        self._waiting: dict[int, asyncio.Future[None]] = {}
        self._owed = False

    async def wait(self, lane: int, stop: asyncio.Event, timeout: float) -> None:
        """Until this lane is woken, ``stop`` is set, or ``timeout`` passes (a lane
        polls too: a job that comes due by time sends no signal)."""
        if self._owed:
            self._owed = False
            return
        woken = asyncio.get_running_loop().create_future()
        self._waiting[lane] = woken
        stopped = asyncio.ensure_future(stop.wait())
        try:
            await asyncio.wait(
                (woken, stopped), timeout=timeout, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            stopped.cancel()
            if self._waiting.get(lane) is woken:
                del self._waiting[lane]

    def wake_one(self) -> None:
        if not self._waiting:
            self._owed = True
            return
        woken = self._waiting.pop(min(self._waiting))
        if not woken.done():
            woken.set_result(None)


class ClaimLane:
    """``running`` is the pool's set of job tasks (every lane's), which the pool waits
    for when it stops; ``sweep`` runs before a claim when due (one lane of a pool)."""

    def __init__(
        self,
        *,
        name: str,
        index: int,
        width: int,
        idle_lanes: IdleLanes,
        settings: WorkerSettings,
        store: Store,
        attempts: AttemptRunner,
        leases: LeaseKeeper,
        metrics: Metrics,
        tracing: Tracing,
        running: set[asyncio.Task[None]],
    ) -> None:
        self._name = name
        self._index = index
        self._width = width
        self._idle_lanes = idle_lanes
        self._settings = settings
        self._store = store
        self._attempts = attempts
        self._leases = leases
        self._metrics = metrics
        self._tracing = tracing
        self._running = running
        #: Handlers running now (a slot is free again once its handler returns).
        self._busy = 0
        #: Slots a claim on its way to the store will fill (no other claim counts them).
        self._claiming = 0
        self._slot_freed = asyncio.Event()
        #: Set while :meth:`run` works: only then does a settle batch claim jobs too.
        self._stop: asyncio.Event | None = None
        self._settler = SettleBatcher(store, settle_batch=self._settle_and_claim)

    async def run(
        self, stop: asyncio.Event, sweep: Callable[[], Awaitable[None]] | None = None
    ) -> None:
        """Claim and run jobs until ``stop`` is set; the jobs still running are the
        pool's to wait for."""
        sweep_every = max(1.0, self._settings.lease_seconds / 2)
        next_sweep = 0.0
        self._stop = stop
        while not stop.is_set():
            if self._free_slots() <= 0:
                await self._slot_or_stop(stop)
                continue
            try:
                if sweep is not None and time.monotonic() >= next_sweep:
                    await sweep()
                    next_sweep = time.monotonic() + sweep_every
                _, more = await self._claim()
            except Exception as exc:
                # Whatever the store raised, the lane keeps working: a pool that died
                # here would leave the receiver accepting jobs nobody ran.
                log.error("worker_store_error", worker=self._name, error=error_code_of(exc))
                await _sleep_or_stop(stop, self._settings.poll_interval_seconds)
                continue
            if more:
                continue
            await self._idle(stop)

    def _free_slots(self) -> int:
        return self._width - self._busy - self._claiming

    async def _claim(self, settling: Sequence[Settlement] = ()) -> tuple[list[bool], bool]:
        """Every claim of the lane: the free slots claimed alone (the run loop), or with
        a settle batch in the same statement (one round trip and one commit per loop turn
        where there were two; only while the lane runs). The slots a claim will fill are
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
                    settling, self._name, free, lease, order_grace=grace
                )
            else:
                jobs = await self._store.queue.claim_due_jobs(
                    self._name, free, lease, order_grace=grace
                )
        finally:
            self._claiming -= free
            if settling and len(jobs) < free:
                # Slots this claim did not fill: the run loop claims (or idles) again.
                self._slot_freed.set()
        self._start(jobs, started)
        if len(jobs) == free:
            # More may be waiting than this lane has room for: another idle lane claims.
            self._idle_lanes.wake_one()
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
        await self._idle_lanes.wait(self._index, stop, self._settings.poll_interval_seconds)

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
        """Run one claimed job to its settlement, outside the run loop."""
        started = time.monotonic()
        await self._settle(job, await self._attempts.run(job, started), started)

    async def _settle(self, job: ClaimedJob, ended: Ended, started: float) -> None:
        if ended is None:
            return
        if isinstance(ended, JobSettled):
            report_self_settled(job, ended, started, self._metrics)
            return
        try:
            ours = await self._settler.settle(ended)
        except Exception as exc:
            # The lease will expire and the job comes back: nothing is lost, and the
            # effects ledger keeps its effects single.
            report_unsettled(job, ended.error_code, error_code_of(exc))
            return
        report_settled(job, ended, ours, started, self._metrics)


async def _sleep_or_stop(stop: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), seconds)
