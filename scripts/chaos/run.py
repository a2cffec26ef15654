"""One chaos run from start to clean-up.

Order: own cluster (PostgreSQL) -> config -> ``hookinbox migrate`` -> sink, serve, worker
(each supervised) -> load and faults together -> settle -> drain -> stop everything -> read
the journal and the sink -> report. Whatever happens (an exception, Ctrl-C, SIGTERM,
SIGHUP, the overall time bound), ``main``'s ``finally`` stops our processes by PID, drops
the cluster and removes the work directory.
"""

from __future__ import annotations

import asyncio
import random
import shutil
import signal
import socket
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg

from . import gateway
from .cluster import Cluster
from .faults import FaultOutcome, Targets, run_faults
from .journal import (
    PostgresReader,
    SqliteReader,
    StoreReader,
    queue_counts,
    read_journal,
    wait_for_drain,
)
from .load import Events, Tally, run_load
from .plan import Plan, parse_args
from .processes import Supervised, environment, log_tail, run_once, wait_until_ready
from .report import Drain, build_report, render, write_json
from .signing import Signer
from .sink import read_records

DATABASE = "hookinbox"
#: The folder that holds this package, for the sink's ``python -m chaos.sink``.
SCRIPTS = str(Path(__file__).resolve().parent.parent)


