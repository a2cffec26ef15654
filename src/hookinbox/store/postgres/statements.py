"""PostgreSQL's hot path: reserve, claim and settle, each ONE statement (one round trip).

The portable transactions of :mod:`hookinbox.store.hot_path` take several statements;
here data-modifying CTEs do the same work in one, built from the same fragments. The
reservation is a whole batch over ``unnest`` arrays, in autocommit: a repeat costs an
``ON CONFLICT DO NOTHING``, never an aborted transaction, and ``pg_notify`` inside the
statement wakes the workers at its commit. Claims take ``FOR UPDATE SKIP LOCKED``.
"""

from __future__ import annotations

from hookinbox.store.hot_path import (
    CLAIMED_COLUMNS,
    DUE_ACCEPTED,
    EXHAUST_JOB,
    LEASE_EXHAUSTED,
    LEASE_JOB,
    LEASE_LAPSED,
    SETTLED_ATTEMPT_COLUMNS,
    end_attempts_from,
    finish_job_set,
    lease_attempt,
    settled_attempt_values,
)
from hookinbox.store.sql import Sql

NOTIFY_CHANNEL = "hookinbox_jobs"
NOTIFY = Sql(f"SELECT pg_notify('{NOTIFY_CHANNEL}', '')")

# A row committed by a concurrent receiver after this statement's snapshot is neither
# inserted nor visible to the update: its item gets no answer and goes round again.
# The batch comes as two JSON parameters (rows of deliveries, rows of jobs; bodies in
# base64) encoded by orjson in one C call each: cheaper for the receiver than asyncpg
# encoding an array per column, and PostgreSQL's json parser reads them fast.
RESERVE = Sql(
    """
WITH input AS (
    SELECT id, source, event_id, event_type, body_sha256, decode(body, 'base64') AS body,
           headers, seen
    FROM json_to_recordset(:items::json) AS t(id text, source text, event_id text,
         event_type text, body_sha256 text, body text, headers text, seen int)
),
ins AS (
    INSERT INTO deliveries (id, source, event_id, event_type, body_sha256, delivery_count)
    SELECT id, source, event_id, event_type, body_sha256, seen FROM input
    ON CONFLICT (source, event_id) DO NOTHING
    RETURNING id
),
pay AS (
    INSERT INTO payloads (delivery_id, body, headers)
    SELECT i.id, i.body, i.headers FROM input i JOIN ins ON ins.id = i.id
),
new_jobs AS (
    INSERT INTO jobs (id, delivery_id, source, action, max_attempts)
    SELECT j.id, j.delivery_id, j.source, j.action, j.max_attempts
    FROM json_to_recordset(:jobs::json)
        AS j(id text, delivery_id text, source text, action text, max_attempts int)
    JOIN ins ON ins.id = j.delivery_id
),
dup AS (
    UPDATE deliveries d
    SET last_seen_at = now(),
        delivery_count = d.delivery_count + i.seen,
        conflicts = d.conflicts + i.seen * (d.body_sha256 <> i.body_sha256)::int
    FROM input i
    WHERE d.source = i.source AND d.event_id = i.event_id
      AND NOT EXISTS (SELECT 1 FROM ins WHERE ins.id = i.id)
    RETURNING i.id AS request_id, d.id AS delivery_id, d.body_sha256,
              d.body_sha256 <> i.body_sha256 AS conflict
),
notify AS (
    SELECT pg_notify('"""
    + NOTIFY_CHANNEL
    + """', '') FROM (SELECT 1 FROM ins LIMIT 1) AS any_new
)
SELECT 'accepted' AS outcome, id AS request_id, id AS delivery_id,
       NULL::text AS body_sha256, false AS conflict FROM ins
UNION ALL
SELECT 'duplicate', request_id, delivery_id, body_sha256, conflict FROM dup
UNION ALL
SELECT 'notify', NULL, NULL, NULL, false FROM notify
"""
)


# Due jobs come from two index scans, each locking with SKIP LOCKED (another worker's
# claim passes over rows this one holds); only a re-claimed lapsed lease has an attempt
# to write (lease-expired, from the old lease as the lock read it), and a fresh claim
# writes no attempt at all: the settle writes it, once. Rows are found by key
# (``= ANY(ARRAY(...))``, LATERAL): a join the planner may hash would scan whole tables
# for a few dozen rows. ``but`` narrows both scans (a claim riding on a settle leaves
# the jobs it settles alone).
def _claim_ctes(but: str = "") -> str:
    return f"""
waiting AS (
    SELECT id, next_attempt_at AS due_at, false AS lapsed FROM jobs WHERE {DUE_ACCEPTED}{but}
    ORDER BY next_attempt_at LIMIT :limit FOR UPDATE SKIP LOCKED
),
lapsed AS (
    SELECT id, lease_expires_at AS due_at, true AS lapsed,
           attempts, trigger, leased_by, leased_at
    FROM jobs WHERE {LEASE_LAPSED}{but}
    ORDER BY lease_expires_at LIMIT :limit FOR UPDATE SKIP LOCKED
),
picked AS (
    SELECT id, lapsed FROM (
        SELECT id, due_at, lapsed FROM waiting UNION ALL SELECT id, due_at, lapsed FROM lapsed
    ) AS due ORDER BY due_at LIMIT :limit
),
claimed AS (
    UPDATE jobs j SET {LEASE_JOB} WHERE j.id = ANY(ARRAY(SELECT id FROM picked))
    RETURNING {", ".join("j." + c for c in CLAIMED_COLUMNS.split(", "))}
),
expired AS (
    {end_attempts_from("l.")}lapsed l
    WHERE l.id = ANY(ARRAY(SELECT id FROM picked WHERE lapsed))
)"""


