"""What a purged delivery costs PostgreSQL: the journal's cascades per row or per statement,
and the attempts of its day deleted by the cascade or retired whole before it.

    .venv/bin/python bench/purge_cost.py [--compare cascades|attempts] [--rows 600000]
        [--rounds 3]

Not a mode of ``make bench``: the measurements behind migrations 026 and 027
(docs/performance.md, "What a purged delivery costs"). Two databases,
``bench_<tag>_purge_<variant>``, each migrated by ``hookinbox migrate`` and filled with
mode growth's old journal (``journal_fill``: ``--rows`` deliveries over 30 days, the
newest quarter of them with a payload in their day's partition, one job each, one job in
33 with two attempts). Each round, one database then the other (the order alternating),
deletes the oldest journal rows as a purge batch does (its jobs locked in id order, its
effects and superseded effects, then the rows, in one transaction) in batches of 1,000,
10 and 1. The oldest rows have no payload left (a store's payloads retire long before its
keys), so the payload cascade finds nothing, as in a real purge. The figure is that
backend's CPU per deleted delivery (``/proc/PID/schedstat``) and the WAL it wrote, the
medians of the rounds.

- ``--compare cascades`` (026): ``statement`` keeps the cascades as migrated (one
  ``DELETE`` per statement over its transition table); ``row`` gets them back as 012, 019
  and 025 made them (a PL/pgSQL ``DELETE`` per row deleted).
- ``--compare attempts`` (027): ``dropped`` retires the day partitions of attempts the
  batches will reach (``hookinbox_retire_attempt_partition``, timed: the day's retirement)
  before the first batch, so the cascade finds none of their attempts; ``deleted`` has
  attempts as one table and the cascades as before 027 (the partitioned table swapped
  for a plain one before the fill, 026's cascade functions put back), and the cascade
  deletes them.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import os
import secrets
import statistics
import tempfile
import time
from pathlib import Path

import asyncpg
from harness import HookinboxStore, db_name, hookinbox_config, pg_drop, pg_dsn, pg_recreate
from journal_fill import FillPlan, fill

from hookinbox.ids import delivery_id_after
from hookinbox.store.dialect import POSTGRES
from hookinbox.store.statements import load_statements

#: (rows per batch, batches per round)
BATCHES = ((1000, 10), (10, 50), (1, 100))

#: The cascades as migrations 012, 019 and 025 left them: one PL/pgSQL DELETE per row.
ROW_CASCADES = """
CREATE FUNCTION bench_delete_delivery_jobs() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN DELETE FROM jobs WHERE delivery_id = OLD.id COLLATE "default"; RETURN NULL; END; $$;
CREATE FUNCTION bench_delete_delivery_payload() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN DELETE FROM payloads WHERE delivery_id = OLD.id COLLATE "default"; RETURN NULL; END; $$;
CREATE FUNCTION bench_delete_job_attempts() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN DELETE FROM attempts WHERE job_id = OLD.id; RETURN NULL; END; $$;
DROP TRIGGER deliveries_delete_jobs ON deliveries;
DROP TRIGGER deliveries_delete_payload ON deliveries;
DROP TRIGGER jobs_delete_attempts ON jobs;
CREATE TRIGGER deliveries_delete_jobs AFTER DELETE ON deliveries
    FOR EACH ROW EXECUTE FUNCTION bench_delete_delivery_jobs();
CREATE TRIGGER deliveries_delete_payload AFTER DELETE ON deliveries
    FOR EACH ROW EXECUTE FUNCTION bench_delete_delivery_payload();
CREATE TRIGGER jobs_delete_attempts AFTER DELETE ON jobs
    FOR EACH ROW EXECUTE FUNCTION bench_delete_job_attempts();
"""

#: A purge batch's statements after it has read its ids, the store's own
#: (queries/retention.sql, as PostgreSQL runs them): its jobs locked in id order, its
#: effects and superseded effects, then its journal rows.
_RETENTION = load_statements("retention")
BATCH_STATEMENTS = tuple(
    POSTGRES.render(_RETENTION[name])
    for name in ("lock_batch_jobs", "drop_effects", "drop_superseded", "drop_deliveries")
)


#: Attempts as one table with its key, and the cascades as 026 made them, as before
#: migration 027 (made before the fill).
PLAIN_ATTEMPTS = """
CREATE TABLE attempts_plain (LIKE attempts INCLUDING DEFAULTS INCLUDING STORAGE);
ALTER SEQUENCE attempts_id_seq OWNED BY attempts_plain.id;
DROP TABLE attempts;
ALTER TABLE attempts_plain RENAME TO attempts;
ALTER TABLE attempts ADD PRIMARY KEY (id);
CREATE INDEX attempts_job_idx ON attempts (job_id, id);
CREATE OR REPLACE FUNCTION hookinbox_delete_jobs_attempts() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN DELETE FROM attempts WHERE job_id IN (SELECT id FROM gone); RETURN NULL; END; $$;
CREATE OR REPLACE FUNCTION hookinbox_delete_deliveries_payloads() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN DELETE FROM payloads WHERE delivery_id IN (SELECT id COLLATE "default" FROM gone);
RETURN NULL; END; $$;
"""

#: Each comparison's two variants, and the SQL each gets before (or after) its fill.
VARIANTS = {"cascades": ("statement", "row"), "attempts": ("dropped", "deleted")}
BEFORE_FILL = {"deleted": PLAIN_ATTEMPTS}
AFTER_FILL = {"row": ROW_CASCADES}

#: The attempt partitions below the first batches' reach (the oldest days), retired whole.
RETIRE_OLDEST_ATTEMPTS = """
SELECT p.name, r.moved, r.locked_ms
FROM (SELECT name FROM hookinbox_partitions_of('attempts')
      WHERE hi IS NOT NULL AND hi <= $1 ORDER BY hi) p,
     LATERAL hookinbox_retire_attempt_partition(p.name, '10s') r
