"""Mode ``latency``: receive -> handler start, at half of the measured maximum receive rate.

``hookinbox serve`` with its workers gets an open-loop, constant-rate load (bench/loadgen.py:
request k is due at t0 + k/rate, whatever the answers do). The rate is half of this run's
``receive`` figure for the same store (unique ids, most connections; workers off), or,
when the receive mode did not run, half of a short wrk probe against this very server;
``--latency-rate`` sets it by hand.

The figure is read from the database, both ends on its clock: for each delivery of the
run, ``attempts.started_at`` of its job's first attempt minus ``deliveries.first_seen_at``
(when the reservation's transaction began). It covers the commit, the wake-up of a worker
(LISTEN/NOTIFY on PostgreSQL, an in-process event on SQLite), the claim and the start of
the attempt. The answer latency the sender saw (from the time each request was *due*) is
printed beside it.

When the workers cannot keep up at that rate (jobs still unfinished when the load stops:
more than half a second of arrivals), the figure is mostly the queue growing over the run.
Then a second series runs at half the rate at which the same server drained that backlog
with the load off ("kept up"): the wake-up path at a rate the workers sustain.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field

import loadgen
from harness import (
    Bench,
    HookinboxStore,
    Proc,
    log,
    new_tag,
    run_wrk_measured,
    signed_requests,
    tag_pattern,
    unique_ids,
    write_requests,
)
from loadgen import percentile
from tables import HOOKINBOX_SQL, Probe

from pipeline import wait_drained


@dataclass
class LatencyRun:
    rate: float
    sent_per_s: float
    answered: int
    errors: int
    late_sends: int
    answer_p50_ms: float
    answer_p99_ms: float
    started: int
    start_p50_ms: float
    start_p99_ms: float
    start_max_ms: float
    depth_end: int
    #: The serve process's CPU (receiver + workers) per answered request over the run.
    cpu_us_per_req: float | None
    #: Load off after the run: jobs/s at which the backlog (depth_end) drained.
    backlog_drain_per_s: float | None

    @property
    def kept_up(self) -> bool:
        return self.depth_end <= 0.5 * self.rate


@dataclass
class LatencySeries:
    """Runs at one rate."""

    label: str
    rate: float
    rate_source: str
    runs: list[LatencyRun] = field(default_factory=list)

    def med(self, attr: str) -> float:
        return float(statistics.median(getattr(r, attr) for r in self.runs))


@dataclass
class LatencyResult:
    target: str
    series: list[LatencySeries] = field(default_factory=list)
    unavailable: str | None = None
    notes: list[str] = field(default_factory=list)


async def probe_max_rate(server: Proc, bench: Bench, probe: Probe) -> float:
    """A short wrk run at the most connections: this server's receive rate right now."""
    reqfile = bench.tmp / "latency-probe.reqs"
    seconds = min(3, bench.args.duration)
    write_requests(reqfile, server.port, bench.signer, unique_ids(int(20_000 * seconds)))
    try:
        r = run_wrk_measured(
            bench.wrk, server, reqfile, max(bench.args.connections), bench.args.threads, seconds
        )
    finally:
        reqfile.unlink(missing_ok=True)
    await wait_drained(probe, HOOKINBOX_SQL.unfinished)
    return r.accepted / r.duration_s


async def paced_run(
    server: Proc, bench: Bench, probe: Probe, rate: float, seconds: float
) -> LatencyRun:
    tag = new_tag()
    requests = signed_requests(
        server.port, bench.signer, unique_ids(max(1, int(rate * seconds)), tag)
    )
    await probe.stand_in_for_autovacuum()
    cpu0 = server.cpu_seconds()
    lr = await loadgen.send_paced("127.0.0.1", server.port, requests, rate)
    cpu1 = server.cpu_seconds()
    depth = int(await probe.scalar(HOOKINBOX_SQL.unfinished))
    drain_started = time.monotonic()
    left = await wait_drained(probe, HOOKINBOX_SQL.unfinished)
    drained_in = time.monotonic() - drain_started
    starts = await probe.start_latencies(tag_pattern(tag))
    return LatencyRun(
        rate=rate,
        sent_per_s=lr.sent / lr.elapsed_s if lr.elapsed_s else 0.0,
        answered=lr.ok,
        errors=lr.errors,
        late_sends=lr.late_sends,
        answer_p50_ms=percentile(lr.latencies, 50) * 1000,
        answer_p99_ms=percentile(lr.latencies, 99) * 1000,
        started=len(starts),
        start_p50_ms=percentile(starts, 50) * 1000,
        start_p99_ms=percentile(starts, 99) * 1000,
        start_max_ms=max(starts, default=0.0) * 1000,
        depth_end=depth,
        cpu_us_per_req=(cpu1 - cpu0) / lr.ok * 1e6
        if cpu0 is not None and cpu1 is not None and lr.ok
        else None,
        backlog_drain_per_s=(depth - left) / drained_in if depth > 100 and drained_in else None,
    )


