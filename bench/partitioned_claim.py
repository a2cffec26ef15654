"""What a jobs table in day partitions would cost the claim and settle (PostgreSQL).

    .venv/bin/python bench/partitioned_claim.py [--rounds 3] [--days 0,8,35]

Not a mode of ``make bench``: a measurement for the design of partitioned jobs
(docs/store.md, "The claim's floor"). Per round and per day count, a fresh database
``bench_<tag>_partclaim`` gets a jobs-shaped table (hookinbox's queue indexes: the
due jobs, the leases, the dead letters), unpartitioned (0) or in N day
partitions by ``RANGE (id)`` plus ``DEFAULT``; every day but the last holds 20,000
completed jobs, the last 40,000 due ones. One connection drains them as a worker does:
claim 32 (``FOR UPDATE SKIP LOCKED``), settle them, each in its own transaction, through
prepared statements, until none is due. The figure is that backend's CPU per job
(``/proc/PID/schedstat``), in five variants: the plan made once (generic) or per run
(custom), and the claim naming a floor (``id >=`` the first id of the oldest day that
holds due jobs, which lets PostgreSQL leave the other days out) or not, as a parameter
or written in as a constant; "const + below" is what hookinbox's worker does (migration
029): the floor and the first day still there as constants, ``id >= floor OR id <
below``, with a dead letter a retired day left in ``DEFAULT`` (which, counted in the
floor, would make every day planned: the "generic" row). ``--variants`` picks some.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics

import asyncpg
from harness import PG_BASE, db_name

PER_DAY = 20_000
DUE = 40_000
BATCH = 32

CLAIM = """
UPDATE jobs j SET state = 'processing', lease_token = $2,
    lease_expires_at = now() + interval '60 s', attempts = j.attempts + 1, worker = 'w'
WHERE j.id = ANY(ARRAY(
    SELECT id FROM jobs WHERE state = 'accepted' AND next_attempt_at <= now() {floor}
    ORDER BY next_attempt_at LIMIT $1 FOR UPDATE SKIP LOCKED)) {floor_j}
RETURNING j.id"""
SETTLE = """
UPDATE jobs SET state = 'completed', lease_token = NULL, lease_expires_at = NULL,
    completed_at = now()
