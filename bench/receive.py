"""Mode ``receive``: answers per second of each receiver under wrk (workers off).

Each target is its own server process; wrk drives it with pre-signed requests in two
modes: ``unique`` (every request a new event id: a journal row and a job each) and
``dup`` (the same few ids, all already accepted, again and again). After the server
stopped, the rows in its store are checked against the ``accepted`` answers.
"""

from __future__ import annotations

import asyncio
import secrets
import statistics
from dataclasses import dataclass, field

import waits
from harness import (
    SEALED_SUFFIX,
    Bench,
    Proc,
    RunResult,
    Unavailable,
    db_name,
    dup_ids,
    free_port,
    fresh_hookinbox_store,
    hookinbox_config,
    hookinbox_serve_cmd,
    log,
    pg_dsn,
    pg_recreate,
    prime,
    run_wrk_measured,
    store_kind_of,
    unique_ids,
    uvicorn_cmd,
    write_requests,
)
from peer_targets import (
    PEERS,
    RowCounter,
    fresh_peer_db,
    peer_counter,
    peer_db,
    peer_env,
    peer_receiver,
)
from tables import HOOKINBOX_SQL, Probe

HOOKINBOX_TARGETS = (
    "hookinbox-sqlite",
    "hookinbox-pg",
    "hookinbox-sqlite-sealed",
    "hookinbox-pg-sealed",
    "hookinbox-pg-x2",
)
ALL_TARGETS = ("ceiling", "naive", *HOOKINBOX_TARGETS, *PEERS)
#: Measured only when asked for (--targets): two server processes are not the
#: one-process comparison the ratios are about, but show the scale-out path.
DEFAULT_TARGETS = (
    "ceiling",
    "naive",
    "hookinbox-sqlite",
    "hookinbox-pg",
    "hookinbox-sqlite-sealed",
    "hookinbox-pg-sealed",
)
CEILING_REQUESTS = 20_000  # the bare app ignores ids: one file, cycled


@dataclass
class Cell:
    target: str
    mode: str
    conns: int
    runs: list[RunResult] = field(default_factory=list)

    def med(self, attr: str) -> float:
        return float(statistics.median(getattr(r, attr) for r in self.runs))

    def med_cpu(self) -> float | None:
        values = [r.cpu_us_per_req for r in self.runs if r.cpu_us_per_req is not None]
        return statistics.median(values) if values else None

    def med_pg_cpu(self) -> float | None:
        values = [r.pg_cpu_us_per_req for r in self.runs if r.pg_cpu_us_per_req is not None]
        return statistics.median(values) if values else None


@dataclass
class TargetResult:
    target: str
    cells: list[Cell] = field(default_factory=list)
    unavailable: str | None = None
    notes: list[str] = field(default_factory=list)


def _pg_counter(db: str, tables: dict[str, str]) -> RowCounter:
    async def count() -> dict[str, int]:
        probe = await Probe.open_pg(db)
        try:
            return {label: int(await probe.scalar(sql)) for label, sql in tables.items()}
        finally:
            await probe.close()

    return count


