"""Mode ``drain``: N no-op jobs already queued, then ONE worker process; jobs/s until empty.

Each hookinbox store is drained twice in the same run: its plain route, and the same
route ordered by customer (``hookinbox-pg-ordered``: ``order_key = "/data/customer"``,
1,000 keys), so the report compares what ordering costs a drain.

Each run starts from a fresh store. The queue is filled the genuine way: N deliveries
(unique ids, signed) sent to the target's own receiver with workers off
(``hookinbox serve --no-workers``; the peers' receivers in bench/peers/), which is then
stopped. Then one worker process starts (``hookinbox worker``; ``procrastinate worker``;
pgqueuer's ``QueueManager``) and the bench polls the target's unfinished-job count every
50 ms until it reaches 0:

- **jobs/s** = the jobs left at the first poll that saw progress, divided by the time from
  that poll to the poll that saw 0 (the worker's start-up is not in it; it is shown apart);
- **cpu** = the worker process's CPU seconds (user + system, /proc) over that same span,
  and per job;
- **db us/job** = what the PostgreSQL server's processes spent over that span, per job
  (every ``postgres`` process on the machine: on a quiet machine, this drain's backends,
  the checkpointer and the WAL writer). Both sides share the machine's cores, so the two
  per-job figures together bound the rate.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import loadgen
from harness import (
    HOST,
    SEALED_SUFFIX,
    Bench,
    Proc,
    Unavailable,
    free_port,
    fresh_hookinbox_store,
    hookinbox_config,
    hookinbox_serve_cmd,
    hookinbox_worker_cmd,
    log,
    pid_cpu_seconds,
    server_cpu_seconds,
    settle_disk,
    signed_requests,
    store_kind_of,
    unique_ids,
)
from peer_targets import PEERS, fresh_peer_db, peer_env, peer_queue, peer_receiver, peer_worker
from tables import HOOKINBOX_SQL, Probe, QueueReader, SqlQueueReader

POLL_S = 0.05
STALL_S = 20.0
FILL_CONNECTIONS = 32
PROCRASTINATE_DRAIN_JOBS = 1_000
#: A drain target's suffix for the same drain on an ordered route (``order_key`` by
#: customer, 1,000 keys): ``hookinbox-pg-ordered``, ``hookinbox-sqlite-ordered``.
ORDERED = "-ordered"
#: The aim for an ordered route's drain against the unordered one in the same run.
ORDERED_AIM = 0.7


@dataclass
class DrainRun:
    jobs: int
    seconds: float
    startup_s: float
    cpu_s: float | None
    fill_per_s: float
    left: int
    failed: int | None
    #: Jobs the target records as done successfully after the worker stopped.
    done: int = 0
    #: The PostgreSQL server's CPU seconds over the same span (None: a SQLite target).
    db_cpu_s: float | None = None
    #: The same, only the backends connected to the drained database (None: no such
    #: backends, a SQLite or Celery target).
    own_db_cpu_s: float | None = None

    @property
    def jobs_per_s(self) -> float:
        return self.jobs / self.seconds if self.seconds > 0 else 0.0

    @property
    def cpu_us_per_job(self) -> float | None:
        return self.cpu_s / self.jobs * 1e6 if self.cpu_s is not None and self.jobs else None

    @property
    def db_cpu_us_per_job(self) -> float | None:
        if self.db_cpu_s is None or not self.jobs:
            return None
        return self.db_cpu_s / self.jobs * 1e6

    @property
    def own_db_cpu_us_per_job(self) -> float | None:
        if self.own_db_cpu_s is None or not self.jobs:
            return None
        return self.own_db_cpu_s / self.jobs * 1e6


@dataclass
class DrainResult:
    target: str
    jobs: int = 0
    runs: list[DrainRun] = field(default_factory=list)
    unavailable: str | None = None
    notes: list[str] = field(default_factory=list)

    def med(self, attr: str) -> float:
        return float(statistics.median(getattr(r, attr) for r in self.runs))


@dataclass
class _Setup:
    """One run's fresh store: its receiver and worker (not started) and how to read it."""

    receiver: Proc
    worker: Proc
    queue: QueueReader


