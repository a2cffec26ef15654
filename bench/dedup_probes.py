"""The dedup probes of mode ``peers``: what hookinbox and the Celery stack do with the two
repeats a provider really sends. Correctness, not speed.

- **concurrent duplicates**: 32 connections send the same new event at once. Each
  receiver must answer ``accepted`` once and make one job.
- **late redelivery**: one event is accepted and its job runs to the end; after the
  Celery stack's dedup TTL has passed, the provider sends it again. hookinbox's journal
  keeps the key for the whole retention: a ``duplicate``. The Celery stack's Redis key has
  expired: a second job. The probe gives the Celery receiver a TTL of ``PROBE_TTL_S``
  seconds (in production teams keep about a day; a provider retrying for three days, as
  Stripe does, outlives it the same way).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

import celery_stack
import loadgen
from harness import (
    HOST,
    Bench,
    Proc,
    free_port,
    fresh_hookinbox_store,
    hookinbox_config,
    hookinbox_serve_cmd,
    log,
    signed_requests,
    unique_ids,
)
from peer_targets import fresh_peer_db, peer_env, peer_receiver, peer_worker
from tables import Probe

PROBE_TTL_S = 2
CONCURRENT = 32
WAIT_S = 30.0


@dataclass
class ProbeResult:
    target: str
    concurrent_accepted: int = 0
    #: The other answers to the concurrent copies: duplicates, and anything not a 200
    #: ("503 x31"), so a refused copy shows instead of hiding in a low accepted count.
    concurrent_others: str = ""
    concurrent_jobs: int = 0
    late_answer: str = ""
    late_jobs: int = 0
    notes: list[str] = field(default_factory=list)


async def _answer(port: int, bench: Bench, event_id: str, copies: int) -> loadgen.LoadResult:
    requests = signed_requests(port, bench.signer, [event_id] * copies)
    return await loadgen.send_each(HOST, port, requests, copies, 30)


def _word(r: loadgen.LoadResult) -> str:
    if r.accepted:
        return "accepted (a new job)"
    return "duplicate" if r.duplicate else f"other {dict(r.non200)}"


def _others(r: loadgen.LoadResult) -> str:
    """The answers besides ``accepted``: ``duplicate x31``, ``503 x2``, ``socket error x1``."""
    parts = [f"duplicate x{r.duplicate}"] if r.duplicate else []
    parts += [f"other 200 x{r.ok_other}"] if r.ok_other else []
    parts += [f"{status} x{n}" for status, n in sorted(r.non200.items())]
    parts += [f"socket error x{r.socket_errors}"] if r.socket_errors else []
    return ", ".join(parts) or "none"


async def _until(count: object, want: int) -> int:
    """Poll ``count()`` until it reaches ``want`` or WAIT_S passes; the last value."""
    deadline = time.monotonic() + WAIT_S
    while True:
        got = await count()  # type: ignore[operator]
        if got >= want or time.monotonic() > deadline:
            return int(got)
        await asyncio.sleep(0.05)


async def probe_hookinbox(bench: Bench) -> ProbeResult:
    result = ProbeResult("hookinbox-pg")
    store = fresh_hookinbox_store("pg", "probe_pg", bench.tmp)
    config = hookinbox_config(
        store, bench.tmp, "probe", bench.env, bench.args.hookinbox_concurrency
    )
    port = free_port()
    server = Proc(
        "hookinbox-pg",
        hookinbox_serve_cmd(config, port, workers=True, log_level="warning"),
        bench.env,
        bench.tmp / "probe-hookinbox.log",
    )
    server.start()
    probe = await Probe.open(store)

    async def done() -> int:
        return int(await probe.scalar("SELECT count(*) FROM jobs WHERE state = 'completed'"))

    try:
        same = unique_ids(1)[0]
        r = await _answer(port, bench, same, CONCURRENT)
        result.concurrent_accepted = r.accepted
        result.concurrent_others = _others(r)
        result.concurrent_jobs = await _until(done, 1)
        late = unique_ids(1)[0]
        await _answer(port, bench, late, 1)
        await _until(done, 2)
        await asyncio.sleep(PROBE_TTL_S + 1)  # as long as the Celery stack's probe waits
        r = await _answer(port, bench, late, 1)
        result.late_answer = _word(r)
        result.late_jobs = int(
            await probe.scalar(
                "SELECT count(*) FROM jobs j JOIN deliveries d ON d.id = j.delivery_id"
                " WHERE d.event_id = $1",
                late,
            )
        )
    finally:
        await probe.close()
        server.stop()
    return result


async def probe_celery(bench: Bench) -> ProbeResult:
    result = ProbeResult("celery")
    env = peer_env("celery", bench.env, "skip", dedup_ttl_s=PROBE_TTL_S)
    fresh_peer_db("celery", env)
    port = free_port()
    receiver = peer_receiver("celery", port, env, bench.tmp / "probe-celery.log")
    worker = peer_worker("celery", 1, env, bench.tmp / "probe-celery-worker.log")
    receiver.start()
    worker.spawn()

    async def done() -> int:
        return celery_stack.tasks_done() or 0

    try:
        same = unique_ids(1)[0]
        r = await _answer(port, bench, same, CONCURRENT)
        result.concurrent_accepted = r.accepted
        result.concurrent_others = _others(r)
        result.concurrent_jobs = await _until(done, 1)
        late = unique_ids(1)[0]
        await _answer(port, bench, late, 1)
        await _until(done, 2)
        await asyncio.sleep(PROBE_TTL_S + 1)  # past the key's TTL
        r = await _answer(port, bench, late, 1)
        result.late_answer = _word(r)
        result.late_jobs = await _until(done, 3) - 1
    finally:
        receiver.stop()
        worker.stop()
    return result


def run_probes(bench: Bench) -> list[ProbeResult]:
    results = []
    for name, probe in (("hookinbox-pg", probe_hookinbox), ("celery", probe_celery)):
        try:
            results.append(loadgen.run(probe(bench)))
        except Exception as exc:
            failed = ProbeResult(name)
            failed.notes.append(f"aborted: {type(exc).__name__}: {exc}")
            log(f"[{name}] dedup probe aborted: {exc}")
            results.append(failed)
    return results


def report(results: list[ProbeResult]) -> None:
    print("== dedup probes: the repeats a provider sends (correctness, not speed)")
    print(f"   concurrent: {CONCURRENT} connections send one new event at once")
    print(
        f"   late: an event's job finished, then {PROBE_TTL_S + 1} s later (past the Celery "
        f"stack's {PROBE_TTL_S} s probe TTL; a day in production) the same event again"
    )
    print()
    hdr = (
        f"{'target':<14} {'concurrent: accepted':>21} {'others':<18} {'jobs':>5}   "
        f"{'late: answer':<22} jobs"
    )
    print(hdr)
    print("-" * len(hdr))
    for r in results:
        print(
            f"{r.target:<14} {r.concurrent_accepted:>21} {r.concurrent_others:<18} "
            f"{r.concurrent_jobs:>5}   {r.late_answer:<22} {r.late_jobs}"
        )
        for note in r.notes:
            print(f"{'':<14} note: {note}")


def to_json(results: list[ProbeResult]) -> list[dict[str, object]]:
    return [r.__dict__ for r in results]