def make_server(target: str, bench: Bench) -> tuple[Proc, RowCounter | None]:
    """The target's server (not started) and how to count its rows afterwards."""
    port = free_port()
    logfile = bench.tmp / f"receive-{target}.log"
    env = bench.env
    if target == "ceiling":
        return Proc(target, uvicorn_cmd("bare_app:app", port), env, logfile), None
    if target == "naive":
        db = db_name("naive")
        pg_recreate(db)
        counter = _pg_counter(
            db,
            {
                "naive_journal": "SELECT count(*) FROM naive_journal",
                "naive_jobs": "SELECT count(*) FROM naive_jobs",
            },
        )
        server_env = {**env, "NAIVE_DSN": pg_dsn(db)}
        proc = Proc(target, uvicorn_cmd("naive_receiver:app", port), server_env, logfile)
        proc.pg_db = db
        return proc, counter
    if target in PEERS:
        penv = peer_env(target, env, bench.args.pgqueuer_on_conflict)
        fresh_peer_db(target, penv)
        proc = peer_receiver(target, port, penv, logfile)
        if target != "celery":
            proc.pg_db = peer_db(target)
        return proc, peer_counter(target)
    kind = store_kind_of(target)
    # A store of its own per target: every target's server is up for the whole mode.
    store = fresh_hookinbox_store(kind, "receive_" + target.replace("-", "_"), bench.tmp)
    config = hookinbox_config(
        store,
        bench.tmp,
        target,
        env,
        bench.args.hookinbox_concurrency,
        sealed=target.endswith(SEALED_SUFFIX),
    )
    cmd = hookinbox_serve_cmd(
        config,
        port,
        workers=False,
        log_level=bench.args.hookinbox_log_level,
        processes=2 if target.endswith("-x2") else 1,
    )

    async def count() -> dict[str, int]:
        probe = await Probe.open(store)
        try:
            return {
                "deliveries": int(await probe.scalar("SELECT count(*) FROM deliveries")),
                "jobs": int(await probe.scalar(HOOKINBOX_SQL.rows)),
            }
        finally:
            await probe.close()

    proc = Proc(target, cmd, env, logfile)
    proc.pg_db = store.pg_db
    return proc, count


def check_rows(counter: RowCounter, accepted: int, in_flight: int) -> str:
    """After the server stopped: every "accepted" answer must have its journal row and job.

    A few more rows than answers are expected: requests still in flight when wrk stops a
    run may be committed without their answer being counted (at most one per connection).
    """
    try:
        counts = asyncio.run(counter())
    except Exception as exc:
        return f"row check skipped ({type(exc).__name__}: {exc})"
    ok = all(accepted <= c <= accepted + in_flight for c in counts.values())
    verdict = "ok" if ok else f"MISMATCH (expected {accepted:,}..{accepted + in_flight:,})"
    rows = ", ".join(f"{t}={c:,}" for t, c in counts.items())
    return f"row check {verdict}: {accepted:,} accepted answers; {rows}"


