"""`make bench`: the whole story of a delivery, in one run.

Modes (--modes, all by default; bench/README.md says what each one measures and how):
  receive   answers/s of each receiver under wrk, workers off (ceiling, naive, hookinbox)
  pipeline  `hookinbox serve` WITH workers under wrk: accepted/s, completed/s, queue depth
  latency   receive -> handler start (p50/p99) at half the max receive rate, open loop
  drain     N queued no-op jobs, ONE worker process: jobs/s until empty, worker CPU
  peers     procrastinate, pgqueuer and the Celery stack (Redis SET NX + Celery on RabbitMQ)
            as receivers (in the receive table) and as drains; dedup probes of hookinbox and Celery
Opt-in: scaleout (2 receivers + 3 workers, exact counts), growth (receive rate on an empty
store, with N million old journal rows, and while `hookinbox purge` runs).

Every server is a subprocess on a free 127.0.0.1 port, stopped by its own process group.
Stores: a SQLite file in a temp dir, PostgreSQL databases bench_<tag>_* created and dropped
by the run. These are figures, not a test: nothing here fails the build.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import os
import secrets
import shutil
import sys
import tempfile
import time
from pathlib import Path

import dedup_probes
import drain
import growth
import harness
import latency
import loadgen
import pg_cluster
import pgfloor
import receive
import scale_out
from celery_stack import drop_celery
from harness import (
    RUN_TAG,
    SEALED_SUFFIX,
    Bench,
    Signer,
    Unavailable,
    cpu_busy,
    ensure_wrk,
    log,
    pg_drop_all,
    set_body_bytes,
)
from peer_targets import PEERS

import pipeline

MODES = ("receive", "pipeline", "latency", "drain", "peers")
#: Opt-in (minutes at bench size): the suite's scale-out scenario; cost growth (minutes and
#: gigabytes: millions of journal rows per store).
EXTRA_MODES = ("scaleout", "growth")
STORES = ("sqlite", "pg")
#: (full run, --quick): a full `make bench` takes about 10 minutes on 2 cores (quick: 3).
DEFAULTS: dict[str, tuple[object, object]] = {
    "duration": (3, 2),
    "runs": (3, 1),
    "connections": ("32,8", "32"),
    "drain_jobs": (10_000, 2_000),
    "latency_seconds": (5.0, 2.0),
    "growth_rows": (5_000_000, 500_000),
}


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--modes", default=",".join(MODES), help=f"subset of {','.join(MODES)}")
    ap.add_argument(
        "--quick",
        action="store_true",
        help="smoke run: 1 run x 2 s per cell, 32 connections, 500 drain jobs, 2 s latency",
    )
    ap.add_argument(
        "--targets",
        default=",".join(receive.DEFAULT_TARGETS),
        help=f"receive mode: subset of {','.join(receive.ALL_TARGETS)}",
    )
    ap.add_argument(
        "--stores", default=",".join(STORES), help="pipeline, latency, drain: sqlite,pg"
    )
    ap.add_argument("--peers", default=",".join(PEERS), help=f"peers mode: {','.join(PEERS)}")
    ap.add_argument("--duration", type=int, help="whole seconds per wrk run (4; quick 2)")
    ap.add_argument("--runs", type=int, help="runs per cell, median quoted (3; quick 1)")
    ap.add_argument("--connections", help="wrk connection counts (32,8; quick 32)")
    ap.add_argument("--threads", type=int, default=1, help="wrk threads (1)")
    ap.add_argument("--dup-ids", type=int, default=8, help="distinct ids in dup runs (8)")
    ap.add_argument(
        "--body-bytes",
        type=int,
        default=0,
        help="grow every event body to about this size with invoice lines (0: ~300 bytes)",
    )
    ap.add_argument("--drain-jobs", type=int, help="jobs queued per drain run (5000; quick 500)")
    ap.add_argument(
        "--latency-seconds", type=float, help="seconds of paced load per latency run (5; quick 2)"
    )
    ap.add_argument(
        "--latency-rate", type=float, help="paced rate (/s) instead of half the max receive rate"
    )
    ap.add_argument(
        "--concurrency",
        type=int,
        default=32,
        help="procrastinate's worker --concurrency (32)",
    )
    ap.add_argument(
        "--hookinbox-concurrency",
        type=int,
        default=128,
        help="hookinbox [worker] concurrency (128 here: two claim lanes of its default "
        "claim_batch 64, its setting for many short jobs; its default is 4)",
    )
    ap.add_argument(
        "--hookinbox-log-level",
        default="info",
        choices=["debug", "info", "warning"],
        help="hookinbox serve/worker --log-level (info, the default a deployment runs)",
    )
    ap.add_argument(
        "--pgqueuer-on-conflict",
        default="skip",
        choices=["skip", "raise"],
        help="pgqueuer receiver: what a repeated dedupe_key does (skip)",
    )
    ap.add_argument(
        "--scale-out-deliveries",
        type=int,
        default=20_000,
        help="mode scaleout: deliveries sent (20000)",
    )
    ap.add_argument(
        "--growth-rows",
        type=int,
        help="mode growth: old deliveries written before the second phase (5000000; quick 500000)",
    )
    ap.add_argument(
        "--growth-sqlite-rows",
        type=int,
        help="mode growth: the same for SQLite only (default: --growth-rows)",
    )
    ap.add_argument(
        "--growth-bodies",
        type=int,
        default=1_000_000,
        help="mode growth: the newest old deliveries that keep their payload, spread over "
        "the last 7 days, which the payload search reads (1000000, at most the rows)",
    )
    ap.add_argument(
        "--pg-cluster",
        default="machine",
        choices=["machine", "sized"],
        help="PostgreSQL to measure on: the machine's (BENCH_PG, its own configuration), or "
        "a cluster of the bench's own configured as the capacity model says (pg_cluster.py)",
    )
    ap.add_argument(
        "--pg-setting",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="with --pg-cluster sized: one more server setting, over the sized ones "
        "(wal_compression=lz4, say); repeatable",
    )
    ap.add_argument(
        "--server-setting",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="one [server] setting of every hookinbox target (batch_overlap_ms=0, say), "
        "a TOML value; repeatable",
    )
    ap.add_argument("--json", type=Path, help="also write the raw per-run results here")
    args = ap.parse_args()
    for name, (full, quick) in DEFAULTS.items():
        if getattr(args, name) is None:
            setattr(args, name, quick if args.quick else full)
    args.connections = [int(c) for c in str(args.connections).split(",") if c]

    def pick(value: str, allowed: tuple[str, ...], what: str) -> list[str]:
        chosen = [v.strip() for v in value.split(",") if v.strip()]
        unknown = set(chosen) - set(allowed)
        if unknown:
            ap.error(f"unknown {what}: {', '.join(sorted(unknown))}")
        return chosen

    if args.pg_setting and args.pg_cluster != "sized":
        ap.error("--pg-setting needs --pg-cluster sized (the machine's server is not changed)")
    for setting in args.pg_setting:
        name, sep, value = setting.partition("=")
        if not sep or not name.strip() or not value.strip():
            ap.error(f"--pg-setting takes NAME=VALUE, not {setting!r}")
    for setting in args.server_setting:
        name, sep, value = setting.partition("=")
        if not sep or not name.strip() or not value.strip():
            ap.error(f"--server-setting takes NAME=VALUE, not {setting!r}")
        harness.SERVER_SETTINGS[name.strip()] = value.strip()
    args.modes = pick(args.modes, MODES + EXTRA_MODES, "modes")
    args.targets = pick(args.targets, receive.ALL_TARGETS, "targets")
    args.stores = pick(args.stores, STORES, "stores")
    args.peers = pick(args.peers, PEERS, "peers")
    return args


def header(args: argparse.Namespace, busy: float | None) -> None:
    print()
    print(
        f"hookinbox bench{' (--quick: smoke figures)' if args.quick else ''}: "
        f"modes {','.join(args.modes)}; {args.runs} runs x {args.duration} s per cell, "
        f"medians; wrk -t{args.threads}, 127.0.0.1, {os.cpu_count()} CPUs shared by load, "
        "servers and PostgreSQL"
    )
    print(
        f"worker concurrency: hookinbox {args.hookinbox_concurrency}, procrastinate "
        f"{args.concurrency}; hookinbox --log-level "
        f"{args.hookinbox_log_level}; pgqueuer on_conflict={args.pgqueuer_on_conflict}; "
        f"bodies {f'~{args.body_bytes:,} bytes' if args.body_bytes else '~300 bytes'}"
    )
    if harness.SERVER_SETTINGS:
        shown = ", ".join(f"{k} = {v}" for k, v in harness.SERVER_SETTINGS.items())
        print(f"hookinbox [server]: {shown}")
    if args.pg_cluster == "sized":
        shown = ", ".join(f"{k} {v}" for k, v in args.pg_settings.items())
        print(f"PostgreSQL: a cluster of the bench's own, sized ({shown})")
    if busy is not None:
        warn = " -- WARNING: other load on the machine, figures are low and noisy"
        print(f"CPU already busy before the bench started: {busy:.0%}{warn if busy > 0.15 else ''}")
    print()


def bench_with_workers(
    kind: str, bench: Bench, receive_rate: float | None
) -> tuple[pipeline.PipelineResult | None, latency.LatencyResult | None]:
    """Modes pipeline and latency share one `hookinbox serve` with workers per store."""
    name = f"hookinbox-{kind}"
    modes = bench.args.modes
    pipe = pipeline.PipelineResult(name) if "pipeline" in modes else None
    lat = latency.LatencyResult(name) if "latency" in modes else None
    try:
        server, store = pipeline.start_with_workers(kind, bench)
    except Exception as exc:
        reason = str(exc) if isinstance(exc, Unavailable) else f"{type(exc).__name__}: {exc}"
        log(f"[{name} +workers] unavailable: {reason}")
        for result in (pipe, lat):
            if result is not None:
                result.unavailable = reason
        return pipe, lat
    current: pipeline.PipelineResult | latency.LatencyResult | None = None
    try:
        if pipe is not None:
            current = pipe
            loadgen.run(pipeline.run_pipeline(server, store, bench, pipe))
        if lat is not None:
            current = lat
            loadgen.run(latency.run_latency(server, store, bench, receive_rate, lat))
    except Exception as exc:
        log(f"[{name} +workers] aborted: {exc}\n{server.log_tail()}")
        if current is not None:
            current.notes.append(f"aborted: {type(exc).__name__}: {exc}")
    finally:
        server.stop()
        if note := server.bad_exit():
            for result in (pipe, lat):
                if result is not None:
                    result.notes.append(note)
    return pipe, lat


def main() -> int:
    args = parse_args()
    modes = set(args.modes)
    set_body_bytes(args.body_bytes)
    wrk = ensure_wrk()
    busy = cpu_busy()
    if busy is not None and busy > 0.15:
        log(
            f"warning: CPU {busy:.0%} busy before starting (other processes); figures will be noisy"
        )
    secret = "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()
    ring = "bench:" + base64.b64encode(secrets.token_bytes(32)).decode()
    env = {
        **os.environ,
        "BENCH_SECRET": secret,
        "PYTHONUNBUFFERED": "1",
        "HOOKINBOX_ENCRYPTION_KEYS": ring,
    }
    tmp = Path(tempfile.mkdtemp(prefix="hookinbox-bench-"))
    bench = Bench(args, wrk, tmp, env, Signer.from_secret(secret))
    log(f"bench run {RUN_TAG}: temp dir {tmp}, databases bench_{RUN_TAG}_*")
    started = time.monotonic()
    cluster = contextlib.ExitStack()
    received: dict[str, receive.TargetResult] = {}
    piped: dict[str, pipeline.PipelineResult] = {}
    lat: dict[str, latency.LatencyResult] = {}
    drained: dict[str, drain.DrainResult] = {}
    scaled: dict[str, object] | None = None
    grown: dict[str, growth.GrowthResult] = {}
    probed: list[dedup_probes.ProbeResult] = []
    floor: pgfloor.FloorResult | None = None
    try:
        if args.pg_cluster == "sized":
            extra = dict(each.split("=", 1) for each in args.pg_setting)
            sized = pg_cluster.SizedCluster({k.strip(): v.strip() for k, v in extra.items()})
            harness.PG_BASE = cluster.enter_context(sized)
            args.pg_settings = sized.settings
        targets = list(args.targets) if "receive" in modes else []
        if "peers" in modes:
            targets += [p for p in args.peers if p not in targets]
        if targets:
            received = receive.bench_targets(targets, bench)
        if "receive" in modes and any(t.startswith("hookinbox-pg") for t in args.targets):
            log("[pgfloor] PostgreSQL's floor and cost ladder (pgbench, scratch database)")
            floor = pgfloor.run(bench)
        receive_rates = {
            t: rate for t in received if (rate := receive.best_unique_rate(received, t)) is not None
        }
        if modes & {"pipeline", "latency"}:
            for kind in args.stores:
                p, lt = bench_with_workers(kind, bench, receive_rates.get(f"hookinbox-{kind}"))
                if p is not None:
                    piped[p.target] = p
                if lt is not None:
                    lat[lt.target] = lt
        drain_targets = (
            [
                f"hookinbox-{k}{suffix}"
                for k in args.stores
                for suffix in ("", SEALED_SUFFIX, drain.ORDERED)
            ]
            if "drain" in modes
            else []
        )
        if "peers" in modes:
            drain_targets += args.peers
        if drain_targets:
            drained = loadgen.run(drain.bench_drains(drain_targets, bench))
        if "peers" in modes and "celery" in args.peers:
            probed = dedup_probes.run_probes(bench)
        if "growth" in modes:
            for kind in args.stores:
                rows = args.growth_rows
                if kind == "sqlite" and args.growth_sqlite_rows is not None:
                    rows = args.growth_sqlite_rows
                log(f"[growth-{kind}] {rows:,} old deliveries, {args.growth_bodies:,} bodies")
                grown[f"hookinbox-{kind}"] = growth.bench_growth(
                    kind, rows, args.growth_bodies, bench
                )
        if "scaleout" in modes:
            log(f"[scale-out] {args.scale_out_deliveries:,} deliveries, 2 receivers, 3 workers")
            scaled = scale_out.run_scale_out(args.scale_out_deliveries)
    finally:
        pg_drop_all()
        cluster.close()
        drop_celery()
        shutil.rmtree(tmp, ignore_errors=True)

    header(args, busy)
    if received:
        receive.report(received, args.connections)
        print()
    if floor is not None:
        pgfloor.report(floor, receive.pg_cpu_per_delivery(received))
        print()
    if piped:
        pipeline.report(piped, receive_rates)
        print()
    if lat:
        latency.report(lat)
        print()
    if drained:
        drain.report(drained)
        print()
    if probed:
        dedup_probes.report(probed)
        print()
    if scaled is not None:
        scale_out.report(scaled)
        print()
    if grown:
        growth.report(grown)
        print()
    print(f"(total {time.monotonic() - started:.0f} s)")
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "run": RUN_TAG,
                    "args": {k: v for k, v in vars(args).items() if k != "json"},
                    "cpu_busy_before": busy,
                    "receive": receive.to_json(received),
                    "pgfloor": pgfloor.to_json(floor) if floor is not None else None,
                    "pipeline": pipeline.to_json(piped),
                    "latency": latency.to_json(lat),
                    "drain": drain.to_json(drained),
                    "dedup_probes": dedup_probes.to_json(probed),
                    "scale_out": scaled,
                    "growth": growth.to_json(grown),
                },
                indent=2,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
