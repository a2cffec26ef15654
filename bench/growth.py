"""Mode ``growth`` (opt-in): does receiving get slower as the journal grows, and while
``hookinbox purge`` runs?

Per store, on ONE store that grows through the phases:

1. ``empty``: a freshly migrated store; ``hookinbox serve --no-workers`` under wrk
   (unique ids, the most connections, the receive mode's harness), a warm-up then
   ``--runs`` runs;
2. ``N rows``: the server stopped, N old deliveries with their payloads, completed jobs
   and attempts written in bulk by SQL (``journal_fill.py``), the server started again,
   the same runs;
3. ``purging``: ``hookinbox purge --payloads-only --older-than 1d`` (the payloads of the
   newest ``--growth-purge`` old deliveries, 1,000,000 by default) starts, and wrk runs
   back to back until it ends: the receive rate while a large purge runs, and how long
   the purge took under that load (on PostgreSQL, whose fill puts each day's payloads
   in its day partition, the purge retires those days whole: docs/store.md, "Partitions");
4. ``after purge``: the same runs again (the deleted payloads are dead rows now).

The figures: median answers/s and p99 per phase, each phase ÷ empty (aim: N rows within
20% of empty), the fill's time and the store's size. The load average and the CPU busy
before each phase are logged and kept: the machine is shared.
"""

from __future__ import annotations

import os
import re
import secrets
import statistics
import subprocess
import time
from dataclasses import dataclass, field

from harness import (
    HOOKINBOX,
    Bench,
    Proc,
    RunResult,
    cpu_busy,
    free_port,
    fresh_hookinbox_store,
    hookinbox_config,
    hookinbox_serve_cmd,
    log,
    pg_drop,
    run_wrk_measured,
    write_requests,
)
from journal_fill import FillPlan, FillResult, fill

#: A cap on the purge phase: wrk runs stop and the purge is stopped after this long (noted).
MAX_PURGE_SECONDS = 900.0
PURGE_OLDER_THAN = "1d"


@dataclass
class Phase:
    name: str
    runs: list[RunResult] = field(default_factory=list)
    #: /proc/loadavg's 1-minute figure and the CPU busy over 1 s, before the phase.
    load: float | None = None
    busy: float | None = None

    def med(self, attr: str) -> float | None:
        values = [float(getattr(r, attr)) for r in self.runs]
        return statistics.median(values) if values else None


@dataclass
class GrowthResult:
    target: str
    rows: int
    phases: list[Phase] = field(default_factory=list)
    fill: FillResult | None = None
    #: Wall seconds of the purge under load, what it deleted (its own report line).
    purge_seconds: float | None = None
    purge_report: str | None = None
    unavailable: str | None = None
    notes: list[str] = field(default_factory=list)

    def phase(self, name: str) -> Phase | None:
        return next((p for p in self.phases if p.name == name), None)


def random_ids(count: int) -> list[str]:
    """Fresh ids ``msg_<8 random hex>_<n>``: each lands at a random place in the dedup
    index among the old rows' ``msg_<8 hashed hex>_...``, as a provider's random ids do
    (the receive mode's ids share one prefix per run and so append at one spot)."""
    return [f"msg_{secrets.token_hex(4)}_{n:08d}" for n in range(count)]