class _Session:
    """One target's server, up for the whole mode: started and warmed up once, then given
    one run of each round in turn, stopped (and its rows checked) at the end."""

    def __init__(self, target: str, bench: Bench) -> None:
        self.target = target
        self.bench = bench
        self.result = TargetResult(target)
        self.server: Proc | None = None
        self.counter: RowCounter | None = None
        self.reqfile = bench.tmp / f"{target}.reqs"
        self.accepted_total = 0
        #: Requests cut off when wrk stops a run: written, maybe committed, not counted.
        self.in_flight = 0
        #: The bare app ignores ids: one file, cycled.
        self.cycles = target == "ceiling"
        self.modes = ["unique"] if self.cycles else ["unique", "dup"]
        self.dup_list = dup_ids(bench.args.dup_ids, secrets.token_hex(3))
        self.primed = False
        #: A rate estimate for sizing the unique-id files so that a run never has to
        #: re-send an id.
        self.rate_hint = 40_000.0
        self.alive = False

    def open(self) -> None:
        target, args = self.target, self.bench.args
        try:
            self.server, self.counter = make_server(target, self.bench)
            log(f"[{target}] starting: {' '.join(self.server.cmd)}")
            self.server.start()
        except Unavailable as exc:
            self.result.unavailable = str(exc)
            log(f"[{target}] unavailable: {exc}")
            return
        except Exception as exc:
            self.result.unavailable = f"{type(exc).__name__}: {exc}"
            log(f"[{target}] unavailable: {self.result.unavailable}")
            return
        self.alive = True
        port = self.server.port
        warm = min(2, args.duration)
        conns_max = max(args.connections)
        try:
            if self.cycles:
                write_requests(self.reqfile, port, self.bench.signer, unique_ids(CEILING_REQUESTS))
            else:
                ids = unique_ids(int(self.rate_hint * warm * 1.5) + 1000)
                write_requests(self.reqfile, port, self.bench.signer, ids)
            w = run_wrk_measured(
                self.bench.wrk, self.server, self.reqfile, conns_max, args.threads, warm
            )
        except Exception as exc:
            self._abort(exc)
            return
        self.accepted_total += w.accepted
        self.in_flight += conns_max
        if not self.cycles:
            self.rate_hint = max(w.ok_per_s, 500.0)
        log(f"[{target}] warm-up: {w.ok_per_s:,.0f}/s, errors {w.errors}")

    def run(self, mode: str, conns: int, index: int) -> None:
        """Run ``index`` of the (mode, conns) cell."""
        assert self.server is not None
        args, port, signer = self.bench.args, self.server.port, self.bench.signer
        cell = next((c for c in self.result.cells if c.mode == mode and c.conns == conns), None)
        if cell is None:
            cell = Cell(self.target, mode, conns)
            self.result.cells.append(cell)
        try:
            if mode == "unique" and not self.cycles:
                count = int(self.rate_hint * args.duration * 1.6) + 2000
                write_requests(self.reqfile, port, signer, unique_ids(count))
            elif mode == "dup":
                if not self.primed:
                    self.accepted_total += prime(port, signer, self.dup_list)
                    self.primed = True
                write_requests(self.reqfile, port, signer, self.dup_list)
            timed = self.target.startswith("hookinbox-")
            before = waits.scrape(port) if timed else None
            checkpoints = waits.pg_checkpoints() if timed and self.server.pg_db else None
            r = run_wrk_measured(
                self.bench.wrk, self.server, self.reqfile, conns, args.threads, args.duration
            )
            r.waits = waits.waits_between(before, waits.scrape(port) if timed else None)
            after = waits.pg_checkpoints() if checkpoints is not None else None
            if r.waits is not None and checkpoints is not None and after is not None:
                r.waits["checkpoints"] = after - checkpoints
        except Exception as exc:
            self._abort(exc)
            return
        if mode == "unique" and not self.cycles:
            self.rate_hint = max(self.rate_hint, r.requests / r.duration_s)
        cell.runs.append(r)
        self.accepted_total += r.accepted
        self.in_flight += conns
        log(f"[{self.target}] {mode:6} c={conns:<3} run {index + 1}/{args.runs}: " + _line(r))
        if r.waits is not None:
            log(f"    where answers waited: {waits.describe(r.waits)}")
        if mode == "unique" and not self.cycles and (r.wraps or r.duplicate):
            log(f"    (ids re-sent: {r.duplicate} duplicate answers)")
        if mode == "dup" and r.accepted:
            log(f"    ({r.accepted} accepted in a dup run)")

    def _abort(self, exc: Exception) -> None:
        self.alive = False
        self.result.notes.append(f"aborted: {type(exc).__name__}: {exc}")
        tail = self.server.log_tail() if self.server is not None else ""
        log(f"[{self.target}] aborted: {exc}\n{tail}")

    def close(self) -> None:
        self.alive = False
        if self.server is None:
            return
        self.server.stop()
        self.reqfile.unlink(missing_ok=True)
        if note := self.server.bad_exit():
            self.result.notes.append(note)
        if self.counter is not None and self.result.cells:
            self.result.notes.append(check_rows(self.counter, self.accepted_total, self.in_flight))
        self.server = None


