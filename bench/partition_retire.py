"""Retiring a day's payload partition under receive load (PostgreSQL), against deleting the
same payloads row by row.

    .venv/bin/python bench/partition_retire.py [--rows 200000] [--seconds 4]

A fresh database; the day three days ago filled by SQL with ``--rows`` deliveries, their
~1 KB payloads and completed jobs (0.1% of them dead-lettered: held, kept in DEFAULT).
A load process (8 concurrent receivers, each reserving one new delivery at a time through
the store's receive statement, as ``serve`` does) runs throughout and records each
reservation's start and duration. The main process then, with the load at its steady
rate: (1) retires the day (``store.partitions.retire``), timing the retiring transaction
alone (DETACH, held rows back into DEFAULT, DROP) and the held-rows read before it;
(2) fills another day the same way and deletes its payloads by the row path (batches of
1,000, the purge's default) under the same load.

Reported: the retiring transaction's time; the reservations in flight while it ran, and
the longest of them against the p50/p99/max of the load before it; the same for the
row-by-row delete (its total time, and reservations while it ran). Wall-clock times: the
machine is shared, so the figures are a run's, read beside the load's own baseline.
Imports hookinbox (this measures a store operation, not the server).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import signal
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg
from harness import db_name, log, pg_drop, pg_dsn, pg_recreate

from hookinbox.ids import job_id, new_delivery_id
from hookinbox.store import NewDelivery, NewJob, open_store_for
from hookinbox.store.retention import PARTITION_SPAN

RECEIVERS = 8
HELD_EVERY = 1000

_FILL = """
WITH r AS (
    SELECT i, 'dlv_' || lpad(to_hex($2::bigint + i * 300), 12, '0') || lpad(to_hex(i), 20, '0')
           AS id, to_timestamp(($2::bigint + i * 300) / 1000.0) AS t
    FROM generate_series(1, $1::bigint) AS i
), d AS (
    INSERT INTO deliveries (id, source, event_id, event_type, body_sha256, first_seen_at,
                            last_seen_at)
    SELECT id, 'bench', 'evt_' || $3::text || '_' || i, 't', md5(id), t, t FROM r
), p AS (
    INSERT INTO payloads (delivery_id, body, headers)
    SELECT id, convert_to(repeat(md5(id), 32), 'UTF8'), '{}' FROM r
)
INSERT INTO jobs (id, delivery_id, source, action, state, attempts, max_attempts,
                  next_attempt_at, created_at, updated_at, completed_at, failed_at)
SELECT id || ':noop', id, 'bench', 'noop',
       CASE WHEN i % $4::int = 0 THEN 'failed' ELSE 'completed' END, 1, 3, t, t, t,
       CASE WHEN i % $4::int = 0 THEN NULL ELSE t END,
       CASE WHEN i % $4::int = 0 THEN t END
