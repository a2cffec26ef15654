"""Part of mode ``receive``: PostgreSQL's floor for a delivery and the cost ladder to it.

The floor is what PostgreSQL spends to insert one journal-shaped row when nothing else is
asked of it: ``pgbench`` (from the PostgreSQL install) inserting 50 rows per transaction,
one ``INSERT ... SELECT`` each, into a table shaped like ``deliveries`` with no index,
constraint or trigger. The ladder then writes what the receive path writes for a
delivery (a ``deliveries``, a ``payloads`` and a ``jobs`` row, in one statement of
data-modifying CTEs as ``store/postgres/hot_path.sql``'s reserve does) into the real
hookinbox tables of a scratch database migrated by ``hookinbox migrate``, stripped of
their indexes, constraints and triggers, and puts those back one at a time: each step's
CPU per delivery less the previous step's is what that index, constraint or trigger costs.
The last steps add the reserve's own shape (``ON CONFLICT DO NOTHING``, the duplicate
``UPDATE`` probe, ``pg_notify``).

CPU is that of the scratch database's backends (harness.DbBackendCpu), read from /proc
as the receive targets' is: other databases on the server (another bench) are not
counted, and neither are the WAL writer and the checkpointer. Autovacuum is off on the
scratch tables, so every step pays for its inserts only. Each step starts from empty
tables; the median of the repeats is quoted.
"""

from __future__ import annotations

import glob
import shutil
import statistics
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg
from harness import (
    Bench,
    DbBackendCpu,
    HookinboxStore,
    Unavailable,
    db_name,
    hookinbox_config,
    log,
    pg_drop,
    pg_dsn,
    pg_recreate,
)

ROWS_PER_TXN = 50
#: The whole statement again with fewer deliveries per statement and commit: what a
#: receiver's batch size does to PostgreSQL's CPU per delivery (hookinbox's batches at 32
#: connections hold about 10 here).
SMALL_BATCHES = (10,)
CLIENTS = 2
#: The tables a delivery writes, in the order the receive path writes them.
TABLES = ("deliveries", "payloads", "jobs")
#: (full run, --quick): transactions per client per step, repeats per step.
SIZES = {False: (400, 3), True: (150, 1)}

# A transaction's ids: one clock read and one random number per transaction, then the
# row number: time-ordered like hookinbox's delivery ids (hookinbox.ids), never reused.
_KEY = (
    "k AS (SELECT lpad(to_hex((extract(epoch FROM clock_timestamp()) * 1e6)::bigint), 14, '0')"
    " || lpad(to_hex(CAST(:r AS bigint)), 8, '0') AS p)"
)
_SHA = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"


def _rows(n: int) -> str:
    return (
        f"SELECT 'dlv_' || k.p || lpad(to_hex(g), 4, '0') AS id, 'bench' AS source,"
        f" 'msg_' || k.p || lpad(to_hex(g), 4, '0') AS event_id, 'invoice.paid' AS event_type,"
        f" '{_SHA}' AS body_sha256, 1 AS seen, NULL::text AS subject_hash"
        f" FROM k, generate_series(1, {n}) AS g"
    )


# A body and headers of the bench's size (harness.make_body: ~300 bytes; a few headers).
_BODY = 'convert_to(repeat(\'{"type":"invoice.paid","data":{}}\', 9), \'UTF8\')'
_HEADERS = (
    '\'{"content-type":"application/json","user-agent":"hookinbox-bench",'
    '"webhook-timestamp":"1733100000","webhook-id":"msg_0"}\''
)
_DELIVERY_COLS = "id, source, event_id, event_type, body_sha256, delivery_count, subject_hash"

FLOOR_SCRIPT = f"""\\set r random(1, 2000000000)
WITH {_KEY}
INSERT INTO floor_rows ({_DELIVERY_COLS})
SELECT id, source, event_id, event_type, body_sha256, seen, subject_hash
FROM ({_rows(ROWS_PER_TXN)}) AS input;
"""