def _loadavg() -> float | None:
    try:
        return float(open("/proc/loadavg").read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


class _Runner:
    """wrk runs against one server with ids that are never re-sent."""

    def __init__(self, server: Proc, bench: Bench, label: str) -> None:
        self.server = server
        self.bench = bench
        self.label = label
        self.reqfile = bench.tmp / f"growth-{label}.reqs"
        self.conns = max(bench.args.connections)
        self.rate_hint = 8_000.0

    def run(self, seconds: int) -> RunResult:
        count = int(self.rate_hint * seconds * 1.6) + 2000
        write_requests(self.reqfile, self.server.port, self.bench.signer, random_ids(count))
        r = run_wrk_measured(
            self.bench.wrk, self.server, self.reqfile, self.conns, self.bench.args.threads, seconds
        )
        self.rate_hint = max(self.rate_hint, r.requests / r.duration_s)
        return r

    def phase(self, name: str, runs: int) -> Phase:
        phase = Phase(name, load=_loadavg(), busy=cpu_busy())
        log(f"[{self.label}] {name}: load {phase.load}, cpu busy {phase.busy or 0:.0%}")
        warm = self.run(min(2, self.bench.args.duration))
        log(f"[{self.label}] {name} warm-up: {warm.ok_per_s:,.0f}/s")
        for i in range(runs):
            r = self.run(self.bench.args.duration)
            phase.runs.append(r)
            log(f"[{self.label}] {name} run {i + 1}/{runs}: {_line(r)}")
        return phase

    def close(self) -> None:
        self.reqfile.unlink(missing_ok=True)


def _line(r: RunResult) -> str:
    errors = f"  ERRORS {r.errors}" if r.errors else ""
    dup = f"  ({r.duplicate} duplicate: ids re-sent)" if r.duplicate else ""
    return f"{r.ok_per_s:8,.0f}/s  p50 {r.p50_ms:6.2f} ms  p99 {r.p99_ms:6.2f} ms{errors}{dup}"


def bench_growth(kind: str, rows: int, purge_payloads: int, bench: Bench) -> GrowthResult:
    """The four phases on one store of ``kind``; the store is dropped at the end."""
    label = f"growth-{kind}"
    result = GrowthResult(f"hookinbox-{kind}", rows)
    store = fresh_hookinbox_store(kind, f"growth_{kind}", bench.tmp)
    server: Proc | None = None
    runner: _Runner | None = None
    try:
        config = hookinbox_config(store, bench.tmp, label, bench.env, bench.args.concurrency)
        port = free_port()
        cmd = hookinbox_serve_cmd(
            config, port, workers=False, log_level=bench.args.hookinbox_log_level
        )
        logfile = bench.tmp / f"{label}.log"

        def start() -> tuple[Proc, _Runner]:
            proc = Proc(label, cmd, bench.env, logfile)
            proc.start()
            return proc, _Runner(proc, bench, label)

        server, runner = start()
        result.phases.append(runner.phase("empty", bench.args.runs))
        server.stop()
        runner.close()

        plan = FillPlan.ending_two_days_ago(rows, purge_payloads)
        log(f"[{label}] writing {rows:,} old deliveries ({plan.payloads:,} with a payload)")
        result.fill = fill(store, plan, label)
        f = result.fill
        log(
            f"[{label}] filled in {f.seconds:.0f} s (+{f.settle_seconds:.0f} s vacuum/checkpoint), "
            f"store {f.store_bytes / 2**30:.2f} GiB"
        )

        server, runner = start()
        result.phases.append(runner.phase(f"{rows:,} rows", bench.args.runs))

        purging = Phase("purging", load=_loadavg(), busy=cpu_busy())
        result.phases.append(purging)
        purge_cmd = [
            str(HOOKINBOX),
            "purge",
            "--config",
            str(config),
            "--payloads-only",
            "--older-than",
            PURGE_OLDER_THAN,
        ]
        purge_log = bench.tmp / f"{label}-purge.log"
        t0 = time.monotonic()
        with purge_log.open("wb") as out:
            purge = subprocess.Popen(
                purge_cmd,
                env=bench.env,
                stdout=out,
                stderr=subprocess.DEVNULL,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        try:
            while purge.poll() is None and time.monotonic() - t0 < MAX_PURGE_SECONDS:
                r = runner.run(bench.args.duration)
                purging.runs.append(r)
                log(f"[{label}] purging run {len(purging.runs)}: {_line(r)}")
            if purge.poll() is None:
                result.notes.append(f"purge stopped unfinished after {MAX_PURGE_SECONDS:.0f} s")
        finally:
            if purge.poll() is None:
                os.killpg(purge.pid, 15)
                purge.wait(timeout=30)
        result.purge_seconds = time.monotonic() - t0
        text = purge_log.read_text(errors="replace").strip()
        result.purge_report = text.splitlines()[-1] if text else f"exit {purge.returncode}"
        # PostgreSQL retires whole days: one line per day, then "partitions: retired N".
        dropped = sum(int(n) for n in re.findall(r"retired, (\d+) payloads dropped", text))
        retired = re.search(r"^partitions: .*$", text, re.MULTILINE)
        if retired:
            result.purge_report = (
                f"{retired.group(0)} ({dropped:,} payloads); {result.purge_report}"
            )
        if purge.returncode != 0:
            result.notes.append(f"purge exited {purge.returncode}: {result.purge_report}")
        log(f"[{label}] purge: {result.purge_report} ({result.purge_seconds:.0f} s)")
        deleted = re.search(r"payloads: deleted (\d+)", result.purge_report or "")
        if deleted and int(deleted.group(1)) + dropped != plan.payloads:
            result.notes.append(
                f"purge deleted {int(deleted.group(1)) + dropped} payloads, "
                f"{plan.payloads:,} expected"
            )

        result.phases.append(runner.phase("after purge", bench.args.runs))
    except Exception as exc:
        reason = f"{type(exc).__name__}: {exc}"
        log(f"[{label}] aborted: {reason}" + (f"\n{server.log_tail()}" if server else ""))
        result.notes.append(f"aborted: {reason}")
    finally:
        if server is not None:
            server.stop()
            if note := server.bad_exit():
                result.notes.append(note)
        if runner is not None:
            runner.close()
        if store.pg_db is not None:
            pg_drop(store.pg_db)
        elif store.sqlite_path is not None:
            for suffix in ("", "-wal", "-shm"):
                (store.sqlite_path.parent / f"{store.sqlite_path.name}{suffix}").unlink(
                    missing_ok=True
                )
    return result


# ---------------------------------------------------------------- report


def report(results: dict[str, GrowthResult]) -> None:
    print("== growth: hookinbox serve --no-workers under wrk (unique ids), one store growing:")
    print("   empty -> N old deliveries (payloads, completed jobs, attempts) -> while")
    print(f"   `purge --payloads-only --older-than {PURGE_OLDER_THAN}` runs -> after it")
    print()
    hdr = (
        f"{'target':<17} {'phase':<18} {'runs':>4} {'200/s':>9} {'x empty':>8} "
        f"{'p50 ms':>7} {'p99 ms':>7} {'cpu us':>7} {'load':>5}  runs (200/s)"
    )
    print(hdr)
    print("-" * len(hdr))
    for target, gr in results.items():
        if gr.unavailable is not None:
            print(f"{target:<17} unavailable: {gr.unavailable}")
            continue
        empty = gr.phase("empty")
        base = empty.med("ok_per_s") if empty else None
        for p in gr.phases:
            rate = p.med("ok_per_s")
            if rate is None:
                continue
            ratio = f"{rate / base:8.2f}" if base else f"{'n/a':>8}"
            cpu_values = [r.cpu_us_per_req for r in p.runs if r.cpu_us_per_req is not None]
            cpu = f"{statistics.median(cpu_values):7.0f}" if cpu_values else f"{'n/a':>7}"
            each = " ".join(f"{r.ok_per_s / 1000:.1f}k" for r in p.runs[:12])
            more = f" (+{len(p.runs) - 12})" if len(p.runs) > 12 else ""
            load = f"{p.load:5.2f}" if p.load is not None else f"{'n/a':>5}"
            print(
                f"{target:<17} {p.name:<18} {len(p.runs):>4} {rate:>9,.0f} {ratio} "
                f"{p.med('p50_ms') or 0:>7.2f} {p.med('p99_ms') or 0:>7.2f} {cpu} {load}  "
                f"{each}{more}"
            )
        if gr.fill is not None:
            f = gr.fill
            print(
                f"{'':<17} fill: {f.rows:,} deliveries + {f.rows:,} jobs + {f.attempts:,} "
                f"attempts + {f.payloads:,} payloads in {f.seconds:.0f} s "
                f"(+{f.settle_seconds:.0f} s vacuum/checkpoint); "
                f"store {f.store_bytes / 2**30:.2f} GiB"
            )
        if gr.purge_seconds is not None:
            print(f"{'':<17} purge under load: {gr.purge_report} ({gr.purge_seconds:.0f} s wall)")
        grown = gr.phase(f"{gr.rows:,} rows")
        if base and grown and (rate := grown.med("ok_per_s")):
            verdict = "met" if rate >= 0.8 * base else "NOT met"
            print(f"{'':<17} {gr.rows:,} rows / empty = {rate / base:.2f} (aim >= 0.80: {verdict})")
        for note in gr.notes:
            print(f"{'':<17} note: {note}")


def to_json(results: dict[str, GrowthResult]) -> dict[str, object]:
    return {
        t: {
            "rows": gr.rows,
            "unavailable": gr.unavailable,
            "notes": gr.notes,
            "fill": gr.fill.__dict__ if gr.fill else None,
            "purge_seconds": gr.purge_seconds,
            "purge_report": gr.purge_report,
            "phases": [
                {
                    "name": p.name,
                    "load": p.load,
                    "busy": p.busy,
                    "runs": [r.__dict__ | {"ok_per_s": r.ok_per_s} for r in p.runs],
                }
                for p in gr.phases
            ],
        }
        for t, gr in results.items()
    }