async def _setup(target: str, bench: Bench, run: int) -> _Setup:
    args = bench.args
    port = free_port()
    tmp = bench.tmp
    if target in PEERS:
        env = peer_env(target, bench.env, args.pgqueuer_on_conflict)
        fresh_peer_db(target, env)
        return _Setup(
            receiver=peer_receiver(target, port, env, tmp / f"drain-{target}-receiver.log"),
            worker=peer_worker(target, args.concurrency, env, tmp / f"drain-{target}-worker.log"),
            queue=await peer_queue(target),
        )
    kind = store_kind_of(target)
    store = fresh_hookinbox_store(kind, f"drain_{kind}", tmp)
    config = hookinbox_config(
        store,
        tmp,
        f"drain-{target}-{run}",
        bench.env,
        args.hookinbox_concurrency,
        sealed=target.endswith(SEALED_SUFFIX),
        ordered=target.endswith(ORDERED),
    )
    level = args.hookinbox_log_level
    return _Setup(
        receiver=Proc(
            target,
            hookinbox_serve_cmd(config, port, workers=False, log_level=level),
            bench.env,
            tmp / f"drain-{target}-receiver.log",
        ),
        worker=Proc(
            f"{target}-worker",
            hookinbox_worker_cmd(config, level),
            bench.env,
            tmp / f"drain-{target}-worker.log",
        ),
        queue=SqlQueueReader(await Probe.open(store), HOOKINBOX_SQL),
    )


async def _fill(setup: _Setup, bench: Bench, jobs: int) -> float:
    """N deliveries through the target's receiver, workers off; return deliveries/s."""
    receiver = setup.receiver
    receiver.start()
    try:
        requests = signed_requests(receiver.port, bench.signer, unique_ids(jobs))
        r = await loadgen.send_each(HOST, receiver.port, requests, FILL_CONNECTIONS, 600)
    finally:
        receiver.stop()
    if r.accepted != jobs or r.errors:
        raise RuntimeError(
            f"filling the queue: {r.accepted:,} of {jobs:,} accepted, "
            f"non-200 {dict(r.non200)}, socket errors {r.socket_errors}\n{receiver.log_tail()}"
        )
    return r.sent / r.elapsed_s


#: The server processes that keep each peer's queue (their CPU is the "db" column).
PEER_STORE_PROCESSES: dict[str, tuple[bytes, ...]] = {
    "procrastinate": (b"postgres",),
    "pgqueuer": (b"postgres",),
    "celery": (b"beam.smp",),
}


def store_processes(target: str) -> tuple[bytes, ...] | None:
    """The server processes whose CPU is the target's store's: PostgreSQL's for every
    hookinbox-pg target, none for SQLite (in the worker's own process)."""
    if target in PEER_STORE_PROCESSES:
        return PEER_STORE_PROCESSES[target]
    return (b"postgres",) if store_kind_of(target) == "pg" else None


class _Backends:
    """The CPU of the PostgreSQL backends connected to the drained database (the worker's
    connections), from /proc: what the drain costs PostgreSQL apart from every other
    database's work on a shared machine (the WAL writer and the checkpointer are not in
    it, for any target). Each backend's last reading is kept, so one that ends early
    still counts."""

    def __init__(self, queue: QueueReader) -> None:
        probe = queue.probe if isinstance(queue, SqlQueueReader) else None
        self._probe = probe if probe is not None and probe.is_pg else None
        self._base: dict[int, float] = {}
        self._last: dict[int, float] = {}
        self._marked = False

    @property
    def measured(self) -> bool:
        return self._probe is not None

    async def poll(self) -> None:
        if self._probe is None:
            return
        for pid in await self._probe.backend_pids():
            if pid not in self._base:
                # Born after the mark: all of its CPU is the drain's.
                self._base[pid] = 0.0 if self._marked else pid_cpu_seconds(pid)
        for pid in self._base:
            now = pid_cpu_seconds(pid)
            if now:
                self._last[pid] = now

    def mark(self, *, from_spawn: bool = False) -> None:
        """Count from now (``from_spawn``: every backend's whole life, all born after
        the worker's spawn)."""
        self._base = {pid: 0.0 if from_spawn else self._last.get(pid, 0.0) for pid in self._base}
        self._marked = True

    def spent(self) -> float | None:
        if self._probe is None:
            return None
        return sum(max(0.0, self._last.get(pid, 0.0) - b) for pid, b in self._base.items())