#: The claimed jobs with their deliveries' identities and payloads.
_CLAIMED_ROWS = """
SELECT c.*, d.event_id, d.event_type, p.body, p.headers{extra}
FROM claimed c
CROSS JOIN LATERAL (
    SELECT event_id, event_type FROM deliveries WHERE id = c.delivery_id
) AS d
LEFT JOIN LATERAL (
    SELECT body, headers FROM payloads WHERE delivery_id = c.delivery_id
) AS p ON true
"""

CLAIM = Sql("WITH" + _claim_ctes() + _CLAIMED_ROWS.format(extra=""))

# Many settlements in one statement: one JSON parameter (encoded by orjson, cheaper for
# the client than an array per column), a JSON array per settlement; each row
# applies only while its lease token still holds the job's lease. The jobs and their
# attempts are written with the fragments of one settle (``s_`` columns for the
# parameters), so a batch keeps exactly what one settle keeps. Each attempt row is
# inserted once, complete, from the lease as the claim left it (``held``: this
# statement's snapshot, before ``done`` clears the lease); a job whose lease check
# fails is not in ``done`` and gets no row. ``held`` is MATERIALIZED, read once: inlined
# into the join with ``done``, PostgreSQL scanned the batch's ids again for every row
# settled (32 x 32 index probes over every version of each job: 6 of a 9 ms settle).
#: A settlement's values in the order a row of the batch holds them (JSON arrays: no
#: key per value to encode, and no dict per row to build with the keys renamed), each
#: with its type; read back as ``s_`` columns, named apart from the jobs table's own.
SETTLE_FIELDS = (
    ("id", "text"),
    ("token", "text"),
    ("state", "text"),
    ("outcome", "text"),
    ("error", "text"),
    ("business_id", "text"),
    ("delay", "float8"),
    ("refund", "int"),
    ("target", "text"),
    ("http_status", "int"),
    ("snippet", "text"),
    ("duration_ms", "int"),
)
_SETTLE_VALUES = ", ".join(
    f"(e->>{n})::{kind} AS s_{name}" for n, (name, kind) in enumerate(SETTLE_FIELDS)
)
_SETTLE_CTES = f"""
settle AS (
    SELECT {_SETTLE_VALUES} FROM jsonb_array_elements(:batch::jsonb) AS e
),
held AS MATERIALIZED (
    SELECT id, attempts, trigger, leased_by, leased_at FROM jobs
    WHERE id = ANY(ARRAY(SELECT s_id FROM settle))
),
done AS (
    UPDATE jobs j SET {finish_job_set("s_", "make_interval(secs => s_delay)")}
    FROM settle WHERE j.id = ANY(ARRAY(SELECT s_id FROM settle))
      AND j.id = s_id AND j.lease_token = s_token AND j.state = 'processing'
    RETURNING j.id, settle.*
),
ended AS (
    INSERT INTO attempts ({SETTLED_ATTEMPT_COLUMNS})
    SELECT {lease_attempt("h.")},
           {settled_attempt_values("done.s_", "make_interval(secs => done.s_delay)")}
    FROM done JOIN held h ON h.id = done.id
)"""

SETTLE = Sql("WITH" + _SETTLE_CTES + "\nSELECT id FROM done\n")

#: A worker's loop turn in ONE statement: the batch settles as :data:`SETTLE` does and
#: the slots it freed are claimed as :data:`CLAIM` does, one round trip and one commit
#: where there were two. The claim never takes a job of the batch: all the CTEs read
#: one snapshot, in which the settled jobs still look leased (a lapsed one could be
#: picked, and a row must not be written twice in one statement). The claimed rows
#: have ``settled`` NULL; one more row, with no job, holds the ids whose lease held.
#: Unlike a claim alone, it may wait for a lock while holding others (its settle's
#: update): two workers each settling a lapsed lease the other's claim has just locked
#: would deadlock; PostgreSQL fails one statement, and that worker's batch goes again
#: one settlement at a time (:class:`~hookinbox.work.settling.SettleBatcher`), claiming
#: nothing.
SETTLE_AND_CLAIM = Sql(
    "WITH"
    + _SETTLE_CTES
    + ","
    + _claim_ctes(" AND NOT (id = ANY(ARRAY(SELECT s_id FROM settle)))")
    + _CLAIMED_ROWS.format(extra=", NULL::text[] AS settled")
    + "UNION ALL\nSELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,"
    + " ARRAY(SELECT id FROM done)\n"
)

#: Dead-letter the jobs whose lease ran out on their last attempt, and write that attempt
#: from the lease. ``FOR UPDATE`` (waiting, as the bare UPDATE did): a settle that got
#: there first takes the job out of the set, and two sweeps never write one attempt twice.
FAIL_EXHAUSTED = Sql(
    f"""
WITH dead AS (
    SELECT id, attempts, trigger, leased_by, leased_at FROM jobs WHERE {LEASE_EXHAUSTED}
    FOR UPDATE
),
done AS (
    UPDATE jobs SET {EXHAUST_JOB} WHERE id = ANY(ARRAY(SELECT id FROM dead)) RETURNING id
),
ended AS (
    {end_attempts_from("d.")}dead d
    WHERE d.id = ANY(ARRAY(SELECT id FROM done))
)
SELECT count(*) FROM done
"""
)
