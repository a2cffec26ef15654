"""The cost of a ``[destinations.NAME]`` gate per forward: one admit and one release
(the shared token bucket, slot and circuit in the store), on SQLite and PostgreSQL.

Measured without HTTP, so the figure is what a destination adds to each forward: N
forwards by ``--tasks`` concurrent tasks of one process (all passing the gate: a rate and
an in-flight limit high enough never to hold), wall time and time per forward, and the
same for a gate that holds (``max_in_flight = 1`` with every task trying at once).

Run: .venv/bin/python bench/destination_gate.py [--n 2000] [--tasks 8]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time

import asyncpg

from hookinbox.store import DestinationLimits, Store, open_store_for

#: The tests' PostgreSQL; the bench works in a schema of its own, dropped at the end.
PG_URL = os.environ.get("HOOKINBOX_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")
SCHEMA = "hb_bench_destinations"

PASSING = DestinationLimits(
    rate_per_second=1e5,
    burst=1e5,
    max_in_flight=10_000,
    circuit_failures=5,
    circuit_cooldown=30.0,
    slot_seconds=30.0,
)
CONTENDED = DestinationLimits(
    rate_per_second=None,
    burst=1.0,
    max_in_flight=1,
    circuit_failures=5,
    circuit_cooldown=30.0,
    slot_seconds=30.0,
)


async def _run(store: Store, n: int, tasks: int, limits: DestinationLimits) -> tuple[float, int]:
    held = 0
    queue = list(range(n))

    async def forwarder(worker: int) -> None:
        nonlocal held
        while queue:
            job = f"bench-{worker}-{queue.pop()}"
            answer = await store.destinations.admit("bench", job, "lease", limits)
            if not answer.admitted:
                held += 1
                continue
            await store.destinations.release("bench", job, "lease", healthy=True, opens_after=5)

    started = time.perf_counter()
    await asyncio.gather(*(forwarder(w) for w in range(tasks)))
    return time.perf_counter() - started, held


async def _pg(sql: str) -> None:
    connection = await asyncpg.connect(PG_URL)
    try:
        await connection.execute(sql)
    finally:
        await connection.close()


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--tasks", type=int, default=8)
    args = parser.parse_args()
    await _pg(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE; CREATE SCHEMA {SCHEMA}")
    with tempfile.TemporaryDirectory() as folder:
        for url in (f"sqlite:///{folder}/bench.db", f"{PG_URL}?search_path={SCHEMA}"):
            store = open_store_for(url)
            await store.open()
            try:
                await store.destinations.admit("bench", "warm-up", "lease", PASSING)
                await store.destinations.release(
                    "bench", "warm-up", "lease", healthy=True, opens_after=5
                )
                started = time.perf_counter()
                for _ in range(args.n):  # the smallest transaction here: the unit to compare
                    await store.destinations.release(
                        "bench", "none", "lease", healthy=None, opens_after=5
                    )
                one = (time.perf_counter() - started) * 1e6 / args.n
                print(f"{url.split(':')[0]:<10} baseline  an empty release: {one:7.0f} µs")
                for name, limits in (("passing", PASSING), ("contended", CONTENDED)):
                    wall, held = await _run(store, args.n, args.tasks, limits)
                    print(
                        f"{url.split(':')[0]:<10} {name:<9} {args.n} forwards, {args.tasks} tasks:"
                        f" {wall * 1e6 / args.n:7.0f} µs per forward (admit + release),"
                        f" {held} held"
                    )
            finally:
                await store.close()
    await _pg(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")


if __name__ == "__main__":
    asyncio.run(main())