def ladder_script(
    tables: int, *, on_conflict: bool, dup_probe: bool, notify: bool, rows: int = ROWS_PER_TXN
) -> str:
    """The receive path's statement for ``tables`` of TABLES, in the reserve's shape,
    ``rows`` deliveries per statement (and transaction)."""
    conflict = " ON CONFLICT (source, event_id) DO NOTHING" if on_conflict else ""
    ctes = [
        _KEY,
        f"input AS ({_rows(rows)})",
        f"ins AS (INSERT INTO deliveries ({_DELIVERY_COLS})"
        f" SELECT id, source, event_id, event_type, body_sha256, seen, subject_hash FROM input"
        f"{conflict} RETURNING id)",
    ]
    if tables >= 2:
        ctes.append(
            f"pay AS (INSERT INTO payloads (delivery_id, body, headers)"
            f" SELECT i.id, {_BODY}, {_HEADERS} FROM input i JOIN ins ON ins.id = i.id)"
        )
    if tables >= 3:
        ctes.append(
            "new_jobs AS (INSERT INTO jobs (id, delivery_id, source, action, max_attempts,"
            " order_key, order_hold) SELECT i.id || ':' || 'noop', i.id, i.source, 'noop',"
            " 25, NULL, false FROM input i JOIN ins ON ins.id = i.id)"
        )
    tail = ["SELECT count(*) FROM ins"]
    if dup_probe:
        ctes.append(
            "dup AS (UPDATE deliveries d SET last_seen_at = now(),"
            " delivery_count = d.delivery_count + i.seen FROM input i"
            " WHERE d.source = i.source AND d.event_id = i.event_id"
            " AND NOT EXISTS (SELECT 1 FROM ins WHERE ins.id = i.id) RETURNING d.id)"
        )
        tail.append("SELECT count(*) FROM dup")
    if notify:
        ctes.append(
            "notify AS (SELECT pg_notify('hookinbox_floor', '')"
            " FROM (SELECT 1 FROM ins LIMIT 1) AS any_new)"
        )
        tail.append("SELECT count(*) FROM notify")
    body = ",\n".join(ctes)
    return f"\\set r random(1, 2000000000)\nWITH {body}\n" + "\nUNION ALL\n".join(tail) + ";\n"


@dataclass
class Step:
    label: str
    #: Median CPU of the scratch database's backends per delivery (µs); None if it failed.
    us: float | None
    runs: list[float] = field(default_factory=list)


@dataclass
class FloorResult:
    steps: list[Step] = field(default_factory=list)
    unavailable: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def floor_us(self) -> float | None:
        return self.steps[0].us if self.steps else None


def find_pgbench() -> str:
    found = shutil.which("pgbench")
    if found:
        return found
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/pgbench"))
    if not candidates:
        raise Unavailable("pgbench not found (PATH, /usr/lib/postgresql/*/bin)")
    return candidates[-1]


@dataclass
class _Object:
    """An index, constraint or trigger of the scratch tables: how to put it back."""

    label: str
    create: str
    #: The index's name when it is a bare index (not behind a constraint).
    index: str | None = None