def bench_targets(targets: list[str], bench: Bench) -> dict[str, TargetResult]:
    """Every target's cells, measured in rounds: all servers start first, then each round
    gives every target one run of the cell in turn (the order rotated each round), so the
    runs a ratio sets side by side are seconds apart, not minutes: this machine's speed
    drifts by more than the differences the ratios are about."""
    args = bench.args
    sessions = [_Session(target, bench) for target in targets]
    try:
        for session in sessions:
            session.open()
        for conns in args.connections:
            for mode in ("unique", "dup"):
                for index in range(args.runs):
                    turn = sessions[index % len(sessions) :] + sessions[: index % len(sessions)]
                    for session in turn:
                        if session.alive and mode in session.modes:
                            session.run(mode, conns, index)
    finally:
        for session in sessions:
            session.close()
    return {session.target: session.result for session in sessions}


def _line(r: RunResult) -> str:
    cpu = f"  cpu {r.cpu_us_per_req:5.0f} us/req" if r.cpu_us_per_req is not None else ""
    if r.pg_cpu_us_per_req is not None:
        cpu += f"  pg {r.pg_cpu_us_per_req:5.0f} us/req"
    flag = ""
    if r.errors:
        flag = f"  ERRORS non200={r.non200} {r.non200_codes} socket={r.socket_errors}"
    return f"{r.ok_per_s:8,.0f}/s  p50 {r.p50_ms:6.2f} ms  p99 {r.p99_ms:6.2f} ms{cpu}{flag}"


# ---------------------------------------------------------------- report


def find(results: dict[str, TargetResult], target: str, mode: str, conns: int) -> Cell | None:
    tr = results.get(target)
    if tr is None:
        return None
    for c in tr.cells:
        if c.mode == mode and c.conns == conns and c.runs:
            return c
    return None


def best_unique_rate(results: dict[str, TargetResult], target: str) -> float | None:
    """The median unique-id rate at the most connections measured (the headline)."""
    tr = results.get(target)
    cells = [c for c in tr.cells if c.mode == "unique" and c.runs] if tr else []
    if not cells:
        return None
    return max(cells, key=lambda c: c.conns).med("ok_per_s")


def paired(a: Cell, b: Cell, attr: str) -> tuple[float, list[float]]:
    """The median of the rounds' ratios ``a / b`` of ``attr``: run k of ``a`` beside run k
    of ``b`` (the same round, seconds apart), so a drift of the machine's speed between
    rounds divides out. Rounds where either run lacks the figure are left out."""
    each = [
        x / y
        for ra, rb in zip(a.runs, b.runs, strict=False)
        if (x := getattr(ra, attr)) is not None and (y := getattr(rb, attr))
    ]
    return (float(statistics.median(each)) if each else float("nan")), each


def _each(ratios: list[float]) -> str:
    return " ".join(f"{r:.2f}" for r in ratios)


