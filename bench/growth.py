"""Mode ``growth`` (opt-in): does receiving get slower as the journal grows, how long does
a payload search take over a week of bodies, and what does retiring a day of the journal
cost the receivers while it runs?

Per store, on ONE store that grows through the phases:

1. ``empty``: a freshly migrated store; ``hookinbox serve --no-workers`` under wrk
   (unique ids, the most connections, the receive mode's harness), a warm-up then
   ``--runs`` runs;
2. ``N rows``: the server stopped, N old deliveries with their completed jobs and
   attempts written in bulk by SQL (``journal_fill.py``: 30 days of them; the newest
   ``--growth-bodies``, 1,000,000 by default, spread over the last 7 days with their
   payload), the server started again, the same runs;
3. ``search``: ``hookinbox deliveries list --where 'data.metadata.order = ord_...'
   --since 7d`` (the operators' search, a payload filter that matches one body, so it
   reads the whole week of bodies), :data:`SEARCHES` times with no other load, each
   timed from the process's start to its exit (start-up included);
4. ``retiring a day``: ``hookinbox purge --older-than 29d`` (the oldest day of the
   journal: its deliveries, jobs and attempts; the payload retention is set to 8 days,
   so the week of bodies stays) starts, and wrk runs back to back until it ends: the
   receive rate while a day is retired, and how long that took under load. The journal's
   keys are deleted in bounded batches (they stay a unique index for the whole dedup
   retention); on PostgreSQL the day's jobs and attempts go by dropping their day
   partitions, timed apart (the purge's lines: each retiring transaction's wall time),
   and the same purge retires the empty payload days past the retention (docs/store.md,
   "Partitions"); a day of bodies retiring under load is timed by
   ``bench/partition_retire.py``;
5. ``after``: the same runs again.

Phases 1, 2 and 5 run in rounds beside a reference server (an empty store of its own, up
throughout), the order alternating, and phase 4 on PostgreSQL in rounds of a run while the
purge works and one with it stopped (SIGSTOP, between two of its batches): this
machine's speed drifts by up to 2x over minutes, so the ratios are of runs seconds apart
(bench/README.md, "growth").

The figures: median answers/s and p99 per phase, the paired ratios (aims: N rows within
10% of empty; retiring a day under 1 s and costing the receive rate under 10%; the
search under 1 s), the fill's time and the store's size. The load average and the CPU
busy before each phase are logged and kept: the machine is shared.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import signal
import statistics
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from harness import (
    HOOKINBOX,
    Bench,
    HookinboxStore,
    Proc,
    RunResult,
    cpu_busy,
    free_port,
    fresh_hookinbox_store,
    hookinbox_config,
    hookinbox_serve_cmd,
    log,
    pg_drop,
    pg_scalar,
    pg_wal_counters,
    run_wrk_measured,
    write_requests,
)
from journal_fill import FillPlan, FillResult, fill

#: A cap on the purge phase: wrk runs stop and the purge is stopped after this long (noted).
MAX_PURGE_SECONDS = 900.0
#: The fill's journal spans 30 days: the purge takes the oldest.
RETIRE_OLDER_THAN_DAYS = 29
#: The bench's config keeps bodies longer than the fill's week of them.
BENCH_OPERATIONS = '\n[operations]\npayload_retention = "8d"\n'
#: Timed payload searches (the median and the longest are reported).
SEARCHES = 5


@dataclass
class Phase:
    name: str
    runs: list[RunResult] = field(default_factory=list)
    #: Run k of the reference server (an empty store of its own, up throughout), taken
    #: beside run k of this phase: this machine's speed drifts by up to 2x over minutes,
    #: so phases minutes apart are compared through the reference measured seconds apart.
    ref_runs: list[RunResult] = field(default_factory=list)
    #: Retiring a day on PostgreSQL: run k with the purge stopped (SIGSTOP), beside run k
    #: with it working.
    paused_runs: list[RunResult] = field(default_factory=list)
    #: /proc/loadavg's 1-minute figure and the CPU busy over 1 s, before the phase.
    load: float | None = None
    busy: float | None = None

    def med(self, attr: str) -> float | None:
        values = [float(getattr(r, attr)) for r in self.runs]
        return statistics.median(values) if values else None

    def round_ratios(self, against: list[RunResult]) -> list[float]:
        """Run k's rate over run k of ``against`` (the reference's, or the paused purge's)."""
        return [
            r.ok_per_s / a.ok_per_s for r, a in zip(self.runs, against, strict=False) if a.ok_per_s
        ]