async def _drain(
    setup: _Setup, queued: int, max_s: float, store: tuple[bytes, ...] | None
) -> DrainRun:
    worker, queue = setup.worker, setup.queue

    def store_cpu() -> float:
        return server_cpu_seconds(store) if store else 0.0

    backends = _Backends(queue)
    settle_disk()  # the fill's writes are not the drain's
    spawned, db_spawned = time.monotonic(), store_cpu()
    worker.spawn()
    first: tuple[float, int, float | None, float] | None = None
    left = queued
    last_change = spawned
    try:
        while True:
            await asyncio.sleep(POLL_S)
            now_left = await queue.unfinished()
            await backends.poll()
            now = time.monotonic()
            if now_left != left:
                left, last_change = now_left, now
            if first is None and left < queued:
                first = (now, left, worker.cpu_seconds(), store_cpu())
                backends.mark()
            if left == 0:
                break
            if not worker.alive():
                raise RuntimeError(f"worker exited early\n{worker.log_tail()}")
            if now - last_change > STALL_S or now - spawned > max_s:
                break
        end, cpu_end, db_end = time.monotonic(), worker.cpu_seconds(), store_cpu()
    finally:
        worker.stop()
    failed = await queue.failed()
    done = await queue.done()
    if first is None:  # no progress at all
        return DrainRun(0, end - spawned, end - spawned, None, 0.0, left, failed, done)
    t_first, left_first, cpu_first, db_first = first
    if left_first == 0:
        # Everything went within one poll of the first progress: count from the spawn.
        t_first, left_first, cpu_first, db_first = spawned, queued, 0.0, db_spawned
        backends.mark(from_spawn=True)
    cpu = cpu_end - cpu_first if cpu_end is not None and cpu_first is not None else None
    return DrainRun(
        jobs=left_first - left,
        seconds=end - t_first,
        startup_s=t_first - spawned,
        cpu_s=cpu,
        fill_per_s=0.0,
        left=left,
        failed=failed,
        done=done,
        db_cpu_s=db_end - db_first if store else None,
        own_db_cpu_s=backends.spent(),
    )


async def bench_drains(targets: list[str], bench: Bench) -> dict[str, DrainResult]:
    """Every target's drain runs, in rounds: round k drains run k of every target in turn
    (the order rotated each round), so the runs a ratio sets side by side are a minute
    apart, not the whole mode: this machine's speed drifts by more than the differences
    the ratios are about. A target found unavailable is not tried again."""
    results = {target: DrainResult(target, jobs=_jobs_for(target, bench)) for target in targets}
    for i in range(bench.args.runs):
        turn = targets[i % len(targets) :] + targets[: i % len(targets)] if targets else []
        for target in turn:
            if results[target].unavailable is None:
                await _drain_run(target, bench, i, results[target])
    return results


def _jobs_for(target: str, bench: Bench) -> int:
    if target == "procrastinate":
        # Its worker runs ~100-500 jobs/s here: a rate needs no more than this, and the
        # run stays minutes long.
        return min(int(bench.args.drain_jobs), PROCRASTINATE_DRAIN_JOBS)
    return int(bench.args.drain_jobs)


async def _drain_run(target: str, bench: Bench, i: int, result: DrainResult) -> None:
    """Run ``i`` of ``target``: a fresh store filled with ``result.jobs`` jobs, drained."""
    jobs = result.jobs
    try:
        setup = await _setup(target, bench, i)
    except Exception as exc:
        result.unavailable = (
            str(exc) if isinstance(exc, Unavailable) else f"{type(exc).__name__}: {exc}"
        )
        log(f"[{target}] drain unavailable: {result.unavailable}")
        return
    try:
        fill_rate = await _fill(setup, bench, jobs)
        queued = await setup.queue.unfinished()
        probe = setup.queue.probe if isinstance(setup.queue, SqlQueueReader) else None
        # Every target's store as autovacuum would leave it after the fill (this
        # machine's server runs none): analyzed, so that no plan is made for a table
        # without statistics.
        vacuumed = probe is not None and await probe.stand_in_for_autovacuum(analyze=True)
        if vacuumed and i == 0:
            result.notes.append("autovacuum is off on this server: VACUUM ANALYZE after fills")
        if queued != jobs:
            result.notes.append(f"run {i + 1}: {queued:,} jobs queued for {jobs:,} accepted")
        run = await _drain(
            setup, queued, max_s=max(120.0, jobs / 20), store=store_processes(target)
        )
        run.fill_per_s = fill_rate
        result.runs.append(run)
        cpu = f"{run.cpu_s:.2f} s" if run.cpu_s is not None else "n/a"
        log(
            f"[{target}] drain run {i + 1}/{bench.args.runs}: {run.jobs:,} jobs in "
            f"{run.seconds:.2f} s = {run.jobs_per_s:,.0f}/s, worker cpu {cpu}, "
            f"start-up {run.startup_s:.2f} s (filled at {fill_rate:,.0f}/s)"
        )
        if run.left:
            result.notes.append(f"run {i + 1}: {run.left:,} jobs left when the bench gave up")
        if run.failed:
            result.notes.append(f"run {i + 1}: {run.failed:,} jobs failed")
        if run.done != queued - run.left:
            result.notes.append(
                f"run {i + 1}: {run.done:,} jobs recorded as done for "
                f"{queued - run.left:,} gone from the queue"
            )
    except Exception as exc:
        result.notes.append(f"run {i + 1} aborted: {type(exc).__name__}: {exc}")
        log(f"[{target}] drain run {i + 1} aborted: {exc}")
    finally:
        await setup.queue.close()
        for proc in (setup.receiver, setup.worker):
            if note := proc.bad_exit():
                result.notes.append(f"run {i + 1}: {note}")


