-- PostgreSQL's hot path (hookinbox.store.hot_path_postgres): reserve, claim and settle,
-- each ONE statement (one round trip), where the portable transactions of hot_path.sql
-- take several. Data-modifying CTEs do the same work: the reservation is a whole batch
-- over json_to_recordset in autocommit (a repeat costs an ON CONFLICT DO NOTHING, never
-- an aborted transaction, and pg_notify inside the statement wakes the workers at its
-- commit); claims take FOR UPDATE SKIP LOCKED. The file format:
-- hookinbox/store/statements.py.


-- name: reserve
-- A row committed by a concurrent receiver after this statement's snapshot is neither
-- inserted nor visible to the update: its item gets no answer and goes round again.
-- The batch comes as two JSON parameters (rows of deliveries, rows of jobs) encoded by
-- orjson in one C call each: cheaper for the receiver than asyncpg encoding an array per
-- column, and PostgreSQL's json parser reads them fast. The bodies come apart, as one
-- bytea array in binary (a row's n is its body's place): inside JSON a body would be
-- base64 the receiver encodes and PostgreSQL lexes a character at a time and decodes
-- (a third of the statement's CPU at 3 kB bodies). A row's headers are a JSON object
-- stored as its text, as written.
WITH input AS (
    SELECT t.id, t.source, t.event_id, t.event_type, t.body_sha256, b.body,
           t.headers::text AS headers, t.seen, t.subject_hash
    FROM json_to_recordset(:items::json) AS t(id text, source text, event_id text,
         event_type text, body_sha256 text, n int, headers json, seen int,
         subject_hash text)
    JOIN unnest(:bodies::bytea[]) WITH ORDINALITY AS b(body, n) ON b.n = t.n
),
ins AS (
    INSERT INTO deliveries (id, source, event_id, event_type, body_sha256, delivery_count,
                            subject_hash)
    SELECT id, source, event_id, event_type, body_sha256, seen, subject_hash FROM input
    ON CONFLICT (source, event_id) DO NOTHING
    RETURNING id
),
pay AS (
    INSERT INTO payloads (delivery_id, body, headers)
    SELECT i.id, i.body, i.headers FROM input i JOIN ins ON ins.id = i.id
),
new_jobs AS (
    INSERT INTO jobs (id, delivery_id, source, action, max_attempts, order_key, order_hold)
    SELECT j.id, j.delivery_id, j.source, j.action, j.max_attempts, j.order_key, j.order_hold
    FROM json_to_recordset(:jobs::json)
        AS j(id text, delivery_id text, source text, action text, max_attempts int,
             order_key text, order_hold boolean)
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
    SELECT pg_notify('hookinbox_jobs', '') FROM (SELECT 1 FROM ins LIMIT 1) AS any_new
)
SELECT 'accepted' AS outcome, id AS request_id, id AS delivery_id,
       NULL::text AS body_sha256, false AS conflict FROM ins
UNION ALL
SELECT 'duplicate', request_id, delivery_id, body_sha256, conflict FROM dup
UNION ALL
SELECT 'notify', NULL, NULL, NULL, false FROM notify;

-- name: claim
-- A job of an ordered route waits behind its key as in the portable claim
-- (queries/hot_path.sql): no job of its key with a smaller id unfinished, its id older
-- than :horizon; written as a CASE so that the planner keeps walking jobs_due_idx (see
-- there). Two workers claiming at once never take two jobs of one key: the
-- earlier job is locked (skipped) or unfinished in both snapshots until its settle
-- commits, and only then is the next one free.
-- Due jobs come from two index scans, each locking with SKIP LOCKED (another worker's
-- claim passes over rows this one holds); only a re-claimed lapsed lease has an attempt
-- to write (lease-expired, from the old lease as the lock read it), and a fresh claim
-- writes no attempt at all: the settle writes it, once. Rows are found by key
-- (= ANY(ARRAY(...)), LATERAL): a join the planner may hash would scan whole tables
-- for a few dozen rows. The claimed jobs come with their deliveries' identities and
-- payloads. Every read of jobs names :floor and :below (no due job has an id between
-- them: migration 029's hookinbox_claim_floors): planned for each run, the statement
-- leaves the days of jobs in that span out of the plan, unopened and unlocked. Below
-- :below is only DEFAULT's share of the retired days (held jobs, dead letters), read
-- always, so that one of them left for weeks does not hold the floor back.
WITH
waiting AS (
    SELECT id, next_attempt_at AS due_at, false AS lapsed FROM jobs j
    WHERE state = 'accepted' AND next_attempt_at <= {now} AND (j.id >= :floor OR j.id < :below)
      AND CASE WHEN j.order_key IS NULL THEN true ELSE (j.id < :horizon AND NOT EXISTS (
          SELECT 1 FROM jobs e
          WHERE e.order_key = j.order_key AND e.id < j.id AND (e.id >= :floor OR e.id < :below)
            AND e.order_key IS NOT NULL AND e.state <> 'completed'
            AND (e.state <> 'failed' OR e.order_hold))) END
    ORDER BY next_attempt_at LIMIT :limit FOR UPDATE SKIP LOCKED
),
lapsed AS (
    SELECT id, lease_expires_at AS due_at, true AS lapsed,
           attempts, trigger, leased_by, leased_at
    FROM jobs
    WHERE state = 'processing' AND lease_expires_at < {now} AND attempts < max_attempts
      AND (id >= :floor OR id < :below)
    ORDER BY lease_expires_at LIMIT :limit FOR UPDATE SKIP LOCKED
),
picked AS (
    SELECT id, lapsed FROM (
        SELECT id, due_at, lapsed FROM waiting UNION ALL SELECT id, due_at, lapsed FROM lapsed
    ) AS due ORDER BY due_at LIMIT :limit
),
claimed AS (
    UPDATE jobs j
    SET state = 'processing', attempts = attempts + 1, lease_token = :token,
        leased_by = :worker, leased_at = {now}, lease_expires_at = {now} + {secs:lease},
        updated_at = {now}
    WHERE j.id = ANY(ARRAY(SELECT id FROM picked)) AND (j.id >= :floor OR j.id < :below)
    RETURNING j.id, j.delivery_id, j.source, j.action, j.attempts, j.max_attempts, j.trigger
),
expired AS (
    INSERT INTO attempts (job_id, number, trigger, worker, started_at, ended_at, outcome,
                          error_code)
    SELECT l.id, l.attempts, l.trigger, l.leased_by, l.leased_at, {now}, :outcome, :error
    FROM lapsed l
    WHERE l.id = ANY(ARRAY(SELECT id FROM picked WHERE lapsed))
)
SELECT c.*, d.event_id, d.event_type, p.body, p.headers
FROM claimed c
CROSS JOIN LATERAL (
    SELECT event_id, event_type FROM deliveries WHERE id = c.delivery_id
) AS d
LEFT JOIN LATERAL (
    SELECT body, headers FROM payloads WHERE delivery_id = c.delivery_id
) AS p ON true;

-- name: settle
-- Many settlements in one statement: one JSON parameter (encoded by orjson, cheaper for
-- the client than an array per column), a JSON array per settlement in the order of
-- hot_path_postgres.SETTLE_FIELDS, read back as s_ columns (named apart from the jobs
-- table's own); each row applies only while its lease token still holds the job's
-- lease, and writes exactly what one portable settle writes. Each attempt row is
-- inserted once, complete, from the lease as the claim left it (held: this statement's
-- snapshot, before done clears the lease); a job whose lease check fails is not in done
-- and gets no row. held is MATERIALIZED, read once: inlined into the join with done,
-- PostgreSQL scanned the batch's ids again for every row settled. :floor is the day of
-- the batch's smallest id at or above :below (the claim's): the days of jobs between
-- them are left out of the plan.
WITH
settle AS (
    SELECT (e->>0)::text AS s_id, (e->>1)::text AS s_token, (e->>2)::text AS s_state,
           (e->>3)::text AS s_outcome, (e->>4)::text AS s_error,
           (e->>5)::text AS s_business_id, (e->>6)::float8 AS s_delay,
           (e->>7)::int AS s_refund, (e->>8)::text AS s_target,
           (e->>9)::int AS s_http_status, (e->>10)::text AS s_snippet,
           (e->>11)::int AS s_duration_ms
    FROM jsonb_array_elements(:batch::jsonb) AS e
),
held AS MATERIALIZED (
    SELECT id, attempts, trigger, leased_by, leased_at FROM jobs
    WHERE id = ANY(ARRAY(SELECT s_id FROM settle)) AND (id >= :floor OR id < :below)
),
done AS (
    UPDATE jobs j
    SET state = s_state, last_error = coalesce(s_error, last_error),
        business_id = coalesce(s_business_id, business_id),
        next_attempt_at = {now} + make_interval(secs => s_delay),
        max_attempts = max_attempts + s_refund,
        completed_at = CASE WHEN s_state = 'completed' THEN {now} ELSE completed_at END,
        failed_at = CASE WHEN s_state = 'failed' THEN {now} ELSE failed_at END,
        lease_token = NULL, leased_by = NULL, lease_expires_at = NULL, updated_at = {now}
    FROM settle WHERE j.id = ANY(ARRAY(SELECT s_id FROM settle))
      AND (j.id >= :floor OR j.id < :below)
      AND j.id = s_id AND j.lease_token = s_token AND j.state = 'processing'
    RETURNING j.id, settle.*
),
ended AS (
    INSERT INTO attempts (job_id, number, trigger, worker, started_at, ended_at, outcome,
                          error_code, target, http_status, response_snippet, duration_ms,
                          next_attempt_at)
    SELECT h.id, h.attempts, h.trigger, h.leased_by, h.leased_at, {now},
           done.s_outcome, done.s_error, done.s_target, done.s_http_status, done.s_snippet,
           done.s_duration_ms,
           CASE WHEN done.s_state = 'accepted' THEN {now} + make_interval(secs => done.s_delay) END
    FROM done JOIN held h ON h.id = done.id
)
SELECT id FROM done;

-- name: settle_and_claim
-- A worker's loop turn in ONE statement: the batch settles as settle does and
-- the slots it freed are claimed as claim does, one round trip and one commit
-- where there were two. The claim never takes a job of the batch: all the CTEs read
-- one snapshot, in which the settled jobs still look leased (a lapsed one could be
-- picked, and a row must not be written twice in one statement). The claimed rows
-- have settled NULL; one more row, with no job, holds the ids whose lease held.
-- Unlike a claim alone, it may wait for a lock while holding others (its settle's
-- update): two workers each settling a lapsed lease the other's claim has just locked
-- would deadlock; PostgreSQL fails one statement, and that worker's batch goes again
-- one settlement at a time (hookinbox.work.settling.SettleBatcher), claiming
-- nothing. A job of an ordered route whose key this batch frees (its head completed, or
-- dead-lettered and released) may be claimed by the same statement: the head still looks
-- leased in the snapshot, so the key check leaves out the jobs done settles for good.
-- :floor is the claim's, or the batch's smallest id at or above :below if that is
-- smaller; :below is the claim's.
WITH
settle AS (
    SELECT (e->>0)::text AS s_id, (e->>1)::text AS s_token, (e->>2)::text AS s_state,
           (e->>3)::text AS s_outcome, (e->>4)::text AS s_error,
           (e->>5)::text AS s_business_id, (e->>6)::float8 AS s_delay,
           (e->>7)::int AS s_refund, (e->>8)::text AS s_target,
           (e->>9)::int AS s_http_status, (e->>10)::text AS s_snippet,
           (e->>11)::int AS s_duration_ms
    FROM jsonb_array_elements(:batch::jsonb) AS e
),
held AS MATERIALIZED (
    SELECT id, attempts, trigger, leased_by, leased_at FROM jobs
    WHERE id = ANY(ARRAY(SELECT s_id FROM settle)) AND (id >= :floor OR id < :below)
),
done AS (
    UPDATE jobs j
    SET state = s_state, last_error = coalesce(s_error, last_error),
        business_id = coalesce(s_business_id, business_id),
        next_attempt_at = {now} + make_interval(secs => s_delay),
        max_attempts = max_attempts + s_refund,
        completed_at = CASE WHEN s_state = 'completed' THEN {now} ELSE completed_at END,
        failed_at = CASE WHEN s_state = 'failed' THEN {now} ELSE failed_at END,
        lease_token = NULL, leased_by = NULL, lease_expires_at = NULL, updated_at = {now}
    FROM settle WHERE j.id = ANY(ARRAY(SELECT s_id FROM settle))
      AND (j.id >= :floor OR j.id < :below)
      AND j.id = s_id AND j.lease_token = s_token AND j.state = 'processing'
    RETURNING j.id, settle.*
),
ended AS (
    INSERT INTO attempts (job_id, number, trigger, worker, started_at, ended_at, outcome,
                          error_code, target, http_status, response_snippet, duration_ms,
                          next_attempt_at)
    SELECT h.id, h.attempts, h.trigger, h.leased_by, h.leased_at, {now},
           done.s_outcome, done.s_error, done.s_target, done.s_http_status, done.s_snippet,
           done.s_duration_ms,
           CASE WHEN done.s_state = 'accepted' THEN {now} + make_interval(secs => done.s_delay) END
    FROM done JOIN held h ON h.id = done.id
),
waiting AS (
    SELECT id, next_attempt_at AS due_at, false AS lapsed FROM jobs j
    WHERE state = 'accepted' AND next_attempt_at <= {now} AND (j.id >= :floor OR j.id < :below)
      AND NOT (id = ANY(ARRAY(SELECT s_id FROM settle)))
      AND CASE WHEN j.order_key IS NULL THEN true ELSE (j.id < :horizon AND NOT EXISTS (
          SELECT 1 FROM jobs e
          WHERE e.order_key = j.order_key AND e.id < j.id AND (e.id >= :floor OR e.id < :below)
            AND e.order_key IS NOT NULL AND e.state <> 'completed'
            AND (e.state <> 'failed' OR e.order_hold)
            AND NOT EXISTS (
                SELECT 1 FROM done WHERE done.id = e.id AND (done.s_state = 'completed'
                    OR (done.s_state = 'failed' AND NOT e.order_hold))))) END
    ORDER BY next_attempt_at LIMIT :limit FOR UPDATE SKIP LOCKED
),
lapsed AS (
    SELECT id, lease_expires_at AS due_at, true AS lapsed,
           attempts, trigger, leased_by, leased_at
    FROM jobs
    WHERE state = 'processing' AND lease_expires_at < {now} AND attempts < max_attempts
      AND (id >= :floor OR id < :below)
      AND NOT (id = ANY(ARRAY(SELECT s_id FROM settle)))
    ORDER BY lease_expires_at LIMIT :limit FOR UPDATE SKIP LOCKED
),
picked AS (
    SELECT id, lapsed FROM (
        SELECT id, due_at, lapsed FROM waiting UNION ALL SELECT id, due_at, lapsed FROM lapsed
    ) AS due ORDER BY due_at LIMIT :limit
),
claimed AS (
    UPDATE jobs j
    SET state = 'processing', attempts = attempts + 1, lease_token = :token,
        leased_by = :worker, leased_at = {now}, lease_expires_at = {now} + {secs:lease},
        updated_at = {now}
    WHERE j.id = ANY(ARRAY(SELECT id FROM picked)) AND (j.id >= :floor OR j.id < :below)
    RETURNING j.id, j.delivery_id, j.source, j.action, j.attempts, j.max_attempts, j.trigger
),
expired AS (
    INSERT INTO attempts (job_id, number, trigger, worker, started_at, ended_at, outcome,
                          error_code)
    SELECT l.id, l.attempts, l.trigger, l.leased_by, l.leased_at, {now}, :outcome, :error
    FROM lapsed l
    WHERE l.id = ANY(ARRAY(SELECT id FROM picked WHERE lapsed))
)
SELECT c.*, d.event_id, d.event_type, p.body, p.headers, NULL::text[] AS settled
FROM claimed c
CROSS JOIN LATERAL (
    SELECT event_id, event_type FROM deliveries WHERE id = c.delivery_id
) AS d
LEFT JOIN LATERAL (
    SELECT body, headers FROM payloads WHERE delivery_id = c.delivery_id
) AS p ON true
UNION ALL
SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, ARRAY(SELECT id FROM done);

-- name: fail_exhausted
-- Dead-letter the jobs whose lease ran out on their last attempt, and write that attempt
-- from the lease. FOR UPDATE (waiting, as the bare UPDATE did): a settle that got
-- there first takes the job out of the set, and two sweeps never write one attempt twice.
WITH dead AS (
    SELECT id, attempts, trigger, leased_by, leased_at FROM jobs
    WHERE state = 'processing' AND lease_expires_at < {now} AND attempts >= max_attempts
    FOR UPDATE
),
done AS (
    UPDATE jobs
    SET state = 'failed', last_error = :error, failed_at = {now},
        lease_token = NULL, leased_by = NULL, lease_expires_at = NULL, updated_at = {now}
    WHERE id = ANY(ARRAY(SELECT id FROM dead))
    RETURNING id
),
ended AS (
    INSERT INTO attempts (job_id, number, trigger, worker, started_at, ended_at, outcome,
                          error_code)
    SELECT d.id, d.attempts, d.trigger, d.leased_by, d.leased_at, {now}, :outcome, :error
    FROM dead d
    WHERE d.id = ANY(ARRAY(SELECT id FROM done))
)
SELECT count(*) FROM done;

-- name: has_job_floor
-- Whether jobs are partitioned by day with the claim's floors (migrations 028, 029);
-- before it every claim reads the one table and its floors are ''.
SELECT to_regprocedure('hookinbox_claim_floors()') IS NOT NULL;

-- name: job_floor
-- The first day's id a claim must read from, and the first id of the days of jobs still
-- there (hookinbox_claim_floors, migration 029).
SELECT floor, below FROM hookinbox_claim_floors();