"""


def _cpu_us(pid: int) -> float:
    return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0]) / 1000.0


async def _delete_batches(dsn: str, size: int, count: int) -> tuple[float, float]:
    """Backend CPU (microseconds) and WAL (bytes) per deleted delivery over ``count``
    batches of ``size``."""
    conn = await asyncpg.connect(dsn)
    try:
        pid = await conn.fetchval("SELECT pg_backend_pid()")
        spent, wal, deleted = 0.0, 0.0, 0
        for _ in range(count):
            rows = await conn.fetch("SELECT id FROM deliveries ORDER BY id LIMIT $1", size)
            ids = [r["id"] for r in rows]
            before = _cpu_us(pid)
            lsn = await conn.fetchval("SELECT pg_current_wal_insert_lsn()")
            params = {"ids": ids, "lo": min(ids), "hi": delivery_id_after(max(ids))}
            async with conn.transaction():
                for statement in BATCH_STATEMENTS:
                    await conn.fetch(statement.text, *[params[n] for n in statement.names])
            spent += _cpu_us(pid) - before
            wal += float(
                await conn.fetchval("SELECT pg_current_wal_insert_lsn() - $1::pg_lsn", lsn)
            )
            deleted += len(ids)
        return spent / max(deleted, 1), wal / max(deleted, 1)
    finally:
        await conn.close()


async def _run_sql(db: str, sql: str) -> None:
    conn = await asyncpg.connect(pg_dsn(db))
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


async def _retire_reached_attempts(db: str, reach: int) -> None:
    """Retire the attempt days holding the oldest ``reach`` deliveries' jobs; print how
    long that took and how long each day held attempts locked."""
    conn = await asyncpg.connect(pg_dsn(db))
    try:
        last = await conn.fetchval(
            "SELECT id FROM deliveries ORDER BY id OFFSET $1 LIMIT 1", reach - 1
        )
        bound = await conn.fetchval(
            "SELECT min(hi) FROM hookinbox_partitions_of('attempts') WHERE hi > $1", last
        )
        started = time.monotonic()
        retired = await conn.fetch(RETIRE_OLDEST_ATTEMPTS, bound)
        took = time.monotonic() - started
        left = await conn.fetchval("SELECT count(*) FROM attempts")
        for row in retired:
            print(
                f"retired {row['name']}: {row['moved']} attempts held,"
                f" locked {row['locked_ms']:.0f} ms"
            )
        print(f"retiring took {took:.2f} s; {left:,} attempts left in the store")
    finally:
        await conn.close()


def _prepare(variant: str, rows: int, tmp: Path) -> str:
    db = db_name(f"purge_{variant}")
    pg_recreate(db)
    store = HookinboxStore("pg", pg_db=db)
    # The config names a source secret; nothing here signs or checks one.
    secret = "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()
    env = dict(os.environ, BENCH_SECRET=secret)
    hookinbox_config(store, tmp, f"purge_{variant}", env, 4)
    if variant in BEFORE_FILL:
        asyncio.run(_run_sql(db, BEFORE_FILL[variant]))
    fill(store, FillPlan.last_thirty_days(rows, rows // 4), f"purge {variant}")
    if variant in AFTER_FILL:
        asyncio.run(_run_sql(db, AFTER_FILL[variant]))
    return db


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=600_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--compare", choices=sorted(VARIANTS), default="cascades")
    args = parser.parse_args()
    variants = VARIANTS[args.compare]
    # Every delivery the warm-up and the rounds delete, oldest first.
    reach = 3 * 1000 + args.rounds * len(variants) * sum(s * c for s, c in BATCHES)
    tmp = Path(tempfile.mkdtemp(prefix="bench_purge_cost_"))
    dbs: dict[str, str] = {}
    figures: dict[tuple[str, int], list[float]] = {}
    wals: dict[tuple[str, int], list[float]] = {}
    try:
        for variant in variants:
            dbs[variant] = _prepare(variant, args.rows, tmp)
        if args.compare == "attempts":
            asyncio.run(_retire_reached_attempts(dbs["dropped"], reach))
        for variant in variants:  # warm: the first batches read cold pages
            asyncio.run(_delete_batches(pg_dsn(dbs[variant]), 1000, 3))
        for rnd in range(args.rounds):
            order = variants if rnd % 2 == 0 else variants[::-1]
            for variant in order:
                for size, count in BATCHES:
                    us, wal = asyncio.run(_delete_batches(pg_dsn(dbs[variant]), size, count))
                    figures.setdefault((variant, size), []).append(us)
                    wals.setdefault((variant, size), []).append(wal)
                    print(
                        f"round {rnd + 1} {variant:<9} batch {size:>5}: {us:6.1f} us/delivery,"
                        f" {wal:7.0f} WAL bytes/delivery"
                    )
    finally:
        for db in dbs.values():
            pg_drop(db)
        for path in tmp.iterdir():
            path.unlink()
        tmp.rmdir()
    print(f"\n{args.compare:<10} " + " ".join(f"{f'batch {s}':>11}" for s, _ in BATCHES))
    for variant in variants:
        cells = [statistics.median(figures[(variant, s)]) for s, _ in BATCHES]
        print(f"{variant:<10} " + " ".join(f"{c:11.1f}" for c in cells))
    print("(median PostgreSQL backend CPU per deleted delivery, microseconds)")
    for variant in variants:
        cells = [statistics.median(wals[(variant, s)]) for s, _ in BATCHES]
        print(f"{variant:<10} " + " ".join(f"{c:11.0f}" for c in cells))
    print("(median WAL bytes per deleted delivery)")


if __name__ == "__main__":
    main()