@dataclass
class GrowthResult:
    target: str
    rows: int
    phases: list[Phase] = field(default_factory=list)
    fill: FillResult | None = None
    #: Wall seconds of the purge under load, what it deleted (its own report lines).
    purge_seconds: float | None = None
    #: Of those, the seconds the purge was stopped for the paired runs.
    purge_paused_seconds: float = 0.0
    purge_report: str | None = None
    #: PostgreSQL: wall seconds of the retiring transactions of the day partitions that
    #: held rows (the oldest day's jobs and attempts; its payloads' went at their own
    #: retention), from the purge's lines; None when it retired none (SQLite).
    partition_seconds: float | None = None
    #: Every partition the purge retired, empty days too: the longest retiring transaction
    #: (name, seconds) and the longest its table's writers queued behind (seconds).
    longest_retirement: tuple[str, float] | None = None
    longest_locked: float | None = None
    #: Deliveries of the oldest day, as filled (what the purge should retire).
    retire_expected: int | None = None
    #: Wall seconds of each timed search, and the deliveries the last one found.
    search_seconds: list[float] = field(default_factory=list)
    #: The same command without the filter, listing one delivery (start-up).
    search_baseline: list[float] = field(default_factory=list)
    search_found: int | None = None
    search_where: str | None = None
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
        #: On PostgreSQL the server's database is read too: its backends' CPU and the
        #: cluster's WAL per delivery (the purge's own work counts in its phase).
        self.pg = server.pg_db is not None
        self.server = server
        self.bench = bench
        self.label = label
        self.reqfile = bench.tmp / f"growth-{label}.reqs"
        self.conns = max(bench.args.connections)
        self.rate_hint = 8_000.0

    def run(self, seconds: int) -> RunResult:
        count = int(self.rate_hint * seconds * 1.6) + 2000
        write_requests(self.reqfile, self.server.port, self.bench.signer, random_ids(count))
        wal0 = pg_wal_counters() if self.pg else None
        r = run_wrk_measured(
            self.bench.wrk, self.server, self.reqfile, self.conns, self.bench.args.threads, seconds
        )
        answered = r.accepted + r.duplicate + r.ok_other + r.non200
        if wal0 is not None and answered:
            fpi, wal_bytes = pg_wal_counters()
            r.wal_fpi_per_req = (fpi - wal0[0]) / answered
            r.wal_bytes_per_req = (wal_bytes - wal0[1]) / answered
        self.rate_hint = max(self.rate_hint, r.requests / r.duration_s)
        return r

    def close(self) -> None:
        self.reqfile.unlink(missing_ok=True)


def _paired_phase(name: str, runs: int, runner: _Runner, ref: _Runner) -> Phase:
    """``runs`` rounds, each a run of the measured server and one of the reference, the
    order alternating (each warmed up first)."""
    phase = Phase(name, load=_loadavg(), busy=cpu_busy())
    log(f"[{runner.label}] {name}: load {phase.load}, cpu busy {phase.busy or 0:.0%}")
    for each in (runner, ref):
        warm = each.run(min(2, runner.bench.args.duration))
        log(f"[{each.label}] {name} warm-up: {warm.ok_per_s:,.0f}/s")
    for i in range(runs):
        order = (runner, ref) if i % 2 == 0 else (ref, runner)
        for each in order:
            r = each.run(runner.bench.args.duration)
            (phase.runs if each is runner else phase.ref_runs).append(r)
            log(f"[{each.label}] {name} run {i + 1}/{runs}: {_line(r)}")
    return phase


#: The purge's sessions name themselves so (the database URL's ``application_name``).
PURGE_APPLICATION = "bench_growth_purge"


def _purge_between_batches(db: str) -> bool:
    """Whether the purge's sessions are all idle outside a transaction: between two
    batches (in the pause after one), holding no lock. Stopped there, the purge's batches
    keep their pace (``purge_pause`` times a batch's wall time, which a stop inside the
    batch would stretch) and no receiver waits for it."""
    busy = pg_scalar(
        db,
        "SELECT count(*) FILTER (WHERE state <> 'idle') FROM pg_stat_activity"
        f" WHERE application_name = '{PURGE_APPLICATION}'",
    )
    return busy == 0