def report(results: dict[str, TargetResult], connections: list[int]) -> None:
    print("== receive: answers with HTTP 200 per second (accepted + duplicate), workers off")
    print("   latency = wrk, request write to answer; cpu = server CPU per answered request;")
    print("   pg = CPU of the PostgreSQL backends of the target's own database per answer")
    print()
    hdr = (
        f"{'target':<23} {'mode':<6} {'conns':>5} {'200/s':>9} {'p50 ms':>7} "
        f"{'p99 ms':>7} {'cpu us':>7} {'pg us':>6}  {'errors':>6}  runs (200/s)"
    )
    print(hdr)
    print("-" * len(hdr))
    for target, tr in results.items():
        if tr.unavailable is not None:
            lines = [ln.strip() for ln in tr.unavailable.splitlines() if ln.strip()]
            reason = lines[0] + (f" ... {lines[-1]}" if len(lines) > 1 else "")
            print(f"{target:<23} unavailable: {reason}")
            continue
        for c in tr.cells:
            if not c.runs:
                continue
            errors = sum(r.errors for r in c.runs)
            each = " ".join(f"{r.ok_per_s / 1000:.1f}k" for r in c.runs)
            cpu = c.med_cpu()
            cpu_s = f"{cpu:7.0f}" if cpu is not None else f"{'n/a':>7}"
            pg = c.med_pg_cpu()
            pg_s = f"{pg:6.0f}" if pg is not None else f"{'':>6}"
            print(
                f"{target:<23} {c.mode:<6} {c.conns:>5} {c.med('ok_per_s'):>9,.0f} "
                f"{c.med('p50_ms'):>7.2f} {c.med('p99_ms'):>7.2f} {cpu_s} {pg_s}  "
                f"{errors:>6}  {each}"
            )
        for note in tr.notes:
            print(f"{'':<23} note: {note}")
    errors_total = sum(r.errors for tr in results.values() for c in tr.cells for r in c.runs)
    if errors_total:
        print(
            f"\nWARNING: {errors_total} non-200 answers or socket errors; "
            "figures of runs with errors are not clean (see the per-run log above)."
        )

    print(
        "\nratios (each round's runs of the two targets set side by side, a few seconds apart;"
        "\nthe median of the rounds' ratios; unique ids unless noted):"
    )
    # (numerator, denominator, mode, connections (None: the most measured), aim, unit)
    ratios: list[tuple[str, str, str, int | None, float | None, str]] = [
        ("hookinbox-pg", "ceiling", "unique", 32, 0.40, "of ceiling"),
        ("hookinbox-pg", "naive", "unique", 32, 3.0, "x naive"),
        ("hookinbox-pg", "naive", "unique", 8, 2.0, "x naive"),
        ("hookinbox-sqlite", "ceiling", "unique", 32, 0.35, "of ceiling"),
        ("hookinbox-pg", "ceiling", "unique", 8, None, "of ceiling"),
        ("hookinbox-sqlite", "naive", "unique", 32, None, "x naive"),
        ("hookinbox-pg", "naive", "dup", None, None, "x naive"),
        ("hookinbox-pg", "ceiling", "dup", None, None, "of ceiling"),
        ("hookinbox-sqlite", "ceiling", "dup", None, None, "of ceiling"),
        ("hookinbox-pg-sealed", "hookinbox-pg", "unique", 32, None, "of unsealed"),
        ("hookinbox-sqlite-sealed", "hookinbox-sqlite", "unique", 32, None, "of unsealed"),
    ]
    for peer in PEERS:
        if peer in results:
            ratios += [
                (
                    "hookinbox-pg",
                    peer,
                    "unique",
                    None,
                    2.0 if peer == "celery" else None,
                    f"x {peer}",
                ),
                ("hookinbox-pg", peer, "dup", None, None, f"x {peer}"),
                (peer, "ceiling", "unique", None, None, "of ceiling"),
                (peer, "naive", "unique", None, None, "x naive"),
            ]
    for num, den, mode, at, aim, unit in ratios:
        conns = at if at is not None else max(connections)
        if num not in results or conns not in connections:
            continue
        a = find(results, num, mode, conns)
        b = find(results, den, "unique" if den == "ceiling" else mode, conns)
        label = f"  {num} {mode} / {den} @{conns}c"
        if a is None or b is None:
            missing = num if a is None else den
            print(f"{label:<46} n/a ({missing} not measured)")
            continue
        ratio, rounds = paired(a, b, "ok_per_s")
        value = f"{ratio:.2f} {unit}" if unit.startswith("of") else f"{ratio:.2f}{unit}"
        verdict = ""
        if aim is not None:
            goal = f"{aim:.0%}" if unit.startswith("of") else f"{aim:g}x"
            verdict = f"aim >= {goal}: {'met' if ratio >= aim else 'NOT met'}"
        print(f"{label:<46} {value:<22} {verdict:<22} rounds: {_each(rounds)}")
    ours = find(results, "hookinbox-pg", "unique", 32)
    bare = find(results, "ceiling", "unique", 32)
    if ours is not None and bare is not None:
        p99 = ours.med("p99_ms")
        verdict = "met" if p99 <= 10 else "NOT met"
        label = "  hookinbox-pg unique p99 @32c"
        print(f"{label:<46} {p99:.1f} ms{'':<15} aim <= 10 ms: {verdict}")
        if where := where_the_tail_waits(ours):
            print(where)
        if ours.med_cpu() is not None and bare.med_cpu() is not None:
            times, rounds = paired(ours, bare, "cpu_us_per_req")
            verdict = "met" if times <= 2 else "NOT met"
            label = "  hookinbox-pg unique cpu/req / ceiling's @32c"
            print(
                f"{label:<46} {times:.2f}x{'':<18} aim <= 2x: {verdict:<11} rounds: {_each(rounds)}"
            )


