"""Mode ``pipeline``: ``hookinbox serve`` WITH its workers under wrk load (unique ids).

The receiver and the worker pool share one process (and the machine's two cores with wrk
and PostgreSQL), so this is what one ``hookinbox serve`` really sustains end to end:

- **accepted/s**: ``accepted`` answers per second (wrk);
- **completed/s**: jobs whose ``completed_at`` falls inside the run's window, divided by
  the window, where the window is the span of this run's receipts on the database clock
  (first to last ``first_seen_at`` of the run's event ids);
- **depth**: unfinished jobs (accepted or processing) right after the load stopped; when
  the workers keep up it stays near zero, when they do not it is the backlog the run left.

Each run starts from an empty queue (the bench waits for the backlog of the previous run
to drain, bounded), so runs do not inherit each other's work.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from dataclasses import dataclass, field

from harness import (
    Bench,
    HookinboxStore,
    Proc,
    RunResult,
    free_port,
    fresh_hookinbox_store,
    hookinbox_config,
    hookinbox_serve_cmd,
    log,
    new_tag,
    run_wrk_measured,
    tag_pattern,
    unique_ids,
    write_requests,
)
from tables import HOOKINBOX_SQL, Probe

#: How long the bench waits for a backlog to drain between runs, and for any progress.
DRAIN_WAIT_S = 120.0
STALL_S = 20.0


@dataclass
class PipelineRun:
    wrk: RunResult
    completed: int
    window_s: float
    depth_end: int
    #: Load off after the run: how long the backlog (depth_end) took to drain.
    backlog_drain_s: float = 0.0

    @property
    def accepted_per_s(self) -> float:
        return self.wrk.accepted / self.wrk.duration_s

    @property
    def completed_per_s(self) -> float:
        return self.completed / self.window_s if self.window_s > 0 else 0.0


@dataclass
class PipelineResult:
    target: str
    conns: int = 0
    runs: list[PipelineRun] = field(default_factory=list)
    unavailable: str | None = None
    notes: list[str] = field(default_factory=list)

    def med(self, attr: str) -> float:
        return float(statistics.median(getattr(r, attr) for r in self.runs))


def start_with_workers(kind: str, bench: Bench) -> tuple[Proc, HookinboxStore]:
    """A fresh store and ``hookinbox serve`` with its workers on it, started."""
    target = f"hookinbox-{kind}"
    store = fresh_hookinbox_store(kind, f"workers_{kind}", bench.tmp)
    config = hookinbox_config(
        store, bench.tmp, f"{target}-workers", bench.env, bench.args.hookinbox_concurrency
    )
    cmd = hookinbox_serve_cmd(
        config, free_port(), workers=True, log_level=bench.args.hookinbox_log_level
    )
    server = Proc(target, cmd, bench.env, bench.tmp / f"workers-{kind}.log")
    log(f"[{target} +workers] starting: {' '.join(cmd)}")
    server.start()
    return server, store


async def wait_drained(probe: Probe, sql: str, timeout_s: float = DRAIN_WAIT_S) -> int:
    """Poll ``sql`` (a count of unfinished jobs) until 0, no progress for STALL_S, or
    ``timeout_s``; return the last count."""
    started = last_change = time.monotonic()
    last = -1
    while True:
        left = int(await probe.scalar(sql))
        now = time.monotonic()
        if left == 0:
            return 0
        if left != last:
            last, last_change = left, now
        if now - last_change > STALL_S or now - started > timeout_s:
            return left
        await asyncio.sleep(0.1)


async def run_pipeline(
    server: Proc, store: HookinboxStore, bench: Bench, result: PipelineResult
) -> None:
    """Fill ``result`` run by run (what was measured survives an abort)."""
    args = bench.args
    result.conns = max(args.connections)
    reqfile = bench.tmp / f"pipeline-{store.kind}.reqs"
    probe = await Probe.open(store)
    try:
        warm = min(2, args.duration)
        write_requests(reqfile, server.port, bench.signer, unique_ids(int(20_000 * warm)))
        w = run_wrk_measured(bench.wrk, server, reqfile, result.conns, args.threads, warm)
        rate_hint = max(w.ok_per_s, 500.0)
        log(f"[{server.name} +workers] warm-up: {w.ok_per_s:,.0f}/s, errors {w.errors}")
        left = await wait_drained(probe, HOOKINBOX_SQL.unfinished)
        for i in range(args.runs):
            if left:
                result.notes.append(f"run {i + 1} started with a backlog of {left:,} jobs")
            if await probe.stand_in_for_autovacuum() and i == 0:
                result.notes.append("autovacuum is off on this server: VACUUM before each run")
            tag = new_tag()
            count = int(rate_hint * args.duration * 1.6) + 2000
            write_requests(reqfile, server.port, bench.signer, unique_ids(count, tag))
            r = run_wrk_measured(
                bench.wrk, server, reqfile, result.conns, args.threads, args.duration
            )
            depth = int(await probe.scalar(HOOKINBOX_SQL.unfinished))
            t0, t1, received = await probe.receipt_window(tag_pattern(tag))
            completed = await probe.completed_between(t0, t1)
            run = PipelineRun(r, completed, t1 - t0, depth)
            result.runs.append(run)
            rate_hint = max(rate_hint, r.requests / r.duration_s)
            cpu = f"  cpu {r.cpu_us_per_req:5.0f} us/req" if r.cpu_us_per_req else ""
            errors = f"  ERRORS {r.errors}" if r.errors else ""
            log(
                f"[{server.name} +workers] pipeline c={result.conns} run {i + 1}/{args.runs}: "
                f"accepted {run.accepted_per_s:,.0f}/s  completed {run.completed_per_s:,.0f}/s"
                f"  depth at end {depth:,}{cpu}{errors}"
            )
            if received < r.accepted:
                result.notes.append(
                    f"run {i + 1}: {r.accepted:,} accepted answers but {received:,} journal rows"
                )
            # The backlog drains with the load off: the same process, now only working.
            started = time.monotonic()
            left = await wait_drained(probe, HOOKINBOX_SQL.unfinished)
            run.backlog_drain_s = time.monotonic() - started
            if depth and not left:
                log(
                    f"    backlog of {depth:,} drained in {run.backlog_drain_s:.1f} s "
                    f"({depth / run.backlog_drain_s:,.0f} jobs/s with the load off)"
                )
        if left:
            result.notes.append(f"{left:,} jobs still unfinished {DRAIN_WAIT_S:.0f} s after")
        assert HOOKINBOX_SQL.failed is not None
        failed = int(await probe.scalar(HOOKINBOX_SQL.failed))
        if failed:
            result.notes.append(f"{failed:,} jobs failed (dead letters)")
    finally:
        await probe.close()
        reqfile.unlink(missing_ok=True)


def report(results: dict[str, PipelineResult], receive_rates: dict[str, float]) -> None:
    print("== pipeline: hookinbox serve WITH workers, no-op handler, wrk, unique ids")
    print("   accepted/s = accepted answers; completed/s = jobs completed inside the run's")
    print("   receipt window (database clock); depth = unfinished jobs when the load stopped;")
    print("   cpu = the serve process's CPU (receiver + workers) per answered request")
    print()
    hdr = (
        f"{'target':<17} {'conns':>5} {'accepted/s':>10} {'completed/s':>11} {'depth':>7} "
        f"{'p50 ms':>7} {'p99 ms':>7} {'cpu us':>7} {'errors':>6}  runs (accepted/completed)"
    )
    print(hdr)
    print("-" * len(hdr))
    for target, pr in results.items():
        if pr.unavailable is not None:
            print(f"{target:<17} unavailable: {pr.unavailable.strip().splitlines()[0]}")
            continue
        if pr.runs:
            cpus = [r.wrk.cpu_us_per_req for r in pr.runs if r.wrk.cpu_us_per_req is not None]
            cpu = f"{statistics.median(cpus):7.0f}" if cpus else f"{'n/a':>7}"
            each = " ".join(
                f"{r.accepted_per_s / 1000:.1f}k/{r.completed_per_s / 1000:.1f}k" for r in pr.runs
            )
            errors = sum(r.wrk.errors for r in pr.runs)
            depth = statistics.median_low(r.depth_end for r in pr.runs)
            p50 = statistics.median(r.wrk.p50_ms for r in pr.runs)
            p99 = statistics.median(r.wrk.p99_ms for r in pr.runs)
            print(
                f"{target:<17} {pr.conns:>5} {pr.med('accepted_per_s'):>10,.0f} "
                f"{pr.med('completed_per_s'):>11,.0f} {depth:>7,} {p50:>7.2f} {p99:>7.2f} "
                f"{cpu} {errors:>6}  {each}"
            )
        for note in pr.notes:
            print(f"{'':<17} note: {note}")
    lines: list[tuple[str, str]] = []
    for target, pr in results.items():
        if not pr.runs:
            continue
        acc, done = pr.med("accepted_per_s"), pr.med("completed_per_s")
        if acc:
            verdict = "met" if done / acc >= 0.8 else "NOT met"
            lines.append(
                (f"{target} completed/s / accepted/s", f"{done / acc:.2f}  aim >= 0.8: {verdict}")
            )
        if base := receive_rates.get(target):
            lines.append((f"{target} accepted/s with workers / without", f"{acc / base:.2f}"))
        if ceiling := receive_rates.get("ceiling"):
            lines.append((f"{target} completed/s / ceiling", f"{done / ceiling:.2f} of ceiling"))
        if naive := receive_rates.get("naive"):
            lines.append((f"{target} completed/s / naive receive", f"{done / naive:.2f}x naive"))
    if lines:
        print("\nratios (medians; baselines from this run's receive mode):")
        for label, value in lines:
            print(f"  {label:<50} {value}")


def to_json(results: dict[str, PipelineResult]) -> dict[str, object]:
    return {
        t: {
            "unavailable": pr.unavailable,
            "notes": pr.notes,
            "conns": pr.conns,
            "runs": [
                {
                    "accepted_per_s": r.accepted_per_s,
                    "completed_per_s": r.completed_per_s,
                    "completed": r.completed,
                    "window_s": r.window_s,
                    "depth_end": r.depth_end,
                    "backlog_drain_s": r.backlog_drain_s,
                    "wrk": r.wrk.__dict__,
                }
                for r in pr.runs
            ],
        }
        for t, pr in results.items()
    }