def _stop_between_batches(purge: subprocess.Popen[bytes], db: str) -> bool:
    """SIGSTOP the purge between two of its batches; False if it has ended or was never
    found between batches within a few seconds."""
    for _ in range(200):
        if purge.poll() is not None:
            return False
        os.kill(purge.pid, signal.SIGSTOP)
        try:
            if _purge_between_batches(db):
                return True
        except BaseException:
            os.kill(purge.pid, signal.SIGCONT)
            raise
        os.kill(purge.pid, signal.SIGCONT)
        time.sleep(0.02)
    return False


def _line(r: RunResult) -> str:
    errors = f"  ERRORS {r.errors}" if r.errors else ""
    dup = f"  ({r.duplicate} duplicate: ids re-sent)" if r.duplicate else ""
    return f"{r.ok_per_s:8,.0f}/s  p50 {r.p50_ms:6.2f} ms  p99 {r.p99_ms:6.2f} ms{errors}{dup}"


def _search(config: str, where: str | None, env: dict[str, str]) -> tuple[float, int]:
    """One ``hookinbox deliveries list --where`` over the last 7 days: wall seconds (the
    process from start to exit) and the deliveries it listed. ``where`` None: the same
    command listing one delivery, no filter (the process's start-up and a trivial
    query, subtracted in the report)."""
    cmd = [str(HOOKINBOX), "deliveries", "list", "--config", config, "--since", "7d", "--json"]
    cmd += ["--where", where] if where is not None else ["--limit", "1"]
    # No key ring: with one, a payload filter opens every body of the window in Python
    # (a body may be sealed; docs/operations/encryption.md), and the bench's environment
    # carries one for the sealed targets. This times the SQL filter of a plain store.
    plain = {k: v for k, v in env.items() if k != "HOOKINBOX_ENCRYPTION_KEYS"}
    t0 = time.monotonic()
    done = subprocess.run(cmd, env=plain, capture_output=True, text=True, timeout=300)
    seconds = time.monotonic() - t0
    if done.returncode != 0:
        raise RuntimeError(f"search failed: {done.stderr.strip()[-300:]}")
    return seconds, len(json.loads(done.stdout))