@dataclass
class Resources:
    """Everything the run made, for the clean-up in ``main``."""

    workdir: Path
    cluster: Cluster | None = None
    processes: list[Supervised] = field(default_factory=list)

    def release(self, keep_workdir: bool) -> list[str]:
        problems: list[str] = []
        for process in reversed(self.processes):
            try:
                process.stop(grace=5)
            except Exception as exc:
                problems.append(f"could not stop {process.name} pid {process.pid}: {exc}")
        if self.cluster is not None:
            problem = self.cluster.drop()
            if problem:
                problems.append(problem)
        if keep_workdir:
            print(f"work directory kept: {self.workdir}", file=sys.stderr)
        else:
            shutil.rmtree(self.workdir, ignore_errors=True)
        return problems


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def say(message: str) -> None:
    print(f"[chaos {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


async def create_database(cluster: Cluster) -> None:
    connection = await asyncpg.connect(cluster.url("postgres"), timeout=10)
    try:
        await connection.execute(f'CREATE DATABASE "{DATABASE}"')
    finally:
        await connection.close()


async def run(plan: Plan, resources: Resources) -> int:
    started = time.monotonic()
    rng = random.Random(plan.seed)
    workdir = resources.workdir
    signer = Signer.generate(rng)
    env = environment({gateway.SECRET_ENV: signer.secret})

    reader: StoreReader
    if plan.postgres:
        cluster = Cluster.plan(rng)
        resources.cluster = cluster
        say(f"creating cluster {cluster.label}")
        await cluster.create()
        await cluster.start()
        await create_database(cluster)
        database, target = cluster.url(DATABASE), f"cluster {cluster.label}"
        reader = PostgresReader(database)
    else:
        cluster = None
        path = workdir / "chaos.db"
        database, target = f"sqlite:///{path}", f"file {path}"
        reader = SqliteReader(path)

    serve_port, sink_port = free_port(), free_port()
    config = workdir / "hookinbox.toml"
    gateway.write_config(config, plan, database, serve_port, sink_port)
    await run_once(gateway.migrate_argv(config), env, plan.start_bound)

    sink_out = workdir / "sink.jsonl"
    sink_argv = [
        *(sys.executable, "-m", "chaos.sink", "--port", str(sink_port), "--out", str(sink_out)),
        *("--secret-env", gateway.SECRET_ENV, "--seed", str(plan.seed)),
        *("--error-share", str(plan.sink_error_share)),
        *("--slow-share", str(plan.sink_slow_share)),
        *("--slow-seconds", str(plan.forward_timeout + 0.5)),
    ]
    sink = Supervised("sink", sink_argv, dict(env, PYTHONPATH=SCRIPTS), workdir / "sink.log")
    serve = Supervised("serve", gateway.serve_argv(config), env, workdir / "serve.log")
    worker = Supervised("worker", gateway.worker_argv(config), env, workdir / "worker.log")
    hookinbox = [serve, worker] if plan.separate_worker else [serve]
    resources.processes += [sink, *hookinbox]
    for process in (sink, *hookinbox):
        process.start()
    sink_url, base = f"http://127.0.0.1:{sink_port}", f"http://127.0.0.1:{serve_port}"
    await wait_until_ready(f"{sink_url}/healthz", sink, plan.start_bound)
    await wait_until_ready(f"{base}/readyz", serve, plan.start_bound)
    say(
        f"serve pid {serve.pid} on :{serve_port}, worker pid {worker.pid or '-'}, "
        f"sink pid {sink.pid} "
        f"on :{sink_port}; load for {plan.load_seconds:.0f} s"
    )

    supervisors = [asyncio.create_task(p.supervise()) for p in (sink, *hookinbox)]
    tally, events = Tally(), Events(run_id=f"{plan.seed:x}")
    targets = Targets(
        cluster,
        serve,
        worker if plan.separate_worker else None,
        f"{base}/webhooks/{gateway.SOURCE}",
        sink_url,
    )
    load_start = time.monotonic()
    load_window = (time.time(), time.time() + plan.load_seconds)
    load_end = load_start + plan.load_seconds
    settle_deadline = load_end + plan.settle_seconds
    faults: list[FaultOutcome] = []
    try:
        load = asyncio.create_task(
            run_load(plan, targets.webhook_url, signer, events, tally, load_end, settle_deadline)
        )
        backlog = asyncio.create_task(_queue_at(load_end, reader))
        faults = await run_faults(
            plan, targets, signer, events, tally, load_start, load_end, settle_deadline
        )
        say(f"faults done; load ends, then up to {plan.settle_seconds:.0f} s for retries")
        await load
        queue_at_load_end = await backlog
        say(f"load done: {len(tally.acknowledged)} ids acknowledged; waiting for the drain")
        await wait_until_ready(f"{base}/readyz", serve, plan.start_bound)
        finished, seconds, counts = await wait_for_drain(reader, gateway.SOURCE, plan.drain_seconds)
        drain = Drain(finished, seconds, plan.drain_seconds, dict(counts), queue_at_load_end)
    finally:
        for task in supervisors:
            task.cancel()
        await asyncio.gather(*supervisors, return_exceptions=True)
    for process in hookinbox:
        await process.stop_async()
    await sink.stop_async()
    journal = await read_journal(reader, gateway.SOURCE)
    records = read_records(sink_out)
    logs = {p.name: gateway.log_events(p.log_path) for p in hookinbox}
    failed_shutdowns = [
        f"{name} log: {line} (x{count})"
        for name, (_, others) in logs.items()
        for line, count in others.items()
        if gateway.SHUTDOWN_FAILED in line
    ]

    report = build_report(
        plan,
        target,
        tally,
        journal,
        records,
        faults,
        [*hookinbox, sink],
        drain,
        time.monotonic() - started,
        load_window,
        failed_shutdowns,
    )
    for process in hookinbox:
        json_events, other_lines = logs[process.name]
        if json_events:
            report.notes.append(
                f"{process.name} log, JSON warnings/errors: "
                + ", ".join(f"{k} x{v}" for k, v in json_events.most_common(8))
            )
        if other_lines:
            report.notes.append(
                f"{process.name} log, lines that are not JSON (tracebacks: last line): "
                + "; ".join(f"{k} x{v}" for k, v in other_lines.most_common(16))
            )
    print(render(report), flush=True)
    if plan.json_path:
        write_json(report, Path(plan.json_path))
    return 0 if report.passed else 1


async def _queue_at(moment: float, reader: StoreReader) -> dict[str, int]:
    """Jobs by state at ``moment`` (monotonic): the backlog the load left."""
    await asyncio.sleep(max(0.0, moment - time.monotonic()))
    try:
        return dict(await queue_counts(reader, gateway.SOURCE))
    except Exception as exc:  # a figure, not a reason to fail the run
        say(f"could not read the queue at the end of the load: {exc}")
        return {}


async def run_bounded(plan: Plan, resources: Resources) -> int:
    task = asyncio.current_task()
    loop = asyncio.get_running_loop()
    # SIGINT too: a shell starting us in the background may have set it to "ignore".
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        if task is not None:
            loop.add_signal_handler(signum, task.cancel)
    try:
        return await asyncio.wait_for(run(plan, resources), plan.max_total_seconds)
    except TimeoutError:
        say(f"the run passed its bound of {plan.max_total_seconds:.0f} s; stopping")
        return 3


def main(argv: list[str] | None = None) -> int:
    plan = parse_args(argv)
    resources = Resources(Path(tempfile.mkdtemp(prefix="hookinbox-chaos-")))
    status = 2
    try:
        status = asyncio.run(run_bounded(plan, resources))
    except (KeyboardInterrupt, asyncio.CancelledError):
        say("interrupted; cleaning up")
        status = 130
    except Exception as exc:
        say(f"error: {type(exc).__name__}: {exc}")
        for process in resources.processes:
            say(f"last lines of {process.name}'s log:\n{log_tail(process.log_path)}")
        status = 2
    finally:
        # The clean-up itself is not interrupted: a second Ctrl-C would leave a cluster behind.
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, signal.SIG_IGN)
        for problem in resources.release(plan.keep_workdir):
            say(problem)
            status = status or 2
    return status