async def run_series(
    server: Proc, bench: Bench, probe: Probe, series: LatencySeries, notes: list[str]
) -> None:
    args = bench.args
    log(
        f"[{server.name} +workers] latency {series.label} at {series.rate:,.0f}/s "
        f"({series.rate_source})"
    )
    for i in range(args.runs):
        run = await paced_run(server, bench, probe, series.rate, args.latency_seconds)
        series.runs.append(run)
        log(
            f"[{server.name} +workers] latency {series.label} run {i + 1}/{args.runs}: "
            f"sent {run.sent_per_s:,.0f}/s, receive->start p50 {run.start_p50_ms:.1f} ms "
            f"p99 {run.start_p99_ms:.1f} ms max {run.start_max_ms:.0f} ms; answer p50 "
            f"{run.answer_p50_ms:.1f} ms p99 {run.answer_p99_ms:.1f} ms; errors {run.errors}"
            f"; late sends {run.late_sends}; depth at end {run.depth_end:,}"
        )
        where = f"{series.label} run {i + 1}"
        if run.started < run.answered:
            notes.append(
                f"{where}: {run.answered - run.started:,} answered deliveries "
                "whose job never started"
            )
        if not run.kept_up:
            notes.append(
                f"{where}: {run.depth_end:,} jobs unfinished when the load stopped: the "
                "workers did not keep up, the latency is mostly the queue growing"
            )
        if run.late_sends > 0.01 * run.answered:
            notes.append(
                f"{where}: {run.late_sends:,} requests left > 5 ms late "
                "(the load generator or its connections could not hold the rate)"
            )


async def run_latency(
    server: Proc,
    store: HookinboxStore,
    bench: Bench,
    receive_rate: float | None,
    result: LatencyResult,
) -> None:
    """Fill ``result`` run by run (what was measured survives an abort)."""
    args = bench.args
    probe = await Probe.open(store)
    try:
        await wait_drained(probe, HOOKINBOX_SQL.unfinished)
        if await probe.runs_no_autovacuum():  # each paced run vacuums first
            result.notes.append("autovacuum is off on this server: VACUUM before each run")
        if args.latency_rate:
            rate, source = args.latency_rate, "--latency-rate"
        elif receive_rate:
            rate, source = receive_rate / 2, f"half of receive {receive_rate:,.0f}/s"
        else:
            top = await probe_max_rate(server, bench, probe)
            rate, source = max(top / 2, 10.0), f"half of a wrk probe with workers on, {top:,.0f}/s"
        # Warm-up (not reported): the connections, the workers' first claims.
        await paced_run(server, bench, probe, rate, min(1.0, args.latency_seconds))
        main = LatencySeries("1/2 max", rate, source)
        result.series.append(main)
        await run_series(server, bench, probe, main, result.notes)
        drains = [r.backlog_drain_per_s for r in main.runs if r.backlog_drain_per_s]
        if args.latency_rate or all(r.kept_up for r in main.runs) or not drains:
            return
        drain_rate = statistics.median(drains)
        kept = LatencySeries(
            "kept up",
            max(drain_rate / 2, 10.0),
            f"half of the backlog drain rate with the load off, {drain_rate:,.0f} jobs/s",
        )
        result.series.append(kept)
        await run_series(server, bench, probe, kept, result.notes)
    finally:
        await probe.close()


def report(results: dict[str, LatencyResult]) -> None:
    print("== latency: receive -> handler start at half the max receive rate (open loop)")
    print("   start = attempts.started_at - deliveries.first_seen_at (database clock);")
    print("   answer = request due -> answer read, as the sender saw it")
    print()
    hdr = (
        f"{'target':<17} {'series':<8} {'rate/s':>7} {'sent/s':>7} "
        f"{'start p50':>9} {'p99':>7} {'max':>7} "
        f"{'answer p50':>10} {'p99':>7} {'depth':>6} {'cpu us':>6} {'errors':>6}  "
        "runs (start p50/p99 ms)"
    )
    print(hdr)
    print("-" * len(hdr))
    for target, lr in results.items():
        if lr.unavailable is not None:
            print(f"{target:<17} unavailable: {lr.unavailable.strip().splitlines()[0]}")
            continue
        for sr in lr.series:
            if not sr.runs:
                continue
            each = " ".join(f"{r.start_p50_ms:.1f}/{r.start_p99_ms:.1f}" for r in sr.runs)
            cpus = [r.cpu_us_per_req for r in sr.runs if r.cpu_us_per_req is not None]
            cpu = f"{statistics.median(cpus):6.0f}" if cpus else f"{'n/a':>6}"
            print(
                f"{target:<17} {sr.label:<8} {sr.rate:>7,.0f} {sr.med('sent_per_s'):>7,.0f} "
                f"{sr.med('start_p50_ms'):>9.1f} {sr.med('start_p99_ms'):>7.1f} "
                f"{max(r.start_max_ms for r in sr.runs):>7.0f} "
                f"{sr.med('answer_p50_ms'):>10.1f} {sr.med('answer_p99_ms'):>7.1f} "
                f"{statistics.median_low(r.depth_end for r in sr.runs):>6,} {cpu} "
                f"{sum(r.errors for r in sr.runs):>6}  {each}"
            )
            print(f"{'':<17} {sr.label}: {sr.rate_source}")
            if sr.label == "1/2 max":
                p99 = sr.med("start_p99_ms")
                verdict = "met" if p99 < 50 else "NOT met"
                aim = f"receive -> start p99 {p99:.1f} ms: aim < 50 ms (issue 11)"
                print(f"{'':<17} {aim}: {verdict}")
        for note in lr.notes:
            print(f"{'':<17} note: {note}")


def to_json(results: dict[str, LatencyResult]) -> dict[str, object]:
    return {
        t: {
            "unavailable": lr.unavailable,
            "notes": lr.notes,
            "series": [
                {
                    "label": sr.label,
                    "rate": sr.rate,
                    "rate_source": sr.rate_source,
                    "runs": [r.__dict__ for r in sr.runs],
                }
                for sr in lr.series
            ],
        }
        for t, lr in results.items()
    }