def where_the_tail_waits(cell: Cell) -> str:
    """The p99 aim's explanation from the server's own timing (bench/waits.py): the
    share of answers the server took over 10 ms against the client's p99, medians of
    the cell's runs; empty when the server did not time them."""
    timed = [r.waits for r in cell.runs if r.waits is not None]
    if not timed:
        return ""

    def med(key: str) -> float:
        return float(statistics.median(w.get(key, 0.0) for w in timed))

    slow = [w["answer_over_10ms"] for w in timed]
    checkpoints = [w["checkpoints"] for w in timed if "checkpoints" in w]
    return (
        f"{'':<4}where it waits (the server's own timing, medians of {len(timed)} runs): the"
        f" server answered > 10 ms after the request was whole on"
        f" {med('answer_over_10ms'):.1%} of requests"
        f" (runs {' '.join(f'{s:.1%}' for s in slow)}), mean {med('answer_mean_ms'):.1f} ms"
        f" = batch gather {med('gather_mean_ms'):.1f} + commit {med('commit_mean_ms'):.1f} ms"
        f" (commits > 10 ms {med('commit_over_10ms'):.1%}) + the rest (the event loop's queue"
        " before the handler, its CPU, the wait after the commit); gc pauses"
        f" {med('gc_pauses'):.0f}"
        + (
            f"; checkpoints in runs {' '.join(f'{c:.0f}' for c in checkpoints)}"
            if checkpoints
            else ""
        )
        + f"\n{'':<4}{_tail_verdict(med('answer_over_10ms'), cell.med('p99_ms'))}"
    )


def _tail_verdict(server_slow: float, client_p99_ms: float) -> str:
    if client_p99_ms <= 10:
        return "the client's p99 is within the aim"
    if server_slow < 0.01:
        return (
            "the server answered 99% within 10 ms: the rest of the client's tail is outside"
            " it: in the kernel between client and server (disk writes during the run"
            " lengthen it: bench/README.md) or in the client; client, server and"
            " PostgreSQL share this machine's cores"
        )
    return (
        "the server's own answers pass 10 ms on 1% or more: the tail is inside it (see the"
        " parts above: a commit's wait, or the event loop's queue when the process is busy)"
    )


def pg_cpu_per_delivery(results: dict[str, TargetResult]) -> dict[str, float]:
    """hookinbox's PostgreSQL CPU per accepted delivery (unique ids), by target and
    connections: the figures set against pgfloor's floor."""
    out: dict[str, float] = {}
    for target, tr in results.items():
        if not target.startswith("hookinbox-") or store_kind_of(target) != "pg":
            continue
        for c in tr.cells:
            if c.mode == "unique" and (us := c.med_pg_cpu()) is not None:
                out[f"{target} receive, unique ids @{c.conns}c (this run)"] = us
    return out


def to_json(results: dict[str, TargetResult]) -> dict[str, object]:
    return {
        t: {
            "unavailable": tr.unavailable,
            "notes": tr.notes,
            "cells": [
                {
                    "mode": c.mode,
                    "conns": c.conns,
                    "runs": [r.__dict__ | {"ok_per_s": r.ok_per_s} for r in c.runs],
                }
                for c in tr.cells
            ],
        }
        for t, tr in results.items()
    }
