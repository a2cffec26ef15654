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
"""

from __future__ import annotations

import statistics
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


@dataclass
class LatencyResult:
    target: str
    rate: float = 0.0
    rate_source: str = ""
    runs: list[LatencyRun] = field(default_factory=list)
    unavailable: str | None = None
    notes: list[str] = field(default_factory=list)

    def med(self, attr: str) -> float:
        return float(statistics.median(getattr(r, attr) for r in self.runs))


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
    lr = await loadgen.send_paced("127.0.0.1", server.port, requests, rate)
    depth = int(await probe.scalar(HOOKINBOX_SQL.unfinished))
    await wait_drained(probe, HOOKINBOX_SQL.unfinished)
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
        if args.latency_rate:
            result.rate, result.rate_source = args.latency_rate, "--latency-rate"
        elif receive_rate:
            result.rate = receive_rate / 2
            result.rate_source = f"half of receive {receive_rate:,.0f}/s"
        else:
            top = await probe_max_rate(server, bench, probe)
            result.rate = max(top / 2, 10.0)
            result.rate_source = f"half of a wrk probe with workers on, {top:,.0f}/s"
        log(f"[{server.name} +workers] latency at {result.rate:,.0f}/s ({result.rate_source})")
        # Warm-up (not reported): the connections, the workers' first claims.
        await paced_run(server, bench, probe, result.rate, min(1.0, args.latency_seconds))
        for i in range(args.runs):
            run = await paced_run(server, bench, probe, result.rate, args.latency_seconds)
            result.runs.append(run)
            log(
                f"[{server.name} +workers] latency run {i + 1}/{args.runs}: "
                f"sent {run.sent_per_s:,.0f}/s, receive->start p50 {run.start_p50_ms:.1f} ms "
                f"p99 {run.start_p99_ms:.1f} ms max {run.start_max_ms:.0f} ms; answer p50 "
                f"{run.answer_p50_ms:.1f} ms p99 {run.answer_p99_ms:.1f} ms; errors {run.errors}"
                f"; late sends {run.late_sends}; depth at end {run.depth_end:,}"
            )
            if run.started < run.answered:
                result.notes.append(
                    f"run {i + 1}: {run.answered - run.started:,} answered deliveries "
                    "whose job never started"
                )
            if run.late_sends > 0.01 * run.answered:
                result.notes.append(
                    f"run {i + 1}: {run.late_sends:,} requests left > 5 ms late "
                    "(the load generator or its connections could not hold the rate)"
                )
    finally:
        await probe.close()


def report(results: dict[str, LatencyResult]) -> None:
    print("== latency: receive -> handler start at half the max receive rate (open loop)")
    print("   start = attempts.started_at - deliveries.first_seen_at (database clock);")
    print("   answer = request due -> answer read, as the sender saw it")
    print()
    hdr = (
        f"{'target':<17} {'rate/s':>7} {'sent/s':>7} {'start p50':>9} {'p99':>7} {'max':>7} "
        f"{'answer p50':>10} {'p99':>7} {'depth':>6} {'errors':>6}  runs (start p50/p99 ms)"
    )
    print(hdr)
    print("-" * len(hdr))
    for target, lr in results.items():
        if lr.unavailable is not None:
            print(f"{target:<17} unavailable: {lr.unavailable.strip().splitlines()[0]}")
            continue
        if lr.runs:
            each = " ".join(f"{r.start_p50_ms:.1f}/{r.start_p99_ms:.1f}" for r in lr.runs)
            print(
                f"{target:<17} {lr.rate:>7,.0f} {lr.med('sent_per_s'):>7,.0f} "
                f"{lr.med('start_p50_ms'):>9.1f} {lr.med('start_p99_ms'):>7.1f} "
                f"{max(r.start_max_ms for r in lr.runs):>7.0f} "
                f"{lr.med('answer_p50_ms'):>10.1f} {lr.med('answer_p99_ms'):>7.1f} "
                f"{statistics.median_low(r.depth_end for r in lr.runs):>6,} "
                f"{sum(r.errors for r in lr.runs):>6}  {each}"
            )
            print(f"{'':<17} rate: {lr.rate_source}")
        for note in lr.notes:
            print(f"{'':<17} note: {note}")


def to_json(results: dict[str, LatencyResult]) -> dict[str, object]:
    return {
        t: {
            "unavailable": lr.unavailable,
            "notes": lr.notes,
            "rate": lr.rate,
            "rate_source": lr.rate_source,
            "runs": [r.__dict__ for r in lr.runs],
        }
        for t, lr in results.items()
    }