def _cpu_per_job(dr: DrainResult) -> float | None:
    """The median over runs of the worker's and its own backends' CPU per job."""
    each = [
        r.cpu_us_per_job + r.own_db_cpu_us_per_job
        for r in dr.runs
        if r.cpu_us_per_job is not None and r.own_db_cpu_us_per_job is not None
    ]
    return float(statistics.median(each)) if each else None


def _paired(a: DrainResult, b: DrainResult, figure: Callable[[DrainRun], float | None]) -> float:
    """The median of the rounds' ratios ``a / b``: run k of each, drained in the same round
    (a minute apart), so a drift of the machine's speed between rounds divides out."""
    each = [
        x / y
        for ra, rb in zip(a.runs, b.runs, strict=False)
        if (x := figure(ra)) is not None and (y := figure(rb))
    ]
    return float(statistics.median(each)) if each else float("nan")


def _rate(run: DrainRun) -> float:
    return run.jobs_per_s


def _own_cpu(run: DrainRun) -> float | None:
    if run.cpu_us_per_job is None or run.own_db_cpu_us_per_job is None:
        return None
    return run.cpu_us_per_job + run.own_db_cpu_us_per_job


def report(results: dict[str, DrainResult]) -> None:
    print("== drain: N queued no-op jobs, ONE worker process, jobs/s until the queue is empty")
    print("   cpu = the worker process's CPU over the drain, and per job; db = the store server's")
    print("   CPU over the same span, per job (every postgres process; RabbitMQ's beam.smp for")
    print("   Celery: a quiet machine)")
    print("   -- the two share the cores, so together they bound jobs/s; own db = only the")
    print("   backends connected to the drained database (its worker's connections): the")
    print("   figure to compare on a machine other work shares")
    print("   start-up = worker spawn to the first job seen done (not in jobs/s)")
    print()
    hdr = (
        f"{'target':<24} {'jobs':>6} {'jobs/s':>8} {'cpu s':>6} {'cpu us/job':>10} "
        f"{'db us/job':>9} {'own db':>7} {'start-up s':>10}  runs (jobs/s)"
    )
    print(hdr)
    print("-" * len(hdr))
    for target, dr in results.items():
        if dr.unavailable is not None:
            print(f"{target:<24} unavailable: {dr.unavailable.strip().splitlines()[0]}")
            continue
        if dr.runs:
            cpus = [r.cpu_s for r in dr.runs if r.cpu_s is not None]
            per_job = [r.cpu_us_per_job for r in dr.runs if r.cpu_us_per_job is not None]
            cpu = f"{statistics.median(cpus):6.2f}" if cpus else f"{'n/a':>6}"
            pj = f"{statistics.median(per_job):10.0f}" if per_job else f"{'n/a':>10}"
            db_per_job = [r.db_cpu_us_per_job for r in dr.runs if r.db_cpu_us_per_job is not None]
            db = f"{statistics.median(db_per_job):9.0f}" if db_per_job else f"{'-':>9}"
            own_per_job = [
                r.own_db_cpu_us_per_job for r in dr.runs if r.own_db_cpu_us_per_job is not None
            ]
            own = f"{statistics.median(own_per_job):7.0f}" if own_per_job else f"{'-':>7}"
            each = " ".join(f"{r.jobs_per_s:,.0f}" for r in dr.runs)
            print(
                f"{target:<24} {dr.jobs:>6,} {dr.med('jobs_per_s'):>8,.0f} {cpu} {pj} {db} {own} "
                f"{dr.med('startup_s'):>10.2f}  {each}"
            )
        for note in dr.notes:
            print(f"{'':<24} note: {note}")
    pairs = [
        ("hookinbox-pg", "procrastinate"),
        ("hookinbox-pg", "pgqueuer"),
        ("hookinbox-sqlite", "procrastinate"),
        ("hookinbox-sqlite", "pgqueuer"),
        ("hookinbox-pg", "celery"),
        ("hookinbox-sqlite", "celery"),
        ("hookinbox-sqlite", "hookinbox-pg"),
        ("hookinbox-pg-sealed", "hookinbox-pg"),
        ("hookinbox-sqlite-sealed", "hookinbox-sqlite"),
    ]
    lines = []
    for num, den in pairs:
        a, b = results.get(num), results.get(den)
        if a and b and a.runs and b.runs and b.med("jobs_per_s"):
            label = f"{num} / {den}"
            lines.append(f"  {label:<50} {_paired(a, b, _rate):.2f}x")
    pg, pgq = results.get("hookinbox-pg"), results.get("pgqueuer")
    if pg and pg.runs:
        rate = pg.med("jobs_per_s")
        verdict = "met" if rate >= 5000 else "NOT met"
        lines.append(f"  {'hookinbox-pg jobs/s':<50} {rate:,.0f}  aim >= 5,000: {verdict}")
        if pgq and pgq.runs and pgq.med("jobs_per_s"):
            times = _paired(pg, pgq, _rate)
            verdict = "met" if times >= 3 else "NOT met"
            lines.append(f"  {'hookinbox-pg / pgqueuer':<50} {times:.2f}x  aim >= 3x: {verdict}")
            ours, theirs = _cpu_per_job(pg), _cpu_per_job(pgq)
            if ours is not None and theirs:
                share = _paired(pg, pgq, _own_cpu)
                verdict = "met" if share <= 1 / 3 else "NOT met"
                label = "CPU per job (worker + own db), hookinbox-pg / pgqueuer"
                lines.append(
                    f"  {label:<50} {share:.2f}  ({ours:.0f} / {theirs:.0f} us)"
                    f"  aim <= 0.33: {verdict}"
                )
        cel = results.get("celery")
        if cel and cel.runs and cel.med("jobs_per_s"):
            times = _paired(pg, cel, _rate)
            verdict = "met" if times >= 2 else "NOT met"
            lines.append(f"  {'hookinbox-pg / celery':<50} {times:.2f}x  aim >= 2x: {verdict}")
    sq = results.get("hookinbox-sqlite")
    if sq and sq.runs:
        rate = sq.med("jobs_per_s")
        verdict = "met" if rate >= 3000 else "NOT met"
        lines.append(f"  {'hookinbox-sqlite jobs/s':<50} {rate:,.0f}  aim >= 3,000: {verdict}")
    for kind in ("pg", "sqlite"):
        plain, ordered = results.get(f"hookinbox-{kind}"), results.get(f"hookinbox-{kind}{ORDERED}")
        if plain and ordered and plain.runs and ordered.runs and plain.med("jobs_per_s"):
            times = _paired(ordered, plain, _rate)
            verdict = "met" if times >= ORDERED_AIM else "NOT met"
            label = f"hookinbox-{kind}{ORDERED} / hookinbox-{kind}"
            lines.append(f"  {label:<50} {times:.2f}x  aim >= {ORDERED_AIM}x: {verdict}")
    if lines:
        print(
            "\nratios (the median of the rounds' ratios, each round's runs side by side;"
            " ordered: docs/concepts/ordering.md):"
        )
        print("\n".join(lines))


def to_json(results: dict[str, DrainResult]) -> dict[str, object]:
    return {
        t: {
            "unavailable": dr.unavailable,
            "notes": dr.notes,
            "jobs": dr.jobs,
            "runs": [
                r.__dict__
                | {
                    "jobs_per_s": r.jobs_per_s,
                    "cpu_us_per_job": r.cpu_us_per_job,
                    "db_cpu_us_per_job": r.db_cpu_us_per_job,
                    "own_db_cpu_us_per_job": r.own_db_cpu_us_per_job,
                }
                for r in dr.runs
            ],
        }
        for t, dr in results.items()
    }