def bench_growth(kind: str, rows: int, bodies: int, bench: Bench) -> GrowthResult:
    """The five phases on one store of ``kind``; the store is dropped at the end."""
    label = f"growth-{kind}"
    result = GrowthResult(f"hookinbox-{kind}", rows)
    store = fresh_hookinbox_store(kind, f"growth_{kind}", bench.tmp)
    ref_store = fresh_hookinbox_store(kind, f"growth_{kind}_ref", bench.tmp)
    server: Proc | None = None
    runner: _Runner | None = None
    ref_server: Proc | None = None
    ref: _Runner | None = None
    try:

        def start(
            which: HookinboxStore, name: str, config: Path | None = None
        ) -> tuple[Proc, _Runner, Path]:
            if config is None:
                config = hookinbox_config(
                    which, bench.tmp, name, bench.env, bench.args.hookinbox_concurrency
                )
                with config.open("a") as out:
                    out.write(BENCH_OPERATIONS)
            cmd = hookinbox_serve_cmd(
                config, free_port(), workers=False, log_level=bench.args.hookinbox_log_level
            )
            proc = Proc(name, cmd, bench.env, bench.tmp / f"{name}.log")
            proc.pg_db = which.pg_db
            proc.start()
            return proc, _Runner(proc, bench, name), config

        # The reference: an empty store of its own, served throughout, measured beside
        # every run of the growing store's phases but the purge's.
        ref_server, ref, _ = start(ref_store, f"{label}-ref")
        server, runner, config = start(store, label)
        result.phases.append(_paired_phase("empty", bench.args.runs, runner, ref))
        server.stop()
        runner.close()

        plan = FillPlan.last_thirty_days(rows, bodies)
        result.retire_expected = plan.rows_older_than(RETIRE_OLDER_THAN_DAYS)
        log(f"[{label}] writing {rows:,} old deliveries ({plan.payloads:,} with a payload)")
        result.fill = fill(store, plan, label)
        f = result.fill
        log(
            f"[{label}] filled in {f.seconds:.0f} s (+{f.settle_seconds:.0f} s vacuum/checkpoint), "
            f"store {f.store_bytes / 2**30:.2f} GiB"
        )

        # The search first, on a quiet server-less store: one body of the week matches.
        order = rows - plan.payloads // 2
        result.search_where = f"data.metadata.order = ord_{order:09d}"
        for n in range(SEARCHES):
            seconds, found = _search(str(config), result.search_where, bench.env)
            result.search_seconds.append(seconds)
            result.search_found = found
            bare, _ = _search(str(config), None, bench.env)
            result.search_baseline.append(bare)
            log(
                f"[{label}] search {n + 1}/{SEARCHES}: {seconds:.2f} s, {found} found; "
                f"no filter {bare:.2f} s"
            )

        server, runner, _ = start(store, label, config)
        result.phases.append(_paired_phase(f"{rows:,} rows", bench.args.runs, runner, ref))

        purging = Phase("retiring a day", load=_loadavg(), busy=cpu_busy())
        result.phases.append(purging)
        # The purge's own config: the same store, its sessions named (see _paused_run).
        purge_config = bench.tmp / f"{label}-purge.toml"
        text = config.read_text()
        if store.pg_db is not None:
            url = store.url
            text = text.replace(f'"{url}"', f'"{url}?application_name={PURGE_APPLICATION}"')
        purge_config.write_text(text)
        purge_cmd = [
            str(HOOKINBOX),
            "purge",
            "--config",
            str(purge_config),
            "--older-than",
            f"{RETIRE_OLDER_THAN_DAYS}d",
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
            # On PostgreSQL, rounds: a run while the purge works and one while it is
            # stopped, the order alternating, until it ends (SQLite: a stopped purge may
            # hold the file's write lock, so its runs are all while it works).
            while purge.poll() is None and time.monotonic() - t0 < MAX_PURGE_SECONDS:
                paused_first = store.pg_db is not None and len(purging.runs) % 2 == 1
                if paused_first:
                    _paused_run(purge, store.pg_db, runner, purging, result)
                r = runner.run(bench.args.duration)
                purging.runs.append(r)
                log(f"[{label}] retiring run {len(purging.runs)}: {_line(r)}")
                if store.pg_db is not None and not paused_first:
                    _paused_run(purge, store.pg_db, runner, purging, result)
            purge.wait(timeout=MAX_PURGE_SECONDS - (time.monotonic() - t0))
        except subprocess.TimeoutExpired:
            result.notes.append(f"purge stopped unfinished after {MAX_PURGE_SECONDS:.0f} s")
        finally:
            if purge.poll() is None:
                os.killpg(purge.pid, signal.SIGCONT)  # a stopped process holds its SIGTERM
                os.killpg(purge.pid, signal.SIGTERM)
                purge.wait(timeout=30)
        result.purge_seconds = time.monotonic() - t0
        text = purge_log.read_text(errors="replace").strip()
        result.purge_report = "; ".join(text.splitlines()) if text else f"exit {purge.returncode}"
        # PostgreSQL retires whole payload days: one line per day, then "partitions: ...".
        retired = re.search(r"^partitions: .*$", text, re.MULTILINE)
        if retired:
            result.purge_report = f"{retired.group(0)}; {result.purge_report}"
        dropped = re.findall(
            r"^partition (\S+): retired, (\d+) .* in ([\d.]+) s, \S+ locked ([\d.]+) s of it$",
            text,
            re.M,
        )
        if any(int(rows) for _, rows, _, _ in dropped):
            result.partition_seconds = sum(float(took) for _, rows, took, _ in dropped if int(rows))
        if dropped:
            name, _, took, _ = max(dropped, key=lambda each: float(each[2]))
            result.longest_retirement = (name, float(took))
            result.longest_locked = max(float(locked) for *_, locked in dropped)
        if purge.returncode != 0:
            result.notes.append(f"purge exited {purge.returncode}: {result.purge_report}")
        log(f"[{label}] purge: {result.purge_report} ({result.purge_seconds:.1f} s)")
        deleted = re.search(r"deliveries: deleted (\d+)", result.purge_report or "")
        if deleted and result.retire_expected is not None:
            ratio = int(deleted.group(1)) / max(result.retire_expected, 1)
            if not 0.9 <= ratio <= 1.1:
                result.notes.append(
                    f"purge retired {deleted.group(1)} deliveries, "
                    f"~{result.retire_expected:,} expected (the oldest day)"
                )

        result.phases.append(_paired_phase("after", bench.args.runs, runner, ref))
    except Exception as exc:
        reason = f"{type(exc).__name__}: {exc}"
        log(f"[{label}] aborted: {reason}" + (f"\n{server.log_tail()}" if server else ""))
        result.notes.append(f"aborted: {reason}")
    finally:
        for proc, each in ((server, runner), (ref_server, ref)):
            if proc is not None:
                proc.stop()
                if note := proc.bad_exit():
                    result.notes.append(note)
            if each is not None:
                each.close()
        for which in (store, ref_store):
            if which.pg_db is not None:
                pg_drop(which.pg_db)
            elif which.sqlite_path is not None:
                for suffix in ("", "-wal", "-shm"):
                    (which.sqlite_path.parent / f"{which.sqlite_path.name}{suffix}").unlink(
                        missing_ok=True
                    )
    return result


def _paused_run(
    purge: subprocess.Popen[bytes], db: str, runner: _Runner, phase: Phase, result: GrowthResult
) -> None:
    """One run with the purge stopped (between two of its batches), then let it go on;
    its stopped seconds are counted apart from the purge's time."""
    if not _stop_between_batches(purge, db):
        return
    stopped = time.monotonic()
    try:
        r = runner.run(runner.bench.args.duration)
    finally:
        os.kill(purge.pid, signal.SIGCONT)
        result.purge_paused_seconds += time.monotonic() - stopped
    phase.paused_runs.append(r)
    log(f"[{runner.label}] retiring, purge stopped, run {len(phase.paused_runs)}: {_line(r)}")


# ---------------------------------------------------------------- report


def report(results: dict[str, GrowthResult]) -> None:
    print("== growth: hookinbox serve --no-workers under wrk (unique ids), one store growing:")
    print("   empty -> N old deliveries over 30 days (the last 7 days with their bodies)")
    print(f"   -> while `purge --older-than {RETIRE_OLDER_THAN_DAYS}d` retires the oldest day")
    print("   -> after")
    print()
    hdr = (
        f"{'target':<17} {'phase':<18} {'runs':>4} {'200/s':>9} {'x empty':>8} "
        f"{'p50 ms':>7} {'p99 ms':>7} {'cpu us':>7} {'pg us':>6} {'FPI':>5} {'WAL kB':>6} "
        f"{'load':>5}  runs (200/s)"
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
            cpu = _median_of(p.runs, "cpu_us_per_req", "7.0f", 7)
            pg_cpu = _median_of(p.runs, "pg_cpu_us_per_req", "6.0f", 6)
            fpi = _median_of(p.runs, "wal_fpi_per_req", "5.2f", 5)
            wal_kb = _median_of(p.runs, "wal_bytes_per_req", "6.1f", 6, scale=1 / 1024)
            each = " ".join(f"{r.ok_per_s / 1000:.1f}k" for r in p.runs[:12])
            more = f" (+{len(p.runs) - 12})" if len(p.runs) > 12 else ""
            load = f"{p.load:5.2f}" if p.load is not None else f"{'n/a':>5}"
            print(
                f"{target:<17} {p.name:<18} {len(p.runs):>4} {rate:>9,.0f} {ratio} "
                f"{p.med('p50_ms') or 0:>7.2f} {p.med('p99_ms') or 0:>7.2f} {cpu} {pg_cpu} "
                f"{fpi} {wal_kb} {load}  "
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
        if gr.search_seconds:
            med = statistics.median(gr.search_seconds)
            bare = statistics.median(gr.search_baseline) if gr.search_baseline else 0.0
            verdict = "met" if med - bare < 1.0 else "NOT met"
            print(
                f"{'':<17} search `--where '{gr.search_where}' --since 7d` over "
                f"{gr.fill.payloads if gr.fill else 0:,} bodies: median {med:.2f} s, "
                f"longest {max(gr.search_seconds):.2f} s, {gr.search_found} found; the same "
                f"command without the filter {bare:.2f} s (start-up): the search "
                f"{med - bare:.2f} s (aim < 1 s: {verdict})"
            )
        if gr.purge_seconds is not None and gr.partition_seconds is not None:
            # The day's rows go by DROP; its journal keys (kept a unique index for the whole
            # dedup retention) in bounded batches over the rest of the purge. The aim holds
            # for each retirement, an empty day's too: its lock stops the same writers.
            longest = gr.longest_retirement or ("", 0.0)
            met = gr.partition_seconds < 1 and longest[1] < 1
            print(
                f"{'':<17} retiring a day under load: {gr.purge_report} "
                f"(the day's partitions retired in {gr.partition_seconds:.2f} s, the longest of"
                f" every retirement {longest[1]:.2f} s ({longest[0]}), writers queued behind"
                f" a retirement's lock at most {gr.longest_locked or 0.0:.2f} s; aim < 1 s: "
                f"{'met' if met else 'NOT met'}; the whole purge with "
                f"the day's journal keys in batches: {gr.purge_seconds:.1f} s wall)"
            )
        elif gr.purge_seconds is not None:
            print(
                f"{'':<17} retiring a day under load: {gr.purge_report} "
                f"({gr.purge_seconds:.1f} s wall; aim < 1 s: "
                f"{'met' if gr.purge_seconds < 1 else 'NOT met'})"
            )
        retiring = gr.phase("retiring a day")
        grown = gr.phase(f"{gr.rows:,} rows")
        if gr.purge_paused_seconds:
            print(
                f"{'':<17} of the purge's {gr.purge_seconds or 0:.1f} s, "
                f"{gr.purge_paused_seconds:.1f} s stopped for the paired runs: "
                f"{(gr.purge_seconds or 0) - gr.purge_paused_seconds:.1f} s working"
            )
        during = retiring.med("ok_per_s") if retiring else None
        before = grown.med("ok_per_s") if grown else None
        if retiring and retiring.paused_runs:
            _paired_line(
                "receive while the purge works / while it is stopped, paired",
                retiring.round_ratios(retiring.paused_runs),
            )
        elif during and before:
            verdict = "met" if during >= 0.9 * before else "NOT met"
            print(
                f"{'':<17} receive while retiring / before = {during / before:.2f} "
                f"(aim >= 0.90: {verdict})"
            )
        if empty and grown and empty.ref_runs and grown.ref_runs:
            # Each phase against the reference in its own rounds; the empty phase's
            # (two empty stores) is the pairing's own spread, and divides the other out.
            at_empty = statistics.median(empty.round_ratios(empty.ref_runs))
            print(
                f"{'':<17} empty / reference, paired = {at_empty:.2f} (each round: "
                + " ".join(f"{x:.2f}" for x in empty.round_ratios(empty.ref_runs))
                + ")"
            )
            _paired_line(
                f"{gr.rows:,} rows / empty, each against the reference in its rounds",
                [x / at_empty for x in grown.round_ratios(grown.ref_runs)],
            )
        elif base and grown and (rate := grown.med("ok_per_s")):
            verdict = "met" if rate >= 0.9 * base else "NOT met"
            print(f"{'':<17} {gr.rows:,} rows / empty = {rate / base:.2f} (aim >= 0.90: {verdict})")
        for note in gr.notes:
            print(f"{'':<17} note: {note}")


def _paired_line(what: str, ratios: list[float]) -> None:
    """A ratio measured in rounds: the median of the rounds' ratios, each listed."""
    if not ratios:
        return
    med = statistics.median(ratios)
    verdict = "met" if med >= 0.9 else "NOT met"
    each = " ".join(f"{x:.2f}" for x in ratios[:16]) + (" ..." if len(ratios) > 16 else "")
    print(f"{'':<17} {what} = {med:.2f} (aim >= 0.90: {verdict}; each round: {each})")


def _median_of(runs: list[RunResult], attr: str, fmt: str, width: int, scale: float = 1.0) -> str:
    """The runs' median of an optional figure, formatted, or ``n/a`` where none was read
    (PostgreSQL's on SQLite)."""
    values = [v * scale for r in runs if (v := getattr(r, attr)) is not None]
    return format(statistics.median(values), fmt) if values else f"{'n/a':>{width}}"


def to_json(results: dict[str, GrowthResult]) -> dict[str, object]:
    return {
        t: {
            "rows": gr.rows,
            "unavailable": gr.unavailable,
            "notes": gr.notes,
            "fill": gr.fill.__dict__ if gr.fill else None,
            "purge_seconds": gr.purge_seconds,
            "purge_paused_seconds": gr.purge_paused_seconds,
            "purge_report": gr.purge_report,
            "partition_seconds": gr.partition_seconds,
            "longest_retirement": gr.longest_retirement,
            "longest_locked": gr.longest_locked,
            "retire_expected": gr.retire_expected,
            "search_where": gr.search_where,
            "search_seconds": gr.search_seconds,
            "search_baseline": gr.search_baseline,
            "search_found": gr.search_found,
            "phases": [
                {
                    "name": p.name,
                    "load": p.load,
                    "busy": p.busy,
                    "runs": [r.__dict__ | {"ok_per_s": r.ok_per_s} for r in p.runs],
                    "ref_runs": [r.__dict__ | {"ok_per_s": r.ok_per_s} for r in p.ref_runs],
                    "paused_runs": [r.__dict__ | {"ok_per_s": r.ok_per_s} for r in p.paused_runs],
                }
                for p in gr.phases
            ],
        }
        for t, gr in results.items()
    }