WHERE id = ANY($1::text[]) AND lease_token = $2 {floor}"""
#: variant -> (plan_cache_mode, the floor: None, "param" or "constant")
VARIANTS: dict[str, tuple[str, str | None]] = {
    "generic": ("force_generic_plan", None),
    "custom": ("force_custom_plan", None),
    "generic + floor": ("force_generic_plan", "param"),
    "custom + floor": ("force_custom_plan", "param"),
    "generic + const": ("force_generic_plan", "constant"),
    "const + below": ("force_generic_plan", "below"),
}
#: A job id below every day: a retired day's dead letter kept in DEFAULT.
HELD = "dlv_-001_00000001:noop"


def _day(d: int) -> str:
    return f"dlv_{d:04d}"


async def _fill(dsn: str, days: int, held: bool) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        partitioned = "PARTITION BY RANGE (id)" if days else ""
        await conn.execute(
            f"""
            CREATE TABLE jobs (id text COLLATE "C" PRIMARY KEY, delivery_id text NOT NULL,
                state text NOT NULL, next_attempt_at timestamptz NOT NULL DEFAULT now(),
                lease_token text, lease_expires_at timestamptz,
                attempts int NOT NULL DEFAULT 0, worker text, completed_at timestamptz
            ) {partitioned};
            CREATE INDEX jobs_due_idx ON jobs (next_attempt_at) WHERE state = 'accepted';
            CREATE INDEX jobs_lease_idx ON jobs (lease_expires_at) WHERE state = 'processing';
            CREATE INDEX jobs_failed_idx ON jobs (completed_at) WHERE state = 'failed';
            """
        )
        for d in range(days):
            await conn.execute(
                f"CREATE TABLE jobs_p{d} PARTITION OF jobs "
                f"FOR VALUES FROM ('{_day(d)}') TO ('{_day(d + 1)}')"
            )
        if days:
            await conn.execute("CREATE TABLE jobs_default PARTITION OF jobs DEFAULT")
        if held:
            await conn.execute(
                "INSERT INTO jobs (id, delivery_id, state) VALUES ($1, $2, 'failed')",
                HELD,
                HELD.split(":")[0],
            )
        last = max(days, 1) - 1
        for d in range(last + 1):
            state, rows = ("accepted", DUE) if d == last else ("completed", PER_DAY)
            await conn.execute(
                f"""INSERT INTO jobs (id, delivery_id, state)
                SELECT '{_day(d)}_' || lpad(g::text, 8, '0') || ':noop',
                       '{_day(d)}_' || lpad(g::text, 8, '0'), '{state}'
                FROM generate_series(1, {rows}) g"""
            )
        await conn.execute("VACUUM ANALYZE jobs")
        await conn.execute("CHECKPOINT")
    finally:
        await conn.close()


def _cpu_ns(pid: int) -> int:
    with open(f"/proc/{pid}/schedstat") as f:
        return int(f.read().split()[0])


async def _drain(dsn: str, plan_mode: str, floor: str | None, kind: str | None) -> float:
    """The backend's CPU per job, in microseconds, draining every due job."""
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(f"SET plan_cache_mode = {plan_mode}")
        pid = await conn.fetchval("SELECT pg_backend_pid()")
        bound = {None: "", "param": "$3", "constant": f"'{floor}'", "below": f"'{floor}'"}[kind]

        def floor_of(col: str) -> str:
            if kind is None:
                return ""
            below = f" OR {col} < '{_day(0)}'" if kind == "below" else ""
            return f"AND ({col} >= {bound}{below})"

        sql = CLAIM.format(floor=floor_of("id"), floor_j=floor_of("j.id"))
        # The settle names the floor as the claim does (the worker's settle names its
        # batch's smallest day).
        settle_sql = SETTLE.format(floor=floor_of("id"))
        claim, settle = await conn.prepare(sql), await conn.prepare(settle_sql)
        args: tuple[object, ...] = (BATCH, "tok", floor) if kind == "param" else (BATCH, "tok")
        settle_args: tuple[object, ...] = ("tok", floor) if kind == "param" else ("tok",)
        done, start = 0, _cpu_ns(pid)
        while True:
            async with conn.transaction():
                ids = [r[0] for r in await claim.fetch(*args)]
            if not ids:
                break
            async with conn.transaction():
                await settle.fetch(ids, *settle_args)
            done += len(ids)
        return (_cpu_ns(pid) - start) / 1000 / done
    finally:
        await conn.close()


async def _recreate(db: str, drop_only: bool = False) -> None:
    admin = await asyncpg.connect(f"{PG_BASE}/postgres")
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{db}"')
        if not drop_only:
            await admin.execute(f'CREATE DATABASE "{db}"')
    finally:
        await admin.close()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--days", default="0,8,35", help="day partitions (0: unpartitioned)")
    parser.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated")
    args = parser.parse_args()
    counts = [int(x) for x in args.days.split(",")]
    variants = {name: VARIANTS[name] for name in args.variants.split(",")}
    db = db_name("partclaim")
    dsn = f"{PG_BASE}/{db}"
    figures: dict[tuple[str, int], list[float]] = {}
    try:
        for rnd in range(args.rounds):
            for variant, (plan_mode, kind) in variants.items():
                for days in counts:
                    await _recreate(db)
                    await _fill(dsn, days, held=kind == "below")
                    floor = _day(max(days, 1) - 1) if kind else None
                    us = await _drain(dsn, plan_mode, floor, kind)
                    figures.setdefault((variant, days), []).append(us)
                    print(f"round {rnd + 1} {variant:<16} days {days:>3}: {us:6.1f} us/job")
    finally:
        await _recreate(db, drop_only=True)
    print(f"\n{'variant':<16} " + " ".join(f"{f'{d} days':>9}" for d in counts))
    for variant in variants:
        cells = [statistics.median(figures.get((variant, d), [float("nan")])) for d in counts]
        print(f"{variant:<16} " + " ".join(f"{c:9.1f}" for c in cells))
    print("(median backend CPU per job, microseconds)")


if __name__ == "__main__":
    asyncio.run(main())