async def _strip(db: str) -> list[_Object]:
    """Drop the indexes, constraints and triggers of TABLES; return them in the order the
    ladder puts them back: each table's key first (the unique key the reserve's ON
    CONFLICT names among them), then its other indexes, checks, foreign keys, triggers."""
    conn = await asyncpg.connect(pg_dsn(db))
    try:
        objects: list[_Object] = []
        drops: list[str] = []
        for table in TABLES:
            cons = await conn.fetch(
                "SELECT conname, contype::text AS contype, pg_get_constraintdef(oid) AS def"
                " FROM pg_constraint WHERE conrelid = $1::regclass"
                " ORDER BY contype <> 'p', contype <> 'u', conname",
                table,
            )
            idx = await conn.fetch(
                "SELECT c.relname, pg_get_indexdef(i.indexrelid) AS def FROM pg_index i"
                " JOIN pg_class c ON c.oid = i.indexrelid WHERE i.indrelid = $1::regclass"
                " AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = i.indexrelid"
                " AND k.conrelid = i.indrelid) ORDER BY c.relname",
                table,
            )
            trg = await conn.fetch(
                "SELECT tgname, pg_get_triggerdef(oid) AS def FROM pg_trigger"
                " WHERE tgrelid = $1::regclass AND NOT tgisinternal ORDER BY tgname",
                table,
            )
            keys = [c for c in cons if c["contype"] in ("p", "u")]
            checks = [c for c in cons if c["contype"] == "c"]
            fks = [c for c in cons if c["contype"] == "f"]
            for c in keys:
                objects.append(
                    _Object(
                        f"{table}: {c['conname']} ({'key' if c['contype'] == 'p' else 'unique'})",
                        f'ALTER TABLE {table} ADD CONSTRAINT "{c["conname"]}" {c["def"]}',
                    )
                )
            for i in idx:
                objects.append(_Object(f"{table}: {i['relname']}", i["def"], i["relname"]))
            for c in checks:
                objects.append(
                    _Object(
                        f"{table}: {c['conname']} (check)",
                        f'ALTER TABLE {table} ADD CONSTRAINT "{c["conname"]}" {c["def"]}',
                    )
                )
            for c in fks:
                objects.append(
                    _Object(
                        f"{table}: {c['conname']} (foreign key check per row)",
                        f'ALTER TABLE {table} ADD CONSTRAINT "{c["conname"]}" {c["def"]}',
                    )
                )
            for t in trg:
                objects.append(_Object(f"{table}: trigger {t['tgname']}", t["def"]))
            drops += [f'DROP TRIGGER "{t["tgname"]}" ON {table}' for t in trg]
            drops += [f'ALTER TABLE {table} DROP CONSTRAINT "{c["conname"]}"' for c in fks]
        for table in TABLES:
            cons = await conn.fetch(
                "SELECT conname FROM pg_constraint WHERE conrelid = $1::regclass"
                " AND contype IN ('p', 'u', 'c')",
                table,
            )
            drops += [f'ALTER TABLE {table} DROP CONSTRAINT "{c["conname"]}" CASCADE' for c in cons]
        drops += [f'DROP INDEX "{o.index}"' for o in objects if o.index is not None]
        for stmt in drops:
            await conn.execute(stmt)
        for table in (*TABLES, "floor_rows"):
            # A partitioned table (payloads) takes storage settings on its partitions only.
            leaves = await conn.fetch(
                "SELECT relid::regclass::text AS name FROM pg_partition_tree($1::regclass)"
                " WHERE isleaf",
                table,
            )
            for name in [leaf["name"] for leaf in leaves] or [table]:
                await conn.execute(f"ALTER TABLE {name} SET (autovacuum_enabled = false)")
        return objects
    finally:
        await conn.close()


async def _sql(db: str, *statements: str) -> None:
    conn = await asyncpg.connect(pg_dsn(db))
    try:
        for stmt in statements:
            await conn.execute(stmt)
    finally:
        await conn.close()