FROM r
"""


def _delivery(n: int) -> NewDelivery:
    delivery_id = new_delivery_id()
    body = json.dumps({"id": f"load_{os.getpid()}_{n}", "data": {"x": n}}).encode()
    return NewDelivery(
        id=delivery_id,
        source="load",
        event_id=f"load_{os.getpid()}_{n}",
        event_type="t",
        body_sha256=hashlib.sha256(body).hexdigest(),
        body=body,
        headers={"content-type": "application/json"},
        jobs=(NewJob(job_id(delivery_id, "noop"), "noop"),),
        max_attempts=3,
    )


async def _load(url: str) -> list[tuple[float, float]]:
    """Reserve until SIGTERM; the (start, duration) of every reservation."""
    store = open_store_for(url)
    await store.open(migrate=False)
    samples: list[tuple[float, float]] = []
    counter = iter(range(10**9))
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)

    async def receiver() -> None:
        while not stop.is_set():
            started = time.time()
            (answer,) = await store.journal.reserve_deliveries([_delivery(next(counter))])
            assert answer.outcome == "accepted"
            samples.append((started, time.time() - started))

    await asyncio.gather(*(receiver() for _ in range(RECEIVERS)))
    await store.close()
    return samples


async def _fill(url: str, day: datetime, rows: int, tag: str) -> None:
    conn = await asyncpg.connect(url)
    try:
        await conn.execute("SET session_replication_role = replica")
        await conn.execute(_FILL, rows, int(day.timestamp() * 1000), tag, HELD_EVERY)
        await conn.execute("RESET session_replication_role")
        await conn.execute("VACUUM ANALYZE deliveries, jobs, payloads")
        await conn.execute("CHECKPOINT")
    finally:
        await conn.close()


def _during(samples: list[tuple[float, float]], t0: float, t1: float) -> list[float]:
    """Durations of the reservations in flight at some moment of [t0, t1]."""
    return [d for s, d in samples if s <= t1 and s + d >= t0]


def _summary(label: str, xs: list[float]) -> str:
    if not xs:
        return f"{label}: none"
    q = statistics.quantiles(xs, n=100) if len(xs) > 1 else [xs[0]] * 99
    return (
        f"{label}: n={len(xs)} p50={q[49] * 1000:.1f} ms p99={q[98] * 1000:.1f} ms "
        f"max={max(xs) * 1000:.1f} ms"
    )


async def main(rows: int, seconds: float, out: Path, compare: bool) -> None:
    db = db_name("retire")
    pg_recreate(db)
    url = pg_dsn(db)
    try:
        store = open_store_for(url)
        await store.open()
        today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
        old, older = today - timedelta(days=3), today - timedelta(days=4)
        await store.partitions.create_ahead(6, today=(older - timedelta(days=1)).date())
        t = time.monotonic()
        await _fill(url, old + timedelta(hours=1), rows, "a")
        if compare:
            await _fill(url, older + timedelta(hours=1), rows, "b")
        log(f"filled {rows:,} rows per day in {time.monotonic() - t:.0f} s")

        loader = await asyncio.create_subprocess_exec(
            sys.executable, __file__, "--load", url, str(out)
        )
        try:
            await asyncio.sleep(seconds)  # the load's steady state (a measured baseline)
            base_end = time.time()
            # (1) the retirement, phase by phase: what the purge does, timed.
            from hookinbox.store import partitions as p

            db_ = store._db
            name = "payloads_p" + old.strftime("%Y%m%d")
            retirable = [r for r in await db_.rows(p._RETIRABLE, age=0.0) if r["name"] == name]
            (part,) = retirable
            t0 = time.time()
            held = [r["id"] for r in await db_.rows(p._HELD, lo=part["lo"], hi=part["hi"], age=0.0)]
            found = await db_.value(p._COUNT_ROWS, part=name)
            t1 = time.time()
            result = await db_.row(p._RETIRE, part=name, held=held, wait=p.LOCK_WAIT)
            t2 = time.time()
            assert result is not None and result["moved"] is not None, "lock not had"
            log(f"retired {name}: {found:,} rows, {result['moved']} held")
            locked_ms = float(result["locked_ms"])
            await asyncio.sleep(seconds)
            # (2) the other day's payloads deleted by rows (what the purge did before).
            t3 = time.time()
            deleted = 0
            while compare:
                n = await store.retention.purge_payloads(PARTITION_SPAN / 2, 1000)
                if not n:
                    break
                deleted += n
            t4 = time.time()
            log(f"deleted {deleted:,} payloads by rows")
            await asyncio.sleep(1)
        finally:
            loader.terminate()
            await asyncio.wait_for(loader.wait(), 60)
        samples = json.loads(await asyncio.to_thread(out.read_text))
        base = [d for s, d in samples if s < t0 and s >= base_end - seconds]
        print(f"rows per day: {rows:,}; receivers: {RECEIVERS}")
        print(_summary("load before (baseline)", base))
        print(
            f"held rows read, day counted (before, no lock on writers): {(t1 - t0) * 1000:.0f} ms"
        )
        print(f"retiring transaction (DETACH, held back, DROP, commit): {(t2 - t1) * 1000:.1f} ms")
        print(f"payloads locked against writers in it: {locked_ms:.1f} ms")
        print(_summary("reservations in flight during it", _during(samples, t1, t2)))
        print(f"row-by-row delete of {deleted:,} payloads: {t4 - t3:.1f} s")
        print(_summary("reservations during the delete", _during(samples, t3, t4)))
        await store.close()
    finally:
        pg_drop(db)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--load":
        Path(sys.argv[3]).write_text(json.dumps(asyncio.run(_load(sys.argv[2]))))
        sys.exit(0)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument(
        "--no-delete", action="store_true", help="retire only (no row-by-row comparison)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        asyncio.run(main(args.rows, args.seconds, Path(work) / "samples.json", not args.no_delete))