def _measure(pgbench: str, db: str, script: Path, txns: int, rows: int = ROWS_PER_TXN) -> float:
    """One pgbench run from empty tables: the backends' CPU per delivery (µs). Prepared
    statements (``-M prepared``), as hookinbox runs its own: planning is not in the
    figure."""
    import asyncio

    asyncio.run(_sql(db, "TRUNCATE floor_rows, deliveries, payloads, jobs CASCADE"))
    cpu = DbBackendCpu(db)
    cpu.start()
    cmd = [pgbench, "-n", "-M", "prepared", "-f", str(script)]
    cmd += ["-c", str(CLIENTS), "-j", str(CLIENTS)]
    proc = subprocess.run(
        [*cmd, "-t", str(txns), pg_dsn(db)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    seconds = cpu.stop()
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise RuntimeError("pgbench failed: " + " | ".join(tail))
    return seconds / (CLIENTS * txns * rows) * 1e6


def _pass(pgbench: str, db: str, tmp: Path, txns: int) -> list[tuple[str, float | str]]:
    """One climb of the ladder from the stripped tables: (step, µs per delivery or the
    error)."""
    import asyncio

    objects = asyncio.run(_strip(db))
    out: list[tuple[str, float | str]] = []

    def step(label: str, script_text: str, *setup: str, rows: int = ROWS_PER_TXN) -> None:
        path = tmp / f"pgfloor-{len(out)}.sql"
        path.write_text(script_text)
        try:
            if setup:
                asyncio.run(_sql(db, *setup))
            runs = txns * ROWS_PER_TXN // rows
            out.append((label, _measure(pgbench, db, path, runs, rows)))
        except Exception as exc:
            out.append((label, f"{type(exc).__name__}: {exc}"))

    step(f"floor: {ROWS_PER_TXN} journal-shaped rows per INSERT, no index", FLOOR_SCRIPT)
    shape = {"on_conflict": False, "dup_probe": False, "notify": False}
    step("deliveries row (CTE ... RETURNING, as the reserve)", ladder_script(1, **shape))
    step("+ payloads row (body, headers)", ladder_script(2, **shape))
    step("+ jobs row", ladder_script(3, **shape))
    full = ladder_script(3, **shape)
    for obj in objects:
        step(f"+ {obj.label}", full, obj.create)
        if obj.label.startswith("deliveries: ") and "(unique)" in obj.label:
            shape["on_conflict"] = True
            full = ladder_script(3, **shape)
            step("+ ON CONFLICT (source, event_id) DO NOTHING", full)
    shape["dup_probe"] = True
    step("+ the reserve's duplicate UPDATE probe", ladder_script(3, **shape))
    shape["notify"] = True
    step("+ pg_notify (the reserve's wake-up)", ladder_script(3, **shape))
    for rows in SMALL_BATCHES:
        step(
            f"the same, {rows} deliveries per statement and commit",
            ladder_script(3, **shape, rows=rows),
            rows=rows,
        )
    return out


def run(bench: Bench) -> FloorResult:
    """The floor and the ladder, in a scratch database created and dropped here: the
    whole ladder climbed ``repeats`` times (a slow moment of the machine lands on one
    pass's steps, not on all repeats of one step), the median per step quoted."""
    import asyncio

    result = FloorResult()
    txns, repeats = SIZES[bool(bench.args.quick)]
    db = db_name("pgfloor")
    try:
        pgbench = find_pgbench()
        pg_recreate(db)
        store = HookinboxStore("pg", pg_db=db)
        hookinbox_config(store, bench.tmp, "pgfloor", bench.env, 1)
        asyncio.run(_sql(db, "CREATE TABLE floor_rows (LIKE deliveries INCLUDING DEFAULTS)"))
        passes = []
        for n in range(repeats):
            passes.append(_pass(pgbench, db, bench.tmp, txns))
            floor = passes[-1][0][1]
            log(f"[pgfloor] pass {n + 1}/{repeats}: floor {floor} us/delivery")
    except Unavailable as exc:
        result.unavailable = str(exc)
        return result
    except Exception as exc:
        result.unavailable = f"{type(exc).__name__}: {exc}"
        return result
    finally:
        pg_drop(db)
    for i, (label, _) in enumerate(passes[0]):
        values = [p[i][1] for p in passes if i < len(p)]
        runs = [v for v in values if isinstance(v, float)]
        errors = [v for v in values if isinstance(v, str)]
        if errors:
            result.notes.append(f"{label}: {errors[0]}")
        result.steps.append(Step(label, statistics.median(runs) if runs else None, runs))
    return result


def report(result: FloorResult, measured: dict[str, float]) -> None:
    """The ladder, then each ``measured`` PostgreSQL CPU per delivery against the floor."""
    print(
        f"== PostgreSQL CPU per delivery: the floor and the cost ladder (pgbench, {CLIENTS} "
        f"clients, {ROWS_PER_TXN} deliveries per transaction; CPU of the scratch database's "
        "backends)"
    )
    if result.unavailable is not None:
        print(f"   unavailable: {result.unavailable}")
        return
    floor = result.floor_us
    hdr = f"{'step':<62} {'us/dlv':>7} {'+us':>6} {'x floor':>8}"
    print(hdr)
    print("-" * len(hdr))
    prev: float | None = None
    for s in result.steps:
        if s.us is None:
            print(f"{s.label:<62} {'failed':>7}")
            continue
        delta = f"{s.us - prev:+6.1f}" if prev is not None else f"{'':>6}"
        times = f"{s.us / floor:7.2f}x" if floor else ""
        print(f"{s.label:<62} {s.us:7.1f} {delta} {times}")
        prev = s.us
    for note in result.notes:
        print(f"   note: {note}")
    for label, us in measured.items():
        if floor:
            times = us / floor
            verdict = "met" if times <= 4 else "NOT met"
            print(f"{label:<62} {us:7.1f} {'':>6} {times:7.2f}x  aim <= 4x: {verdict}")


def to_json(result: FloorResult) -> dict[str, object]:
    return {
        "unavailable": result.unavailable,
        "notes": result.notes,
        "steps": [
            {"label": s.label, "us_per_delivery": s.us, "runs": s.runs} for s in result.steps
        ],
    }
