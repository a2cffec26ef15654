-- Every statement postgres runs, rendered (tests/store/test_sql_golden.py).

-- name: admin_sessions.forget_expired
DELETE FROM admin_sessions_revoked
WHERE revoked_until < now();

-- name: admin_sessions.is_revoked
-- params: $1 session_id
SELECT 1 AS revoked
FROM admin_sessions_revoked
WHERE session_id = $1
  AND revoked_until > now();

-- name: admin_sessions.revoke
-- params: $1 session_id, $2 ttl
INSERT INTO admin_sessions_revoked (session_id, revoked_until)
VALUES ($1, now() + make_interval(secs => $2))
ON CONFLICT (session_id) DO NOTHING;

-- name: audit.audit
-- params: $1 actor, $2 command, $3 source, $4 delivery_id, $5 job_id, $6 detail
INSERT INTO operator_actions (at, actor, command, source, delivery_id, job_id, detail)
VALUES (now(), $1, $2, $3, $4, $5, $6);

-- name: audit.list
-- params: $1 delivery_id, $2 limit
SELECT at, actor, command, source, delivery_id, job_id, detail
FROM operator_actions
WHERE (delivery_id = $1 OR $1 IS NULL)
ORDER BY id
LIMIT $2;

-- name: catch_up.get
-- params: $1 source
SELECT source, position, resume_after, resume_ceiling, version, updated_at, last_report
FROM catch_up_cursors
WHERE source = $1;

-- name: catch_up.known
-- params: $1 source, $2 ids
SELECT event_id FROM deliveries WHERE source = $1 AND event_id = ANY($2);

-- name: catch_up.list
SELECT source, position, resume_after, resume_ceiling, version, updated_at, last_report
FROM catch_up_cursors
ORDER BY source;

-- name: catch_up.lock
-- params: $1 lock_key
SELECT pg_advisory_xact_lock(hashtext($1)) AS locked;

-- name: catch_up.mark_origin
-- params: $1 origin, $2 ids
UPDATE deliveries SET origin = $1 WHERE id = ANY($2);

-- name: catch_up.save
-- params: $1 source, $2 position, $3 resume_after, $4 resume_ceiling, $5 report, $6 version
INSERT INTO catch_up_cursors (source, position, resume_after, resume_ceiling, version,
                              updated_at, last_report)
VALUES ($1, $2, $3, $4, 1, now(), $5)
ON CONFLICT (source) DO UPDATE
SET position = excluded.position, resume_after = excluded.resume_after,
    resume_ceiling = excluded.resume_ceiling, version = catch_up_cursors.version + 1,
    updated_at = excluded.updated_at, last_report = excluded.last_report
WHERE catch_up_cursors.version = $6
RETURNING version;

-- name: core.count_rows
SELECT (SELECT count(*) FROM deliveries) AS deliveries, (SELECT count(*) FROM jobs) AS jobs,
    (SELECT count(*) FROM payloads) AS payloads, (SELECT count(*) FROM effects) AS effects,
    (SELECT count(*) FROM attempts) AS attempts;

-- name: core.schema_version
SELECT max(version) AS version FROM schema_migrations;

-- name: core.store_clock
SELECT now() AS now;

-- name: destination_state.circuit
-- params: $1 name
SELECT failures, CAST(opened_at IS NOT NULL AS INTEGER) AS open, set_config('synchronous_commit', 'off', true) AS soft
FROM destinations
WHERE name = $1 FOR UPDATE;

-- name: destination_state.drop_slot
-- params: $1 job, $2 token, $3 name
DELETE FROM destination_slots
WHERE (job_id = $1 AND lease_token = $2)
  OR (destination = $3 AND expires_at <= now());

-- name: destination_state.ensure
-- params: $1 name, $2 burst
INSERT INTO destinations (name, tokens, refilled_at, updated_at)
VALUES ($1, $2, now(), now())
ON CONFLICT (name) DO NOTHING;

-- name: destination_state.failed
-- params: $1 opens, $2 newly, $3 name
UPDATE destinations
SET failures = failures + 1, updated_at = now(), opened_at = CASE WHEN $1 = 1 THEN now()
    ELSE opened_at END, last_opened_at = CASE WHEN $1 = 1 THEN now() ELSE last_opened_at END
    , openings = openings + $2, probe_until = CASE WHEN $1 = 1 THEN NULL ELSE
    probe_until END
WHERE name = $3;

-- name: destination_state.in_flight
-- params: $1 name, $2 job, $3 token
SELECT count(*)
FROM destination_slots
WHERE destination = $1
  AND expires_at > now()
  AND NOT (job_id = $2 AND lease_token = $3);

-- name: destination_state.lock
-- params: $1 name
SELECT tokens, extract(epoch FROM now() - refilled_at) AS since_refill, failures, extract(epoch FROM now() - opened_at) AS open_for,
    CAST(coalesce(probe_until > now(), FALSE) AS INTEGER) AS probing, set_config('synchronous_commit', 'off', true) AS soft
FROM destinations
WHERE name = $1 FOR UPDATE;

-- name: destination_state.slot
-- params: $1 job, $2 token, $3 name, $4 slot
INSERT INTO destination_slots (job_id, lease_token, destination, expires_at)
VALUES ($1, $2, $3, now() + make_interval(secs => $4))
ON CONFLICT (job_id, lease_token) DO UPDATE
SET destination = $3, expires_at = now() + make_interval(secs => $4);

-- name: destination_state.soft
SELECT set_config('synchronous_commit', 'off', true);

-- name: destination_state.states
SELECT d.name, d.tokens, extract(epoch FROM now() - d.refilled_at) AS since_refill, d.failures, extract(epoch FROM now() - d.opened_at) AS
    open_for, d.opened_at, d.last_opened_at, d.openings, (SELECT count(*) FROM destination_slots
    s WHERE s.destination = d.name AND s.expires_at > now()) AS in_flight
FROM destinations d
ORDER BY d.name;

-- name: destination_state.succeeded
-- params: $1 name
UPDATE destinations
SET failures = 0, opened_at = NULL, probe_until = NULL, updated_at = now()
WHERE name = $1;

-- name: destination_state.take
-- params: $1 tokens, $2 probe, $3 slot, $4 name
UPDATE destinations
SET tokens = $1, refilled_at = now(), updated_at = now(), probe_until = CASE WHEN $2 =
    1 THEN now() + make_interval(secs => $3) ELSE probe_until END
WHERE name = $4;

-- name: effects.drop
-- params: $1 ids
DELETE FROM effects
WHERE job_id = ANY($1)
RETURNING key;

-- name: effects.get
-- params: $1 key
SELECT key, state, job_id, result, created_at, recorded_at
FROM effects
WHERE key = $1;

-- name: effects.held
-- params: $1 id
SELECT 1
FROM jobs
WHERE id = $1
  AND state = 'processing'
  AND lease_expires_at > now();

-- name: effects.of_jobs
-- params: $1 ids
SELECT key, state, job_id, result, created_at, recorded_at
FROM effects
WHERE job_id = ANY($1)
ORDER BY created_at, key;

-- name: effects.record
-- params: $1 key, $2 result
INSERT INTO effects (key, job_id, state, result, created_at, recorded_at)
VALUES ($1, NULL, 'recorded', $2, now(), now())
ON CONFLICT (key) DO UPDATE
SET state = 'recorded', result = excluded.result, recorded_at = excluded.recorded_at
WHERE effects.state = 'started';

-- name: effects.release
-- params: $1 key, $2 job_id
DELETE FROM effects
WHERE key = $1
  AND job_id = $2
  AND state = 'started';

-- name: effects.set_aside
-- params: $1 actor, $2 ids
INSERT INTO effects_superseded (key, state, job_id, result, created_at, recorded_at,
    superseded_at, superseded_by) SELECT key, state, job_id, result, created_at, recorded_at,
    now(), $1
FROM effects
WHERE job_id = ANY($2);

-- name: effects.start
-- params: $1 key, $2 job_id
INSERT INTO effects (key, job_id, state, created_at)
VALUES ($1, $2, 'started', now())
ON CONFLICT (key) DO NOTHING;

-- name: erasure.batch
-- params: $1 subject, $2 source, $3 limit
SELECT d.id
FROM deliveries d
WHERE d.subject_hash = $1 AND (d.source = $2 OR $2 IS NULL) AND (EXISTS (SELECT 1 FROM payloads p WHERE p.delivery_id = d.id COLLATE "default") OR EXISTS (SELECT 1 FROM jobs j JOIN attempts a ON a.job_id = j.id WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default"
    AND a.response_snippet IS NOT NULL))
ORDER BY d.id
LIMIT $3;

-- name: erasure.count_deliveries
-- params: $1 subject, $2 source
SELECT count(*) AS deliveries, coalesce(sum(CASE WHEN EXISTS (SELECT 1 FROM payloads p WHERE p.delivery_id = d.id COLLATE "default") THEN 1 ELSE 0
    END), 0) AS payloads
FROM deliveries d
WHERE d.subject_hash = $1 AND (d.source = $2 OR $2 IS NULL);

-- name: erasure.count_rejected
-- params: $1 subject, $2 source
SELECT count(*)
FROM rejected_deliveries
WHERE subject_hash = $1 AND (source = $2 OR $2 IS NULL) AND body IS NOT NULL;

-- name: erasure.count_snippets
-- params: $1 subject, $2 source
SELECT count(*)
FROM deliveries d
CROSS JOIN LATERAL (SELECT j.* FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default" OFFSET 0) j
JOIN attempts a ON a.job_id = j.id
WHERE d.subject_hash = $1 AND (d.source = $2 OR $2 IS NULL) AND a.response_snippet IS NOT NULL;

-- name: erasure.drop_payloads
-- params: $1 ids
DELETE FROM payloads
WHERE delivery_id = ANY($1);

-- name: erasure.drop_rejected_bodies
-- params: $1 subject, $2 source, $3 limit
UPDATE rejected_deliveries
SET body = NULL, stored_bytes = stored_bytes - body_bytes
WHERE id IN (SELECT id FROM rejected_deliveries WHERE subject_hash = $1 AND (source =
    $2 OR $2 IS NULL) AND body IS NOT NULL LIMIT $3);

-- name: erasure.drop_snippets
-- params: $1 ids
UPDATE attempts
SET response_snippet = NULL
WHERE response_snippet IS NOT NULL AND job_id IN (SELECT j.id FROM deliveries d
    CROSS JOIN LATERAL (SELECT j.* FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default" OFFSET 0) j WHERE d.id = ANY($1));

-- name: erasure.mark_erased
-- params: $1 ids
UPDATE deliveries
SET payload_purged_at = coalesce(payload_purged_at, now())
WHERE id = ANY($1);

-- name: hot_path.add_deliveries
-- params: $1 id, $2 source, $3 event_id, $4 event_type, $5 sha, $6 seen, $7 subject_hash
INSERT INTO deliveries (id, source, event_id, event_type, body_sha256, delivery_count,
                        first_seen_at, last_seen_at, subject_hash)
VALUES ($1, $2, $3, $4, $5, $6, now(), now(), $7)
ON CONFLICT (source, event_id) DO NOTHING;

-- name: hot_path.added
-- params: $1 ids
SELECT id FROM deliveries WHERE id = ANY($1);

-- name: hot_path.claim
-- params: $1 token, $2 worker, $3 lease, $4 ids
UPDATE jobs
SET state = 'processing', attempts = attempts + 1, lease_token = $1, leased_by = $2,
    leased_at = now(), lease_expires_at = now() + make_interval(secs => $3), updated_at = now()
WHERE id = ANY($4)
RETURNING id, delivery_id, source, action, attempts, max_attempts, trigger;

-- name: hot_path.claim
-- params: $1 floor, $2 below, $3 horizon, $4 limit, $5 token, $6 worker, $7 lease, $8 outcome, $9 error
WITH
waiting AS (
    SELECT id, next_attempt_at AS due_at, false AS lapsed FROM jobs j
    WHERE state = 'accepted' AND next_attempt_at <= now() AND (j.id >= $1 OR j.id < $2)
      AND CASE WHEN j.order_key IS NULL THEN true ELSE (j.id < $3 AND NOT EXISTS (
          SELECT 1 FROM jobs e
          WHERE e.order_key = j.order_key AND e.id < j.id AND (e.id >= $1 OR e.id < $2)
            AND e.order_key IS NOT NULL AND e.state <> 'completed'
            AND (e.state <> 'failed' OR e.order_hold))) END
    ORDER BY next_attempt_at LIMIT $4 FOR UPDATE SKIP LOCKED
),
lapsed AS (
    SELECT id, lease_expires_at AS due_at, true AS lapsed,
           attempts, trigger, leased_by, leased_at
    FROM jobs
    WHERE state = 'processing' AND lease_expires_at < now() AND attempts < max_attempts
      AND (id >= $1 OR id < $2)
    ORDER BY lease_expires_at LIMIT $4 FOR UPDATE SKIP LOCKED
),
picked AS (
    SELECT id, lapsed FROM (
        SELECT id, due_at, lapsed FROM waiting UNION ALL SELECT id, due_at, lapsed FROM lapsed
    ) AS due ORDER BY due_at LIMIT $4
),
claimed AS (
    UPDATE jobs j
    SET state = 'processing', attempts = attempts + 1, lease_token = $5,
        leased_by = $6, leased_at = now(), lease_expires_at = now() + make_interval(secs => $7),
        updated_at = now()
    WHERE j.id = ANY(ARRAY(SELECT id FROM picked)) AND (j.id >= $1 OR j.id < $2)
    RETURNING j.id, j.delivery_id, j.source, j.action, j.attempts, j.max_attempts, j.trigger
),
expired AS (
    INSERT INTO attempts (job_id, number, trigger, worker, started_at, ended_at, outcome,
                          error_code)
    SELECT l.id, l.attempts, l.trigger, l.leased_by, l.leased_at, now(), $8, $9
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

-- name: hot_path.claimed
-- params: $1 ids
SELECT j.id, j.delivery_id, j.source, j.action, j.attempts, j.max_attempts, j.trigger,
       d.event_id, d.event_type, p.body, p.headers
FROM jobs j
JOIN deliveries d ON d.id = j.delivery_id
LEFT JOIN payloads p ON p.delivery_id = j.delivery_id
WHERE j.id = ANY($1);

-- name: hot_path.due
-- params: $1 horizon, $2 limit
SELECT id, state FROM (
    SELECT * FROM (
        SELECT id, state, next_attempt_at AS due_at FROM jobs j
        WHERE state = 'accepted' AND next_attempt_at <= now()
          AND CASE WHEN j.order_key IS NULL THEN TRUE ELSE (j.id < $1 AND NOT EXISTS (
              SELECT 1 FROM jobs e
              WHERE e.order_key = j.order_key AND e.id < j.id
                AND e.order_key IS NOT NULL AND e.state <> 'completed'
                AND (e.state <> 'failed' OR e.order_hold = TRUE))) END
        ORDER BY next_attempt_at LIMIT $2)
    UNION ALL
    SELECT * FROM (
        SELECT id, state, lease_expires_at AS due_at FROM jobs
        WHERE state = 'processing' AND lease_expires_at < now() AND attempts < max_attempts
        ORDER BY lease_expires_at LIMIT $2)
) AS due
ORDER BY due_at
LIMIT $2;

-- name: hot_path.due_but_settled
-- params: $1 settled, $2 horizon, $3 limit
SELECT id, state FROM (
    SELECT * FROM (
        SELECT id, state, next_attempt_at AS due_at FROM jobs j
        WHERE state = 'accepted' AND next_attempt_at <= now() AND NOT (id = ANY($1))
          AND CASE WHEN j.order_key IS NULL THEN TRUE ELSE (j.id < $2 AND NOT EXISTS (
              SELECT 1 FROM jobs e
              WHERE e.order_key = j.order_key AND e.id < j.id
                AND e.order_key IS NOT NULL AND e.state <> 'completed'
                AND (e.state <> 'failed' OR e.order_hold = TRUE))) END
        ORDER BY next_attempt_at LIMIT $3)
    UNION ALL
    SELECT * FROM (
        SELECT id, state, lease_expires_at AS due_at FROM jobs
        WHERE state = 'processing' AND lease_expires_at < now() AND attempts < max_attempts
          AND NOT (id = ANY($1))
        ORDER BY lease_expires_at LIMIT $3)
) AS due
ORDER BY due_at
LIMIT $3;

-- name: hot_path.end_settled
-- params: $1 outcome, $2 error, $3 target, $4 http_status, $5 snippet, $6 duration_ms, $7 state, $8 delay, $9 id, $10 token
INSERT INTO attempts (job_id, number, trigger, worker, started_at, ended_at, outcome,
                      error_code, target, http_status, response_snippet, duration_ms,
                      next_attempt_at)
SELECT id, attempts, trigger, leased_by, leased_at, now(), $1, $2, $3,
       $4, $5, $6,
       CASE WHEN $7 = 'accepted' THEN now() + make_interval(secs => $8) END
FROM jobs
WHERE id = $9 AND lease_token = $10 AND state = 'processing';

-- name: hot_path.exhausted
-- params: $1 error, $2 ids
UPDATE jobs
SET state = 'failed', last_error = $1, failed_at = now(),
    lease_token = NULL, leased_by = NULL, lease_expires_at = NULL, updated_at = now()
WHERE id = ANY($2);

-- name: hot_path.expire_exhausted
-- params: $1 outcome, $2 error
INSERT INTO attempts (job_id, number, trigger, worker, started_at, ended_at, outcome,
                      error_code)
SELECT id, attempts, trigger, leased_by, leased_at, now(), $1, $2
FROM jobs
WHERE state = 'processing' AND lease_expires_at < now() AND attempts >= max_attempts
RETURNING job_id;

-- name: hot_path.expire_leases
-- params: $1 outcome, $2 error, $3 ids
INSERT INTO attempts (job_id, number, trigger, worker, started_at, ended_at, outcome,
                      error_code)
SELECT id, attempts, trigger, leased_by, leased_at, now(), $1, $2
FROM jobs
WHERE id = ANY($3);

-- name: hot_path.fail_exhausted
-- params: $1 error, $2 outcome
WITH dead AS (
    SELECT id, attempts, trigger, leased_by, leased_at FROM jobs
    WHERE state = 'processing' AND lease_expires_at < now() AND attempts >= max_attempts
    FOR UPDATE
),
done AS (
    UPDATE jobs
    SET state = 'failed', last_error = $1, failed_at = now(),
        lease_token = NULL, leased_by = NULL, lease_expires_at = NULL, updated_at = now()
    WHERE id = ANY(ARRAY(SELECT id FROM dead))
    RETURNING id
),
ended AS (
    INSERT INTO attempts (job_id, number, trigger, worker, started_at, ended_at, outcome,
                          error_code)
    SELECT d.id, d.attempts, d.trigger, d.leased_by, d.leased_at, now(), $2, $1
    FROM dead d
    WHERE d.id = ANY(ARRAY(SELECT id FROM done))
)
SELECT count(*) FROM done;

-- name: hot_path.finish
-- params: $1 state, $2 error, $3 business_id, $4 delay, $5 refund, $6 id, $7 token
UPDATE jobs
SET state = $1, last_error = coalesce($2, last_error),
    business_id = coalesce($3, business_id),
    next_attempt_at = now() + make_interval(secs => $4), max_attempts = max_attempts + $5,
    completed_at = CASE WHEN $1 = 'completed' THEN now() ELSE completed_at END,
    failed_at = CASE WHEN $1 = 'failed' THEN now() ELSE failed_at END,
    lease_token = NULL, leased_by = NULL, lease_expires_at = NULL, updated_at = now()
WHERE id = $6 AND lease_token = $7 AND state = 'processing';

-- name: hot_path.has_job_floor
SELECT to_regprocedure('hookinbox_claim_floors()') IS NOT NULL;

-- name: hot_path.held_leases
-- params: $1 ids
SELECT id, lease_token FROM jobs WHERE id = ANY($1) AND state = 'processing' FOR UPDATE;

-- name: hot_path.insert_delivery
-- params: $1 id, $2 source, $3 event_id, $4 event_type, $5 sha, $6 seen, $7 subject_hash
INSERT INTO deliveries (id, source, event_id, event_type, body_sha256, delivery_count,
                        first_seen_at, last_seen_at, subject_hash)
VALUES ($1, $2, $3, $4, $5, $6, now(), now(), $7)
ON CONFLICT (source, event_id) DO NOTHING
RETURNING id;

-- name: hot_path.insert_job
-- params: $1 id, $2 delivery_id, $3 source, $4 action, $5 max_attempts, $6 order_key, $7 order_hold
INSERT INTO jobs (id, delivery_id, source, action, max_attempts, order_key, order_hold,
                  next_attempt_at, created_at, updated_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, now(),
        now(), now());

-- name: hot_path.insert_payload
-- params: $1 id, $2 body, $3 headers
INSERT INTO payloads (delivery_id, body, headers) VALUES ($1, $2, $3);

-- name: hot_path.job_floor
SELECT floor, below FROM hookinbox_claim_floors();

-- name: hot_path.reserve
-- params: $1 items, $2 bodies, $3 jobs
WITH input AS (
    SELECT t.id, t.source, t.event_id, t.event_type, t.body_sha256, b.body,
           t.headers::text AS headers, t.seen, t.subject_hash
    FROM json_to_recordset($1::json) AS t(id text, source text, event_id text,
         event_type text, body_sha256 text, n int, headers json, seen int,
         subject_hash text)
    JOIN unnest($2::bytea[]) WITH ORDINALITY AS b(body, n) ON b.n = t.n
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
    FROM json_to_recordset($3::json)
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

-- name: hot_path.seen_again
-- params: $1 seen, $2 sha, $3 source, $4 event_id
UPDATE deliveries
SET last_seen_at = now(), delivery_count = delivery_count + $1,
    conflicts = conflicts + $1 * CAST(body_sha256 <> $2 AS INTEGER)
WHERE source = $3 AND event_id = $4
RETURNING id, body_sha256;

-- name: hot_path.settle
-- params: $1 batch, $2 floor, $3 below
WITH
settle AS (
    SELECT (e->>0)::text AS s_id, (e->>1)::text AS s_token, (e->>2)::text AS s_state,
           (e->>3)::text AS s_outcome, (e->>4)::text AS s_error,
           (e->>5)::text AS s_business_id, (e->>6)::float8 AS s_delay,
           (e->>7)::int AS s_refund, (e->>8)::text AS s_target,
           (e->>9)::int AS s_http_status, (e->>10)::text AS s_snippet,
           (e->>11)::int AS s_duration_ms
    FROM jsonb_array_elements($1::jsonb) AS e
),
held AS MATERIALIZED (
    SELECT id, attempts, trigger, leased_by, leased_at FROM jobs
    WHERE id = ANY(ARRAY(SELECT s_id FROM settle)) AND (id >= $2 OR id < $3)
),
done AS (
    UPDATE jobs j
    SET state = s_state, last_error = coalesce(s_error, last_error),
        business_id = coalesce(s_business_id, business_id),
        next_attempt_at = now() + make_interval(secs => s_delay),
        max_attempts = max_attempts + s_refund,
        completed_at = CASE WHEN s_state = 'completed' THEN now() ELSE completed_at END,
        failed_at = CASE WHEN s_state = 'failed' THEN now() ELSE failed_at END,
        lease_token = NULL, leased_by = NULL, lease_expires_at = NULL, updated_at = now()
    FROM settle WHERE j.id = ANY(ARRAY(SELECT s_id FROM settle))
      AND (j.id >= $2 OR j.id < $3)
      AND j.id = s_id AND j.lease_token = s_token AND j.state = 'processing'
    RETURNING j.id, settle.*
),
ended AS (
    INSERT INTO attempts (job_id, number, trigger, worker, started_at, ended_at, outcome,
                          error_code, target, http_status, response_snippet, duration_ms,
                          next_attempt_at)
    SELECT h.id, h.attempts, h.trigger, h.leased_by, h.leased_at, now(),
           done.s_outcome, done.s_error, done.s_target, done.s_http_status, done.s_snippet,
           done.s_duration_ms,
           CASE WHEN done.s_state = 'accepted' THEN now() + make_interval(secs => done.s_delay) END
    FROM done JOIN held h ON h.id = done.id
)
SELECT id FROM done;

-- name: hot_path.settle_and_claim
-- params: $1 batch, $2 floor, $3 below, $4 horizon, $5 limit, $6 token, $7 worker, $8 lease, $9 outcome, $10 error
WITH
settle AS (
    SELECT (e->>0)::text AS s_id, (e->>1)::text AS s_token, (e->>2)::text AS s_state,
           (e->>3)::text AS s_outcome, (e->>4)::text AS s_error,
           (e->>5)::text AS s_business_id, (e->>6)::float8 AS s_delay,
           (e->>7)::int AS s_refund, (e->>8)::text AS s_target,
           (e->>9)::int AS s_http_status, (e->>10)::text AS s_snippet,
           (e->>11)::int AS s_duration_ms
    FROM jsonb_array_elements($1::jsonb) AS e
),
held AS MATERIALIZED (
    SELECT id, attempts, trigger, leased_by, leased_at FROM jobs
    WHERE id = ANY(ARRAY(SELECT s_id FROM settle)) AND (id >= $2 OR id < $3)
),
done AS (
    UPDATE jobs j
    SET state = s_state, last_error = coalesce(s_error, last_error),
        business_id = coalesce(s_business_id, business_id),
        next_attempt_at = now() + make_interval(secs => s_delay),
        max_attempts = max_attempts + s_refund,
        completed_at = CASE WHEN s_state = 'completed' THEN now() ELSE completed_at END,
        failed_at = CASE WHEN s_state = 'failed' THEN now() ELSE failed_at END,
        lease_token = NULL, leased_by = NULL, lease_expires_at = NULL, updated_at = now()
    FROM settle WHERE j.id = ANY(ARRAY(SELECT s_id FROM settle))
      AND (j.id >= $2 OR j.id < $3)
      AND j.id = s_id AND j.lease_token = s_token AND j.state = 'processing'
    RETURNING j.id, settle.*
),
ended AS (
    INSERT INTO attempts (job_id, number, trigger, worker, started_at, ended_at, outcome,
                          error_code, target, http_status, response_snippet, duration_ms,
                          next_attempt_at)
    SELECT h.id, h.attempts, h.trigger, h.leased_by, h.leased_at, now(),
           done.s_outcome, done.s_error, done.s_target, done.s_http_status, done.s_snippet,
           done.s_duration_ms,
           CASE WHEN done.s_state = 'accepted' THEN now() + make_interval(secs => done.s_delay) END
    FROM done JOIN held h ON h.id = done.id
),
waiting AS (
    SELECT id, next_attempt_at AS due_at, false AS lapsed FROM jobs j
    WHERE state = 'accepted' AND next_attempt_at <= now() AND (j.id >= $2 OR j.id < $3)
      AND NOT (id = ANY(ARRAY(SELECT s_id FROM settle)))
      AND CASE WHEN j.order_key IS NULL THEN true ELSE (j.id < $4 AND NOT EXISTS (
          SELECT 1 FROM jobs e
          WHERE e.order_key = j.order_key AND e.id < j.id AND (e.id >= $2 OR e.id < $3)
            AND e.order_key IS NOT NULL AND e.state <> 'completed'
            AND (e.state <> 'failed' OR e.order_hold)
            AND NOT EXISTS (
                SELECT 1 FROM done WHERE done.id = e.id AND (done.s_state = 'completed'
                    OR (done.s_state = 'failed' AND NOT e.order_hold))))) END
    ORDER BY next_attempt_at LIMIT $5 FOR UPDATE SKIP LOCKED
),
lapsed AS (
    SELECT id, lease_expires_at AS due_at, true AS lapsed,
           attempts, trigger, leased_by, leased_at
    FROM jobs
    WHERE state = 'processing' AND lease_expires_at < now() AND attempts < max_attempts
      AND (id >= $2 OR id < $3)
      AND NOT (id = ANY(ARRAY(SELECT s_id FROM settle)))
    ORDER BY lease_expires_at LIMIT $5 FOR UPDATE SKIP LOCKED
),
picked AS (
    SELECT id, lapsed FROM (
        SELECT id, due_at, lapsed FROM waiting UNION ALL SELECT id, due_at, lapsed FROM lapsed
    ) AS due ORDER BY due_at LIMIT $5
),
claimed AS (
    UPDATE jobs j
    SET state = 'processing', attempts = attempts + 1, lease_token = $6,
        leased_by = $7, leased_at = now(), lease_expires_at = now() + make_interval(secs => $8),
        updated_at = now()
    WHERE j.id = ANY(ARRAY(SELECT id FROM picked)) AND (j.id >= $2 OR j.id < $3)
    RETURNING j.id, j.delivery_id, j.source, j.action, j.attempts, j.max_attempts, j.trigger
),
expired AS (
    INSERT INTO attempts (job_id, number, trigger, worker, started_at, ended_at, outcome,
                          error_code)
    SELECT l.id, l.attempts, l.trigger, l.leased_by, l.leased_at, now(), $9, $10
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

-- name: journal.by_event
-- params: $1 event_id, $2 source
SELECT id
FROM deliveries
WHERE event_id = $1 AND source IN (WITH RECURSIVE s(source) AS (
    SELECT (SELECT source FROM deliveries ORDER BY source LIMIT 1)
    UNION ALL
    SELECT (SELECT source FROM deliveries WHERE source > s.source ORDER BY source LIMIT 1)
    FROM s WHERE s.source IS NOT NULL
)
SELECT source FROM s WHERE source IS NOT NULL)
  AND (source = $2 OR $2 IS NULL)
ORDER BY first_seen_at, id;

-- name: journal.count_search
-- params: $1 type, $2 floor, $3 ceiling, $4 source, $5 status, $6 cap
SELECT count(*) FROM (
    SELECT 1 FROM deliveries d
    WHERE (lower(d.event_type) LIKE $1 ESCAPE '\' OR $1 IS NULL)
  AND (d.id >= $2 OR $2 IS NULL)
  AND (d.id < $3 OR $3 IS NULL)
  AND (d.source = $4 OR $4 IS NULL)
  AND (CASE
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default"
                 AND j.state = 'failed')
        THEN 'failed'
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default"
                 AND j.state = 'processing')
        THEN 'processing'
    WHEN NOT EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default"
                     AND j.state <> 'completed')
        THEN 'completed'
    ELSE 'accepted' END = $5 OR $5 IS NULL)
    LIMIT $6
) AS c;

-- name: journal.count_search_by_payload
-- params: $1 floor, $2 ceiling, $3 needle, $4 payload_path, $5 payload_value, $6 type, $7 source, $8 status, $9 cap
SELECT count(*) FROM (
    SELECT 1 FROM deliveries d
    WHERE d.id IN (SELECT p.delivery_id COLLATE "C" FROM payloads p WHERE p.delivery_id >= $1
         AND (p.delivery_id < $2 OR $2 IS NULL) AND position($3 IN p.body) > 0 AND hookinbox_payload_json(p.body) #> string_to_array($4, '.') = CAST($5 AS jsonb))
      AND (lower(d.event_type) LIKE $6 ESCAPE '\' OR $6 IS NULL)
  AND (d.id >= $1 OR $1 IS NULL)
  AND (d.id < $2 OR $2 IS NULL)
  AND (d.source = $7 OR $7 IS NULL)
  AND (CASE
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default"
                 AND j.state = 'failed')
        THEN 'failed'
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default"
                 AND j.state = 'processing')
        THEN 'processing'
    WHEN NOT EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default"
                     AND j.state <> 'completed')
        THEN 'completed'
    ELSE 'accepted' END = $8 OR $8 IS NULL)
    LIMIT $9
) AS c;

-- name: journal.count_search_by_ref
-- params: $1 ref, $2 type, $3 floor, $4 ceiling, $5 source, $6 status, $7 cap
SELECT count(*) FROM (
    SELECT 1 FROM deliveries d
    WHERE d.id IN (SELECT id FROM deliveries WHERE id = $1
         UNION ALL SELECT id FROM deliveries WHERE event_id = $1
             AND source IN (WITH RECURSIVE s(source) AS (
    SELECT (SELECT source FROM deliveries ORDER BY source LIMIT 1)
    UNION ALL
    SELECT (SELECT source FROM deliveries WHERE source > s.source ORDER BY source LIMIT 1)
    FROM s WHERE s.source IS NOT NULL
)
SELECT source FROM s WHERE source IS NOT NULL))
      AND (lower(d.event_type) LIKE $2 ESCAPE '\' OR $2 IS NULL)
  AND (d.id >= $3 OR $3 IS NULL)
  AND (d.id < $4 OR $4 IS NULL)
  AND (d.source = $5 OR $5 IS NULL)
  AND (CASE
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default"
                 AND j.state = 'failed')
        THEN 'failed'
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default"
                 AND j.state = 'processing')
        THEN 'processing'
    WHEN NOT EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default"
                     AND j.state <> 'completed')
        THEN 'completed'
    ELSE 'accepted' END = $6 OR $6 IS NULL)
    LIMIT $7
) AS c;

-- name: journal.count_search_by_ref_by_payload
-- params: $1 ref, $2 floor, $3 ceiling, $4 needle, $5 payload_path, $6 payload_value, $7 type, $8 source, $9 status, $10 cap
SELECT count(*) FROM (
    SELECT 1 FROM deliveries d
    WHERE d.id IN (SELECT id FROM deliveries WHERE id = $1
         UNION ALL SELECT id FROM deliveries WHERE event_id = $1
             AND source IN (WITH RECURSIVE s(source) AS (
    SELECT (SELECT source FROM deliveries ORDER BY source LIMIT 1)
    UNION ALL
    SELECT (SELECT source FROM deliveries WHERE source > s.source ORDER BY source LIMIT 1)
    FROM s WHERE s.source IS NOT NULL
)
SELECT source FROM s WHERE source IS NOT NULL))
      AND d.id IN (SELECT p.delivery_id COLLATE "C" FROM payloads p WHERE p.delivery_id >= $2
         AND (p.delivery_id < $3 OR $3 IS NULL) AND position($4 IN p.body) > 0 AND hookinbox_payload_json(p.body) #> string_to_array($5, '.') = CAST($6 AS jsonb))
      AND (lower(d.event_type) LIKE $7 ESCAPE '\' OR $7 IS NULL)
  AND (d.id >= $2 OR $2 IS NULL)
  AND (d.id < $3 OR $3 IS NULL)
  AND (d.source = $8 OR $8 IS NULL)
  AND (CASE
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default"
                 AND j.state = 'failed')
        THEN 'failed'
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default"
                 AND j.state = 'processing')
        THEN 'processing'
    WHEN NOT EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default"
                     AND j.state <> 'completed')
        THEN 'completed'
    ELSE 'accepted' END = $9 OR $9 IS NULL)
    LIMIT $10
) AS c;

-- name: journal.count_search_by_ref_failed
-- params: $1 ref, $2 type, $3 floor, $4 ceiling, $5 source, $6 status, $7 cap
SELECT count(*) FROM (
    SELECT 1 FROM deliveries d
    WHERE d.id IN (SELECT id FROM deliveries WHERE id = $1
         UNION ALL SELECT id FROM deliveries WHERE event_id = $1
             AND source IN (WITH RECURSIVE s(source) AS (
    SELECT (SELECT source FROM deliveries ORDER BY source LIMIT 1)
    UNION ALL
    SELECT (SELECT source FROM deliveries WHERE source > s.source ORDER BY source LIMIT 1)
    FROM s WHERE s.source IS NOT NULL
)
SELECT source FROM s WHERE source IS NOT NULL))
      AND d.id IN (SELECT delivery_id FROM jobs WHERE state = 'failed')
      AND (lower(d.event_type) LIKE $2 ESCAPE '\' OR $2 IS NULL)
  AND (d.id >= $3 OR $3 IS NULL)
  AND (d.id < $4 OR $4 IS NULL)
  AND (d.source = $5 OR $5 IS NULL)
  AND (CASE
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default"
                 AND j.state = 'failed')
        THEN 'failed'
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default"
                 AND j.state = 'processing')
        THEN 'processing'
    WHEN NOT EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default"
                     AND j.state <> 'completed')
        THEN 'completed'
    ELSE 'accepted' END = $6 OR $6 IS NULL)
    LIMIT $7
) AS c;

-- name: journal.count_search_by_ref_failed_by_payload
-- params: $1 ref, $2 floor, $3 ceiling, $4 needle, $5 payload_path, $6 payload_value, $7 type, $8 source, $9 status, $10 cap
SELECT count(*) FROM (
    SELECT 1 FROM deliveries d
    WHERE d.id IN (SELECT id FROM deliveries WHERE id = $1
         UNION ALL SELECT id FROM deliveries WHERE event_id = $1
             AND source IN (WITH RECURSIVE s(source) AS (
    SELECT (SELECT source FROM deliveries ORDER BY source LIMIT 1)
    UNION ALL
    SELECT (SELECT source FROM deliveries WHERE source > s.source ORDER BY source LIMIT 1)
    FROM s WHERE s.source IS NOT NULL
)
SELECT source FROM s WHERE source IS NOT NULL))
      AND d.id IN (SELECT delivery_id FROM jobs WHERE state = 'failed')
      AND d.id IN (SELECT p.delivery_id COLLATE "C" FROM payloads p WHERE p.delivery_id >= $2
         AND (p.delivery_id < $3 OR $3 IS NULL) AND position($4 IN p.body) > 0 AND hookinbox_payload_json(p.body) #> string_to_array($5, '.') = CAST($6 AS jsonb))
      AND (lower(d.event_type) LIKE $7 ESCAPE '\' OR $7 IS NULL)
  AND (d.id >= $2 OR $2 IS NULL)
  AND (d.id < $3 OR $3 IS NULL)
  AND (d.source = $8 OR $8 IS NULL)
  AND (CASE
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default"
                 AND j.state = 'failed')
        THEN 'failed'
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default"
                 AND j.state = 'processing')
        THEN 'processing'
    WHEN NOT EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default"
                     AND j.state <> 'completed')
        THEN 'completed'
    ELSE 'accepted' END = $9 OR $9 IS NULL)
    LIMIT $10
) AS c;

-- name: journal.count_search_by_ref_processing
-- params: $1 ref, $2 type, $3 floor, $4 ceiling, $5 source, $6 status, $7 cap
SELECT count(*) FROM (
    SELECT 1 FROM deliveries d
    WHERE d.id IN (SELECT id FROM deliveries WHERE id = $1
         UNION ALL SELECT id FROM deliveries WHERE event_id = $1
             AND source IN (WITH RECURSIVE s(source) AS (
    SELECT (SELECT source FROM deliveries ORDER BY source LIMIT 1)
    UNION ALL
    SELECT (SELECT source FROM deliveries WHERE source > s.source ORDER BY source LIMIT 1)
    FROM s WHERE s.source IS NOT NULL
)
SELECT source FROM s WHERE source IS NOT NULL))
      AND d.id IN (SELECT delivery_id FROM jobs WHERE state = 'processing')
      AND (lower(d.event_type) LIKE $2 ESCAPE '\' OR $2 IS NULL)
  AND (d.id >= $3 OR $3 IS NULL)
  AND (d.id < $4 OR $4 IS NULL)
  AND (d.source = $5 OR $5 IS NULL)
  AND (CASE
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default"
                 AND j.state = 'failed')
        THEN 'failed'
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default"
                 AND j.state = 'processing')
        THEN 'processing'
    WHEN NOT EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default"
                     AND j.state <> 'completed')
        THEN 'completed'
    ELSE 'accepted' END = $6 OR $6 IS NULL)
    LIMIT $7
) AS c;

-- name: journal.count_search_by_ref_processing_by_payload
-- params: $1 ref, $2 floor, $3 ceiling, $4 needle, $5 payload_path, $6 payload_value, $7 type, $8 source, $9 status, $10 cap
SELECT count(*) FROM (
    SELECT 1 FROM deliveries d
    WHERE d.id IN (SELECT id FROM deliveries WHERE id = $1
         UNION ALL SELECT id FROM deliveries WHERE event_id = $1
             AND source IN (WITH RECURSIVE s(source) AS (
    SELECT (SELECT source FROM deliveries ORDER BY source LIMIT 1)
    UNION ALL
    SELECT (SELECT source FROM deliveries WHERE source > s.source ORDER BY source LIMIT 1)
    FROM s WHERE s.source IS NOT NULL
)
SELECT source FROM s WHERE source IS NOT NULL))
      AND d.id IN (SELECT delivery_id FROM jobs WHERE state = 'processing')
      AND d.id IN (SELECT p.delivery_id COLLATE "C" FROM payloads p WHERE p.delivery_id >= $2
         AND (p.delivery_id < $3 OR $3 IS NULL) AND position($4 IN p.body) > 0 AND hookinbox_payload_json(p.body) #> string_to_array($5, '.') = CAST($6 AS jsonb))
      AND (lower(d.event_type) LIKE $7 ESCAPE '\' OR $7 IS NULL)
  AND (d.id >= $2 OR $2 IS NULL)
  AND (d.id < $3 OR $3 IS NULL)
  AND (d.source = $8 OR $8 IS NULL)
  AND (CASE
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default"
                 AND j.state = 'failed')
        THEN 'failed'
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default"
                 AND j.state = 'processing')
        THEN 'processing'
    WHEN NOT EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default"
                     AND j.state <> 'completed')
        THEN 'completed'
    ELSE 'accepted' END = $9 OR $9 IS NULL)
    LIMIT $10
) AS c;

-- name: journal.count_search_failed
-- params: $1 type, $2 floor, $3 ceiling, $4 source, $5 status, $6 cap
SELECT count(*) FROM (
    SELECT 1 FROM deliveries d
    WHERE d.id IN (SELECT delivery_id FROM jobs WHERE state = 'failed')
      AND (lower(d.event_type) LIKE $1 ESCAPE '\' OR $1 IS NULL)
  AND (d.id >= $2 OR $2 IS NULL)
  AND (d.id < $3 OR $3 IS NULL)
  AND (d.source = $4 OR $4 IS NULL)
  AND (CASE
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default"
                 AND j.state = 'failed')
        THEN 'failed'
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default"
                 AND j.state = 'processing')
        THEN 'processing'
    WHEN NOT EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default"
                     AND j.state <> 'completed')
        THEN 'completed'
    ELSE 'accepted' END = $5 OR $5 IS NULL)
    LIMIT $6
) AS c;

-- name: journal.count_search_failed_by_payload
-- params: $1 floor, $2 ceiling, $3 needle, $4 payload_path, $5 payload_value, $6 type, $7 source, $8 status, $9 cap
SELECT count(*) FROM (
    SELECT 1 FROM deliveries d
    WHERE d.id IN (SELECT delivery_id FROM jobs WHERE state = 'failed')
      AND d.id IN (SELECT p.delivery_id COLLATE "C" FROM payloads p WHERE p.delivery_id >= $1
         AND (p.delivery_id < $2 OR $2 IS NULL) AND position($3 IN p.body) > 0 AND hookinbox_payload_json(p.body) #> string_to_array($4, '.') = CAST($5 AS jsonb))
      AND (lower(d.event_type) LIKE $6 ESCAPE '\' OR $6 IS NULL)
  AND (d.id >= $1 OR $1 IS NULL)
  AND (d.id < $2 OR $2 IS NULL)
  AND (d.source = $7 OR $7 IS NULL)
  AND (CASE
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default"
                 AND j.state = 'failed')
        THEN 'failed'
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default"
                 AND j.state = 'processing')
        THEN 'processing'
    WHEN NOT EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default"
                     AND j.state <> 'completed')
        THEN 'completed'
    ELSE 'accepted' END = $8 OR $8 IS NULL)
    LIMIT $9
) AS c;

-- name: journal.count_search_processing
-- params: $1 type, $2 floor, $3 ceiling, $4 source, $5 status, $6 cap
SELECT count(*) FROM (
    SELECT 1 FROM deliveries d
    WHERE d.id IN (SELECT delivery_id FROM jobs WHERE state = 'processing')
      AND (lower(d.event_type) LIKE $1 ESCAPE '\' OR $1 IS NULL)
  AND (d.id >= $2 OR $2 IS NULL)
  AND (d.id < $3 OR $3 IS NULL)
  AND (d.source = $4 OR $4 IS NULL)
  AND (CASE
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default"
                 AND j.state = 'failed')
        THEN 'failed'
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default"
                 AND j.state = 'processing')
        THEN 'processing'
    WHEN NOT EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default"
                     AND j.state <> 'completed')
        THEN 'completed'
    ELSE 'accepted' END = $5 OR $5 IS NULL)
    LIMIT $6
) AS c;

-- name: journal.count_search_processing_by_payload
-- params: $1 floor, $2 ceiling, $3 needle, $4 payload_path, $5 payload_value, $6 type, $7 source, $8 status, $9 cap
SELECT count(*) FROM (
    SELECT 1 FROM deliveries d
    WHERE d.id IN (SELECT delivery_id FROM jobs WHERE state = 'processing')
      AND d.id IN (SELECT p.delivery_id COLLATE "C" FROM payloads p WHERE p.delivery_id >= $1
         AND (p.delivery_id < $2 OR $2 IS NULL) AND position($3 IN p.body) > 0 AND hookinbox_payload_json(p.body) #> string_to_array($4, '.') = CAST($5 AS jsonb))
      AND (lower(d.event_type) LIKE $6 ESCAPE '\' OR $6 IS NULL)
  AND (d.id >= $1 OR $1 IS NULL)
  AND (d.id < $2 OR $2 IS NULL)
  AND (d.source = $7 OR $7 IS NULL)
  AND (CASE
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default"
                 AND j.state = 'failed')
        THEN 'failed'
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default"
                 AND j.state = 'processing')
        THEN 'processing'
    WHEN NOT EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default"
                     AND j.state <> 'completed')
        THEN 'completed'
    ELSE 'accepted' END = $8 OR $8 IS NULL)
    LIMIT $9
) AS c;

-- name: journal.get
-- params: $1 ref, $2 source
SELECT d.id, d.source, d.event_id, d.event_type, d.body_sha256, d.first_seen_at, d.last_seen_at,
d.delivery_count, d.conflicts, d.origin,
EXISTS (SELECT 1 FROM payloads p WHERE p.delivery_id = d.id COLLATE "default") AS payload_retained
FROM deliveries d
WHERE d.id IN (SELECT id FROM deliveries WHERE id = $1
               UNION ALL SELECT id FROM deliveries WHERE event_id = $1
                   AND source IN (WITH RECURSIVE s(source) AS (
    SELECT (SELECT source FROM deliveries ORDER BY source LIMIT 1)
    UNION ALL
    SELECT (SELECT source FROM deliveries WHERE source > s.source ORDER BY source LIMIT 1)
    FROM s WHERE s.source IS NOT NULL
)
SELECT source FROM s WHERE source IS NOT NULL) AND (source = $2 OR $2 IS NULL))
ORDER BY (d.id = $1) DESC, d.first_seen_at DESC
LIMIT 1;

-- name: journal.jobs_of
-- params: $1 id
SELECT id, action, state, attempts, max_attempts, last_error, next_attempt_at,
       lease_expires_at, business_id, created_at, updated_at
FROM jobs j
WHERE j.delivery_id = $1 COLLATE "default" AND j.id >= $1 COLLATE "default" AND j.id < hookinbox_id_after($1) COLLATE "default"
ORDER BY action;

-- name: journal.list
-- params: $1 source, $2 before, $3 status, $4 limit
SELECT d.id, d.source, d.event_id, d.event_type, d.body_sha256, d.first_seen_at, d.last_seen_at,
d.delivery_count, d.conflicts, d.origin,
EXISTS (SELECT 1 FROM payloads p WHERE p.delivery_id = d.id COLLATE "default") AS payload_retained, (SELECT string_agg(j.state, ',' ORDER BY j.action) FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default") AS states
FROM deliveries d
WHERE (d.source = $1 OR $1 IS NULL)
  AND (d.id < $2 OR $2 IS NULL)
  AND (CASE
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default"
                 AND j.state = 'failed')
        THEN 'failed'
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default"
                 AND j.state = 'processing')
        THEN 'processing'
    WHEN NOT EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default"
                     AND j.state <> 'completed')
        THEN 'completed'
    ELSE 'accepted' END = $3 OR $3 IS NULL)
ORDER BY d.id DESC
LIMIT $4;

-- name: journal.payload
-- params: $1 id
SELECT body FROM payloads WHERE delivery_id = $1;

-- name: journal.payload_walk
-- params: $1 floor, $2 ceiling, $3 before, $4 ref, $5 type, $6 source, $7 status, $8 limit
SELECT d.id, d.source, d.event_id, d.event_type, d.body_sha256, d.first_seen_at, d.last_seen_at,
d.delivery_count, d.conflicts, d.origin,
EXISTS (SELECT 1 FROM payloads p WHERE p.delivery_id = d.id COLLATE "default") AS payload_retained, (SELECT string_agg(j.state, ',' ORDER BY j.action) FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default") AS states, p.body AS body
FROM payloads p JOIN deliveries d ON d.id = p.delivery_id
WHERE p.delivery_id >= $1 AND (p.delivery_id < $2 OR $2 IS NULL)
  AND (p.delivery_id < $3 OR $3 IS NULL)
  AND (d.id = $4 OR d.event_id = $4 OR $4 IS NULL)
  AND (lower(d.event_type) LIKE $5 ESCAPE '\' OR $5 IS NULL)
  AND (d.id >= $1 OR $1 IS NULL)
  AND (d.id < $2 OR $2 IS NULL)
  AND (d.source = $6 OR $6 IS NULL)
  AND (CASE
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default"
                 AND j.state = 'failed')
        THEN 'failed'
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default"
                 AND j.state = 'processing')
        THEN 'processing'
    WHEN NOT EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default"
                     AND j.state <> 'completed')
        THEN 'completed'
    ELSE 'accepted' END = $7 OR $7 IS NULL)
ORDER BY p.delivery_id DESC
LIMIT $8;

-- name: journal.search
-- params: $1 type, $2 floor, $3 ceiling, $4 source, $5 status, $6 before, $7 limit
SELECT d.id, d.source, d.event_id, d.event_type, d.body_sha256, d.first_seen_at, d.last_seen_at,
d.delivery_count, d.conflicts, d.origin,
EXISTS (SELECT 1 FROM payloads p WHERE p.delivery_id = d.id COLLATE "default") AS payload_retained, (SELECT string_agg(j.state, ',' ORDER BY j.action) FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default") AS states
FROM deliveries d
WHERE (lower(d.event_type) LIKE $1 ESCAPE '\' OR $1 IS NULL)
  AND (d.id >= $2 OR $2 IS NULL)
  AND (d.id < $3 OR $3 IS NULL)
  AND (d.source = $4 OR $4 IS NULL)
  AND (CASE
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default"
                 AND j.state = 'failed')
        THEN 'failed'
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default"
                 AND j.state = 'processing')
        THEN 'processing'
    WHEN NOT EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default"
                     AND j.state <> 'completed')
        THEN 'completed'
    ELSE 'accepted' END = $5 OR $5 IS NULL)
  AND (d.id < $6 OR $6 IS NULL)
ORDER BY d.id DESC
LIMIT $7;

-- name: journal.search_by_payload
-- params: $1 floor, $2 ceiling, $3 needle, $4 payload_path, $5 payload_value, $6 type, $7 source, $8 status, $9 before, $10 limit
SELECT d.id, d.source, d.event_id, d.event_type, d.body_sha256, d.first_seen_at, d.last_seen_at,
d.delivery_count, d.conflicts, d.origin,
EXISTS (SELECT 1 FROM payloads p WHERE p.delivery_id = d.id COLLATE "default") AS payload_retained, (SELECT string_agg(j.state, ',' ORDER BY j.action) FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default") AS states
FROM deliveries d
WHERE d.id = ANY(ARRAY(SELECT p.delivery_id COLLATE "C" FROM payloads p WHERE p.delivery_id >= $1
         AND (p.delivery_id < $2 OR $2 IS NULL) AND position($3 IN p.body) > 0 AND hookinbox_payload_json(p.body) #> string_to_array($4, '.') = CAST($5 AS jsonb)))
  AND (lower(d.event_type) LIKE $6 ESCAPE '\' OR $6 IS NULL)
  AND (d.id >= $1 OR $1 IS NULL)
  AND (d.id < $2 OR $2 IS NULL)
  AND (d.source = $7 OR $7 IS NULL)
  AND (CASE
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default"
                 AND j.state = 'failed')
        THEN 'failed'
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default"
                 AND j.state = 'processing')
        THEN 'processing'
    WHEN NOT EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default"
                     AND j.state <> 'completed')
        THEN 'completed'
    ELSE 'accepted' END = $8 OR $8 IS NULL)
  AND (d.id < $9 OR $9 IS NULL)
ORDER BY d.id DESC
LIMIT $10;

-- name: journal.search_by_ref
-- params: $1 ref, $2 type, $3 floor, $4 ceiling, $5 source, $6 status, $7 before, $8 limit
SELECT d.id, d.source, d.event_id, d.event_type, d.body_sha256, d.first_seen_at, d.last_seen_at,
d.delivery_count, d.conflicts, d.origin,
EXISTS (SELECT 1 FROM payloads p WHERE p.delivery_id = d.id COLLATE "default") AS payload_retained, (SELECT string_agg(j.state, ',' ORDER BY j.action) FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default") AS states
FROM deliveries d
WHERE d.id IN (SELECT id FROM deliveries WHERE id = $1
         UNION ALL SELECT id FROM deliveries WHERE event_id = $1
             AND source IN (WITH RECURSIVE s(source) AS (
    SELECT (SELECT source FROM deliveries ORDER BY source LIMIT 1)
    UNION ALL
    SELECT (SELECT source FROM deliveries WHERE source > s.source ORDER BY source LIMIT 1)
    FROM s WHERE s.source IS NOT NULL
)
SELECT source FROM s WHERE source IS NOT NULL))
  AND (lower(d.event_type) LIKE $2 ESCAPE '\' OR $2 IS NULL)
  AND (d.id >= $3 OR $3 IS NULL)
  AND (d.id < $4 OR $4 IS NULL)
  AND (d.source = $5 OR $5 IS NULL)
  AND (CASE
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default"
                 AND j.state = 'failed')
        THEN 'failed'
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default"
                 AND j.state = 'processing')
        THEN 'processing'
    WHEN NOT EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default"
                     AND j.state <> 'completed')
        THEN 'completed'
    ELSE 'accepted' END = $6 OR $6 IS NULL)
  AND (d.id < $7 OR $7 IS NULL)
ORDER BY d.id DESC
LIMIT $8;

-- name: journal.search_by_ref_by_payload
-- params: $1 ref, $2 floor, $3 ceiling, $4 needle, $5 payload_path, $6 payload_value, $7 type, $8 source, $9 status, $10 before, $11 limit
SELECT d.id, d.source, d.event_id, d.event_type, d.body_sha256, d.first_seen_at, d.last_seen_at,
d.delivery_count, d.conflicts, d.origin,
EXISTS (SELECT 1 FROM payloads p WHERE p.delivery_id = d.id COLLATE "default") AS payload_retained, (SELECT string_agg(j.state, ',' ORDER BY j.action) FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default") AS states
FROM deliveries d
WHERE d.id IN (SELECT id FROM deliveries WHERE id = $1
         UNION ALL SELECT id FROM deliveries WHERE event_id = $1
             AND source IN (WITH RECURSIVE s(source) AS (
    SELECT (SELECT source FROM deliveries ORDER BY source LIMIT 1)
    UNION ALL
    SELECT (SELECT source FROM deliveries WHERE source > s.source ORDER BY source LIMIT 1)
    FROM s WHERE s.source IS NOT NULL
)
SELECT source FROM s WHERE source IS NOT NULL))
  AND d.id = ANY(ARRAY(SELECT p.delivery_id COLLATE "C" FROM payloads p WHERE p.delivery_id >= $2
         AND (p.delivery_id < $3 OR $3 IS NULL) AND position($4 IN p.body) > 0 AND hookinbox_payload_json(p.body) #> string_to_array($5, '.') = CAST($6 AS jsonb)))
  AND (lower(d.event_type) LIKE $7 ESCAPE '\' OR $7 IS NULL)
  AND (d.id >= $2 OR $2 IS NULL)
  AND (d.id < $3 OR $3 IS NULL)
  AND (d.source = $8 OR $8 IS NULL)
  AND (CASE
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default"
                 AND j.state = 'failed')
        THEN 'failed'
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default"
                 AND j.state = 'processing')
        THEN 'processing'
    WHEN NOT EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default"
                     AND j.state <> 'completed')
        THEN 'completed'
    ELSE 'accepted' END = $9 OR $9 IS NULL)
  AND (d.id < $10 OR $10 IS NULL)
ORDER BY d.id DESC
LIMIT $11;

-- name: journal.search_by_ref_failed
-- params: $1 ref, $2 type, $3 floor, $4 ceiling, $5 source, $6 status, $7 before, $8 limit
SELECT d.id, d.source, d.event_id, d.event_type, d.body_sha256, d.first_seen_at, d.last_seen_at,
d.delivery_count, d.conflicts, d.origin,
EXISTS (SELECT 1 FROM payloads p WHERE p.delivery_id = d.id COLLATE "default") AS payload_retained, (SELECT string_agg(j.state, ',' ORDER BY j.action) FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default") AS states
FROM deliveries d
WHERE d.id IN (SELECT id FROM deliveries WHERE id = $1
         UNION ALL SELECT id FROM deliveries WHERE event_id = $1
             AND source IN (WITH RECURSIVE s(source) AS (
    SELECT (SELECT source FROM deliveries ORDER BY source LIMIT 1)
    UNION ALL
    SELECT (SELECT source FROM deliveries WHERE source > s.source ORDER BY source LIMIT 1)
    FROM s WHERE s.source IS NOT NULL
)
SELECT source FROM s WHERE source IS NOT NULL))
  AND d.id IN (SELECT delivery_id FROM jobs WHERE state = 'failed')
  AND (lower(d.event_type) LIKE $2 ESCAPE '\' OR $2 IS NULL)
  AND (d.id >= $3 OR $3 IS NULL)
  AND (d.id < $4 OR $4 IS NULL)
  AND (d.source = $5 OR $5 IS NULL)
  AND (CASE
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default"
                 AND j.state = 'failed')
        THEN 'failed'
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default"
                 AND j.state = 'processing')
        THEN 'processing'
    WHEN NOT EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default"
                     AND j.state <> 'completed')
        THEN 'completed'
    ELSE 'accepted' END = $6 OR $6 IS NULL)
  AND (d.id < $7 OR $7 IS NULL)
ORDER BY d.id DESC
LIMIT $8;

-- name: journal.search_by_ref_failed_by_payload
-- params: $1 ref, $2 floor, $3 ceiling, $4 needle, $5 payload_path, $6 payload_value, $7 type, $8 source, $9 status, $10 before, $11 limit
SELECT d.id, d.source, d.event_id, d.event_type, d.body_sha256, d.first_seen_at, d.last_seen_at,
d.delivery_count, d.conflicts, d.origin,
EXISTS (SELECT 1 FROM payloads p WHERE p.delivery_id = d.id COLLATE "default") AS payload_retained, (SELECT string_agg(j.state, ',' ORDER BY j.action) FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default") AS states
FROM deliveries d
WHERE d.id IN (SELECT id FROM deliveries WHERE id = $1
         UNION ALL SELECT id FROM deliveries WHERE event_id = $1
             AND source IN (WITH RECURSIVE s(source) AS (
    SELECT (SELECT source FROM deliveries ORDER BY source LIMIT 1)
    UNION ALL
    SELECT (SELECT source FROM deliveries WHERE source > s.source ORDER BY source LIMIT 1)
    FROM s WHERE s.source IS NOT NULL
)
SELECT source FROM s WHERE source IS NOT NULL))
  AND d.id IN (SELECT delivery_id FROM jobs WHERE state = 'failed')
  AND d.id = ANY(ARRAY(SELECT p.delivery_id COLLATE "C" FROM payloads p WHERE p.delivery_id >= $2
         AND (p.delivery_id < $3 OR $3 IS NULL) AND position($4 IN p.body) > 0 AND hookinbox_payload_json(p.body) #> string_to_array($5, '.') = CAST($6 AS jsonb)))
  AND (lower(d.event_type) LIKE $7 ESCAPE '\' OR $7 IS NULL)
  AND (d.id >= $2 OR $2 IS NULL)
  AND (d.id < $3 OR $3 IS NULL)
  AND (d.source = $8 OR $8 IS NULL)
  AND (CASE
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default"
                 AND j.state = 'failed')
        THEN 'failed'
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default"
                 AND j.state = 'processing')
        THEN 'processing'
    WHEN NOT EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default"
                     AND j.state <> 'completed')
        THEN 'completed'
    ELSE 'accepted' END = $9 OR $9 IS NULL)
  AND (d.id < $10 OR $10 IS NULL)
ORDER BY d.id DESC
LIMIT $11;

-- name: journal.search_by_ref_processing
-- params: $1 ref, $2 type, $3 floor, $4 ceiling, $5 source, $6 status, $7 before, $8 limit
SELECT d.id, d.source, d.event_id, d.event_type, d.body_sha256, d.first_seen_at, d.last_seen_at,
d.delivery_count, d.conflicts, d.origin,
EXISTS (SELECT 1 FROM payloads p WHERE p.delivery_id = d.id COLLATE "default") AS payload_retained, (SELECT string_agg(j.state, ',' ORDER BY j.action) FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default") AS states
FROM deliveries d
WHERE d.id IN (SELECT id FROM deliveries WHERE id = $1
         UNION ALL SELECT id FROM deliveries WHERE event_id = $1
             AND source IN (WITH RECURSIVE s(source) AS (
    SELECT (SELECT source FROM deliveries ORDER BY source LIMIT 1)
    UNION ALL
    SELECT (SELECT source FROM deliveries WHERE source > s.source ORDER BY source LIMIT 1)
    FROM s WHERE s.source IS NOT NULL
)
SELECT source FROM s WHERE source IS NOT NULL))
  AND d.id IN (SELECT delivery_id FROM jobs WHERE state = 'processing')
  AND (lower(d.event_type) LIKE $2 ESCAPE '\' OR $2 IS NULL)
  AND (d.id >= $3 OR $3 IS NULL)
  AND (d.id < $4 OR $4 IS NULL)
  AND (d.source = $5 OR $5 IS NULL)
  AND (CASE
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default"
                 AND j.state = 'failed')
        THEN 'failed'
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default"
                 AND j.state = 'processing')
        THEN 'processing'
    WHEN NOT EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default"
                     AND j.state <> 'completed')
        THEN 'completed'
    ELSE 'accepted' END = $6 OR $6 IS NULL)
  AND (d.id < $7 OR $7 IS NULL)
ORDER BY d.id DESC
LIMIT $8;

-- name: journal.search_by_ref_processing_by_payload
-- params: $1 ref, $2 floor, $3 ceiling, $4 needle, $5 payload_path, $6 payload_value, $7 type, $8 source, $9 status, $10 before, $11 limit
SELECT d.id, d.source, d.event_id, d.event_type, d.body_sha256, d.first_seen_at, d.last_seen_at,
d.delivery_count, d.conflicts, d.origin,
EXISTS (SELECT 1 FROM payloads p WHERE p.delivery_id = d.id COLLATE "default") AS payload_retained, (SELECT string_agg(j.state, ',' ORDER BY j.action) FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default") AS states
FROM deliveries d
WHERE d.id IN (SELECT id FROM deliveries WHERE id = $1
         UNION ALL SELECT id FROM deliveries WHERE event_id = $1
             AND source IN (WITH RECURSIVE s(source) AS (
    SELECT (SELECT source FROM deliveries ORDER BY source LIMIT 1)
    UNION ALL
    SELECT (SELECT source FROM deliveries WHERE source > s.source ORDER BY source LIMIT 1)
    FROM s WHERE s.source IS NOT NULL
)
SELECT source FROM s WHERE source IS NOT NULL))
  AND d.id IN (SELECT delivery_id FROM jobs WHERE state = 'processing')
  AND d.id = ANY(ARRAY(SELECT p.delivery_id COLLATE "C" FROM payloads p WHERE p.delivery_id >= $2
         AND (p.delivery_id < $3 OR $3 IS NULL) AND position($4 IN p.body) > 0 AND hookinbox_payload_json(p.body) #> string_to_array($5, '.') = CAST($6 AS jsonb)))
  AND (lower(d.event_type) LIKE $7 ESCAPE '\' OR $7 IS NULL)
  AND (d.id >= $2 OR $2 IS NULL)
  AND (d.id < $3 OR $3 IS NULL)
  AND (d.source = $8 OR $8 IS NULL)
  AND (CASE
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default"
                 AND j.state = 'failed')
        THEN 'failed'
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default"
                 AND j.state = 'processing')
        THEN 'processing'
    WHEN NOT EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default"
                     AND j.state <> 'completed')
        THEN 'completed'
    ELSE 'accepted' END = $9 OR $9 IS NULL)
  AND (d.id < $10 OR $10 IS NULL)
ORDER BY d.id DESC
LIMIT $11;

-- name: journal.search_failed
-- params: $1 type, $2 floor, $3 ceiling, $4 source, $5 status, $6 before, $7 limit
SELECT d.id, d.source, d.event_id, d.event_type, d.body_sha256, d.first_seen_at, d.last_seen_at,
d.delivery_count, d.conflicts, d.origin,
EXISTS (SELECT 1 FROM payloads p WHERE p.delivery_id = d.id COLLATE "default") AS payload_retained, (SELECT string_agg(j.state, ',' ORDER BY j.action) FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default") AS states
FROM deliveries d
WHERE d.id IN (SELECT delivery_id FROM jobs WHERE state = 'failed')
  AND (lower(d.event_type) LIKE $1 ESCAPE '\' OR $1 IS NULL)
  AND (d.id >= $2 OR $2 IS NULL)
  AND (d.id < $3 OR $3 IS NULL)
  AND (d.source = $4 OR $4 IS NULL)
  AND (CASE
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default"
                 AND j.state = 'failed')
        THEN 'failed'
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default"
                 AND j.state = 'processing')
        THEN 'processing'
    WHEN NOT EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default"
                     AND j.state <> 'completed')
        THEN 'completed'
    ELSE 'accepted' END = $5 OR $5 IS NULL)
  AND (d.id < $6 OR $6 IS NULL)
ORDER BY d.id DESC
LIMIT $7;

-- name: journal.search_failed_by_payload
-- params: $1 floor, $2 ceiling, $3 needle, $4 payload_path, $5 payload_value, $6 type, $7 source, $8 status, $9 before, $10 limit
SELECT d.id, d.source, d.event_id, d.event_type, d.body_sha256, d.first_seen_at, d.last_seen_at,
d.delivery_count, d.conflicts, d.origin,
EXISTS (SELECT 1 FROM payloads p WHERE p.delivery_id = d.id COLLATE "default") AS payload_retained, (SELECT string_agg(j.state, ',' ORDER BY j.action) FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default") AS states
FROM deliveries d
WHERE d.id IN (SELECT delivery_id FROM jobs WHERE state = 'failed')
  AND d.id = ANY(ARRAY(SELECT p.delivery_id COLLATE "C" FROM payloads p WHERE p.delivery_id >= $1
         AND (p.delivery_id < $2 OR $2 IS NULL) AND position($3 IN p.body) > 0 AND hookinbox_payload_json(p.body) #> string_to_array($4, '.') = CAST($5 AS jsonb)))
  AND (lower(d.event_type) LIKE $6 ESCAPE '\' OR $6 IS NULL)
  AND (d.id >= $1 OR $1 IS NULL)
  AND (d.id < $2 OR $2 IS NULL)
  AND (d.source = $7 OR $7 IS NULL)
  AND (CASE
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default"
                 AND j.state = 'failed')
        THEN 'failed'
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default"
                 AND j.state = 'processing')
        THEN 'processing'
    WHEN NOT EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default"
                     AND j.state <> 'completed')
        THEN 'completed'
    ELSE 'accepted' END = $8 OR $8 IS NULL)
  AND (d.id < $9 OR $9 IS NULL)
ORDER BY d.id DESC
LIMIT $10;

-- name: journal.search_processing
-- params: $1 type, $2 floor, $3 ceiling, $4 source, $5 status, $6 before, $7 limit
SELECT d.id, d.source, d.event_id, d.event_type, d.body_sha256, d.first_seen_at, d.last_seen_at,
d.delivery_count, d.conflicts, d.origin,
EXISTS (SELECT 1 FROM payloads p WHERE p.delivery_id = d.id COLLATE "default") AS payload_retained, (SELECT string_agg(j.state, ',' ORDER BY j.action) FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default") AS states
FROM deliveries d
WHERE d.id IN (SELECT delivery_id FROM jobs WHERE state = 'processing')
  AND (lower(d.event_type) LIKE $1 ESCAPE '\' OR $1 IS NULL)
  AND (d.id >= $2 OR $2 IS NULL)
  AND (d.id < $3 OR $3 IS NULL)
  AND (d.source = $4 OR $4 IS NULL)
  AND (CASE
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default"
                 AND j.state = 'failed')
        THEN 'failed'
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default"
                 AND j.state = 'processing')
        THEN 'processing'
    WHEN NOT EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default"
                     AND j.state <> 'completed')
        THEN 'completed'
    ELSE 'accepted' END = $5 OR $5 IS NULL)
  AND (d.id < $6 OR $6 IS NULL)
ORDER BY d.id DESC
LIMIT $7;

-- name: journal.search_processing_by_payload
-- params: $1 floor, $2 ceiling, $3 needle, $4 payload_path, $5 payload_value, $6 type, $7 source, $8 status, $9 before, $10 limit
SELECT d.id, d.source, d.event_id, d.event_type, d.body_sha256, d.first_seen_at, d.last_seen_at,
d.delivery_count, d.conflicts, d.origin,
EXISTS (SELECT 1 FROM payloads p WHERE p.delivery_id = d.id COLLATE "default") AS payload_retained, (SELECT string_agg(j.state, ',' ORDER BY j.action) FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default") AS states
FROM deliveries d
WHERE d.id IN (SELECT delivery_id FROM jobs WHERE state = 'processing')
  AND d.id = ANY(ARRAY(SELECT p.delivery_id COLLATE "C" FROM payloads p WHERE p.delivery_id >= $1
         AND (p.delivery_id < $2 OR $2 IS NULL) AND position($3 IN p.body) > 0 AND hookinbox_payload_json(p.body) #> string_to_array($4, '.') = CAST($5 AS jsonb)))
  AND (lower(d.event_type) LIKE $6 ESCAPE '\' OR $6 IS NULL)
  AND (d.id >= $1 OR $1 IS NULL)
  AND (d.id < $2 OR $2 IS NULL)
  AND (d.source = $7 OR $7 IS NULL)
  AND (CASE
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default"
                 AND j.state = 'failed')
        THEN 'failed'
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default"
                 AND j.state = 'processing')
        THEN 'processing'
    WHEN NOT EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default"
                     AND j.state <> 'completed')
        THEN 'completed'
    ELSE 'accepted' END = $8 OR $8 IS NULL)
  AND (d.id < $9 OR $9 IS NULL)
ORDER BY d.id DESC
LIMIT $10;

-- name: journal.stored
-- params: $1 id
SELECT body, headers FROM payloads WHERE delivery_id = $1;

-- The searches: one statement per choice of filters (by reference, by a rare status, by
-- payload), so a search by id or by a rare status walks an index instead of the journal;
-- count_* counts up to :cap what the search of the same name finds.;

-- name: notices.circuits
-- params: $1 lookback, $2 limit
SELECT '' AS source, name AS subject, 'consecutive_failures' AS reason, (extract(epoch FROM date_trunc('minute', last_opened_at)) / 60)::bigint
    AS minute, 1 AS n, NULL AS actor
FROM destinations
WHERE last_opened_at > now() - make_interval(secs => $1)
ORDER BY minute
LIMIT $2;

-- name: notices.dead_letters
-- params: $1 lookback, $2 limit
SELECT source, action AS subject, coalesce(last_error, '') AS reason, (extract(epoch FROM date_trunc('minute', failed_at)) / 60)::bigint AS
    minute, count(*) AS n, NULL AS actor
FROM jobs
WHERE state = 'failed'
  AND failed_at > now() - make_interval(secs => $1)
GROUP BY source, action, last_error, (extract(epoch FROM date_trunc('minute', failed_at)) / 60)::bigint
ORDER BY minute
LIMIT $2;

-- name: notices.exists
-- params: $1 key
SELECT count(*)
FROM outbox
WHERE key = $1;

-- name: notices.insert
-- params: $1 key, $2 kind, $3 source, $4 body
INSERT INTO outbox (key, kind, source, resource_id, body, next_attempt_at, created_at, updated_at)
VALUES ($1, $2, $3, NULL, $4, now(), now(), now())
ON CONFLICT (key) DO NOTHING;

-- name: notices.pauses
-- params: $1 lookback, $2 limit
SELECT source, 'paused' AS subject, 'operator' AS reason, (extract(epoch FROM date_trunc('minute', at)) / 60)::bigint AS minute, count(*) AS n,
    max(actor) AS actor
FROM operator_actions
WHERE command = 'pause'
  AND source IS NOT NULL
  AND at > now() - make_interval(secs => $1)
GROUP BY source, (extract(epoch FROM date_trunc('minute', at)) / 60)::bigint
ORDER BY minute
LIMIT $2;

-- name: notices.rejected
-- params: $1 lookback, $2 limit
SELECT source, 'rejected' AS subject, reason, (extract(epoch FROM date_trunc('minute', last_seen_at)) / 60)::bigint AS minute, CAST(sum(seen) AS
    BIGINT) AS n, NULL AS actor
FROM rejected_deliveries
WHERE last_seen_at > now() - make_interval(secs => $1)
GROUP BY source, reason, (extract(epoch FROM date_trunc('minute', last_seen_at)) / 60)::bigint
ORDER BY minute
LIMIT $2;

-- name: notices.sent_last_hour
-- params: $1 kind, $2 hour
SELECT count(*)
FROM outbox
WHERE kind = $1
  AND created_at > now() - make_interval(secs => $2);

-- name: outbox.claim
-- params: $1 token, $2 worker, $3 lease, $4 max, $5 only_notices, $6 limit
UPDATE outbox
SET state = 'sending', attempts = attempts + 1, lease_token = $1, leased_by = $2,
    lease_expires_at = now() + make_interval(secs => $3), updated_at = now()
WHERE key IN (SELECT key FROM outbox WHERE ((state = 'pending' AND next_attempt_at <= now()) OR
    (state = 'sending' AND lease_expires_at < now() AND attempts < $4)) AND ($5 =
    FALSE OR kind LIKE 'notify:%') ORDER BY next_attempt_at LIMIT $6 FOR UPDATE SKIP LOCKED)
RETURNING key, kind, resource_id, body, attempts;

-- name: outbox.exhausted
-- params: $1 error, $2 max
UPDATE outbox
SET state = 'failed', last_error = $1, failed_at = now(), lease_token = NULL, leased_by =
    NULL, lease_expires_at = NULL, updated_at = now()
WHERE state = 'sending'
  AND lease_expires_at < now()
  AND attempts >= $2;

-- name: outbox.finish
-- params: $1 state, $2 error, $3 delay, $4 key, $5 token
UPDATE outbox
SET state = $1, last_error = coalesce($2, last_error), next_attempt_at = now() +
    make_interval(secs => $3), sent_at = CASE WHEN $1 = 'sent' THEN now() ELSE sent_at END, failed_at =
    CASE WHEN $1 = 'failed' THEN now() ELSE failed_at END, lease_token = NULL, leased_by =
    NULL, lease_expires_at = NULL, updated_at = now()
WHERE key = $4
  AND lease_token = $5
  AND state = 'sending';

-- name: outbox.get
-- params: $1 key
SELECT *
FROM outbox
WHERE key = $1;

-- name: outbox.list
-- params: $1 state, $2 kind, $3 limit
SELECT *
FROM outbox
WHERE (state = $1 OR $1 IS NULL)
  AND (kind = $2 OR $2 IS NULL)
ORDER BY created_at DESC, key
LIMIT $3;

-- name: outbox.renew
-- params: $1 lease, $2 key, $3 token
UPDATE outbox
SET lease_expires_at = now() + make_interval(secs => $1)
WHERE key = $2
  AND lease_token = $3
  AND state = 'sending';

-- name: outbox.requeue
-- params: $1 key
UPDATE outbox
SET state = 'pending', attempts = 0, next_attempt_at = now(), failed_at = NULL, updated_at = now()
WHERE key = $1
RETURNING *;

-- name: outbox.state
-- params: $1 key
SELECT state
FROM outbox
WHERE key = $1 FOR UPDATE;

-- name: partitions.count_overdue_payloads
-- params: $1 ceiling, $2 age
SELECT count(*)
FROM payloads p
WHERE p.delivery_id < $1
  AND (SELECT d.first_seen_at FROM deliveries d WHERE d.id = p.delivery_id COLLATE "C") < now()
    - make_interval(secs => $2)
  AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = p.delivery_id COLLATE "default" AND j.id >= p.delivery_id COLLATE "default" AND j.id < hookinbox_id_after(p.delivery_id) COLLATE "default" AND (j.state <>
      'completed' OR j.completed_at >= now() - make_interval(secs => $2)) OFFSET 0);

-- name: partitions.count_rows
-- params: $1 part
SELECT hookinbox_partition_rows($1);

-- name: partitions.create_ahead
-- params: $1 first, $2 last
SELECT hookinbox_payload_partitions_ahead($1::date, $2::date);

-- name: partitions.create_attempts_ahead
-- params: $1 first, $2 last
SELECT hookinbox_attempt_partitions_ahead($1::date, $2::date);

-- name: partitions.create_jobs_ahead
-- params: $1 first, $2 last
SELECT hookinbox_job_partitions_ahead($1::date, $2::date);

-- name: partitions.drop_retired_effects
-- params: $1 lo, $2 hi, $3 limit
DELETE FROM effects
WHERE key = ANY(ARRAY(
    SELECT e.key FROM effects e
    WHERE e.job_id >= $1 AND e.job_id < $2
      AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.id = e.job_id)
    LIMIT $3));

-- name: partitions.drop_retired_parked
-- params: $1 lo, $2 hi, $3 limit
DELETE FROM parked_events
WHERE job_id = ANY(ARRAY(
    SELECT p.job_id FROM parked_events p
    WHERE p.job_id >= $1 AND p.job_id < $2
      AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.id = p.job_id)
    LIMIT $3));

-- name: partitions.drop_retired_superseded
-- params: $1 lo, $2 hi, $3 limit
DELETE FROM effects_superseded
WHERE id = ANY(ARRAY(
    SELECT e.id FROM effects_superseded e
    WHERE e.job_id >= $1 AND e.job_id < $2
      AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.id = e.job_id)
    LIMIT $3));

-- name: partitions.has_attempt_partitions
SELECT to_regclass('attempts_default') IS NOT NULL;

-- name: partitions.has_job_partitions
SELECT to_regclass('jobs_default') IS NOT NULL;

-- name: partitions.has_partitions
SELECT to_regprocedure('hookinbox_payload_partitions_ahead(date, date, text)') IS NOT NULL;

-- name: partitions.held
-- params: $1 lo, $2 hi, $3 age
SELECT j.delivery_id AS id FROM jobs j
WHERE j.state = 'accepted' AND j.id >= $1 AND j.id < $2
  AND j.delivery_id >= $1 AND j.delivery_id < $2
UNION
SELECT j.delivery_id FROM jobs j
WHERE j.state = 'processing' AND j.id >= $1 AND j.id < $2
  AND j.delivery_id >= $1 AND j.delivery_id < $2
UNION
SELECT j.delivery_id FROM jobs j
WHERE j.state = 'failed' AND j.id >= $1 AND j.id < $2
  AND j.delivery_id >= $1 AND j.delivery_id < $2
UNION
SELECT j.delivery_id FROM jobs j
WHERE j.state = 'completed' AND j.completed_at >= now() - make_interval(secs => $3)
  AND j.id >= $1 AND j.id < $2 AND j.delivery_id >= $1 AND j.delivery_id < $2;

-- name: partitions.held_jobs
-- params: $1 lo, $2 hi
SELECT count(*) FROM (
    SELECT j.id FROM jobs j WHERE j.state = 'accepted' AND j.id >= $1 AND j.id < $2
    UNION ALL
    SELECT j.id FROM jobs j WHERE j.state = 'processing' AND j.id >= $1 AND j.id < $2
    UNION ALL
    SELECT j.id FROM jobs j WHERE j.state = 'failed' AND j.id >= $1 AND j.id < $2
) h;

-- name: partitions.listing
-- params: $1 parent
SELECT p.name, p.lo, p.hi, c.reltuples::bigint AS estimate
FROM hookinbox_partitions_of($1) p
JOIN pg_class c ON c.oid = to_regclass(p.name)
ORDER BY p.hi NULLS LAST;

-- name: partitions.overdue_payload_batch
-- params: $1 ceiling, $2 age, $3 limit
SELECT p.delivery_id AS id
FROM payloads p
WHERE p.delivery_id < $1
  AND (SELECT d.first_seen_at FROM deliveries d WHERE d.id = p.delivery_id COLLATE "C") < now()
    - make_interval(secs => $2)
  AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = p.delivery_id COLLATE "default" AND j.id >= p.delivery_id COLLATE "default" AND j.id < hookinbox_id_after(p.delivery_id) COLLATE "default" AND (j.state <>
      'completed' OR j.completed_at >= now() - make_interval(secs => $2)) OFFSET 0)
LIMIT $3 FOR UPDATE OF p SKIP LOCKED;

-- name: partitions.retirable
-- params: $1 parent, $2 age
SELECT p.name, coalesce(p.lo, '') AS lo, p.hi
FROM hookinbox_partitions_of($1) p
WHERE p.hi IS NOT NULL
  AND p.hi <= hookinbox_id_floor(now() - make_interval(secs => $2))
ORDER BY p.hi;

-- name: partitions.retire
-- params: $1 part, $2 held, $3 wait
SELECT moved, locked_ms
FROM hookinbox_retire_payload_partition($1, $2::text[], $3);

-- name: partitions.retire_attempts
-- params: $1 part, $2 wait
SELECT moved, locked_ms
FROM hookinbox_retire_attempt_partition($1, $2);

-- name: partitions.retire_jobs
-- params: $1 part, $2 wait
SELECT moved, locked_ms
FROM hookinbox_retire_job_partition($1, $2);

-- name: queue.attempts
-- params: $1 id
SELECT number, trigger, worker, started_at, ended_at, outcome, error_code, target, http_status,
    response_snippet, duration_ms, next_attempt_at
FROM ( SELECT 0 AS running, id AS seq, number, trigger, worker, started_at, ended_at, outcome,
    error_code, target, http_status, response_snippet, duration_ms, next_attempt_at FROM
    attempts WHERE job_id = $1 UNION ALL SELECT 1, 0, attempts, trigger, leased_by, leased_at,
    NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL FROM jobs WHERE id = $1 AND state =
    'processing') AS history
ORDER BY running, seq;

-- name: queue.count_dead
-- params: $1 source, $2 action, $3 reason, $4 since, $5 until
SELECT count(*)
FROM jobs j
WHERE j.state = 'failed'
  AND (j.source = $1 OR $1 IS NULL)
  AND (j.action = $2 OR $2 IS NULL)
  AND (j.last_error = $3 OR $3 IS NULL)
  AND (j.failed_at >= $4 OR $4 IS NULL)
  AND (j.failed_at < $5 OR $5 IS NULL);

-- name: queue.dead_letters_newest_failure
-- params: $1 source, $2 action, $3 reason, $4 since, $5 until, $6 before, $7 limit
SELECT j.id, j.delivery_id, j.source, j.action, j.state, j.attempts, j.max_attempts,
    j.last_error, j.trigger, d.event_id, d.event_type, j.business_id, EXISTS (SELECT 1 FROM
    payloads p WHERE p.delivery_id = j.delivery_id) AS payload_retained, j.created_at,
    j.updated_at, j.completed_at, j.failed_at, (SELECT min(a.ended_at) FROM attempts a WHERE
    a.job_id = j.id AND a.outcome <> 'completed') AS first_failed_at, j.lease_expires_at,
    (j.state = 'failed' AND j.order_key IS NOT NULL AND j.order_hold = TRUE) AS holds_key
FROM jobs j
JOIN deliveries d ON d.id = j.delivery_id
WHERE j.state = 'failed'
  AND (j.source = $1 OR $1 IS NULL)
  AND (j.action = $2 OR $2 IS NULL)
  AND (j.last_error = $3 OR $3 IS NULL)
  AND (j.failed_at >= $4 OR $4 IS NULL)
  AND (j.failed_at < $5 OR $5 IS NULL)
  AND ((j.failed_at, j.id) < (SELECT failed_at, id FROM jobs WHERE id = $6) OR $6 IS NULL)
ORDER BY j.failed_at DESC, j.id DESC
LIMIT $7;

-- name: queue.dead_letters_newest_job
-- params: $1 source, $2 action, $3 reason, $4 since, $5 until, $6 before, $7 limit
SELECT j.id, j.delivery_id, j.source, j.action, j.state, j.attempts, j.max_attempts,
    j.last_error, j.trigger, d.event_id, d.event_type, j.business_id, EXISTS (SELECT 1 FROM
    payloads p WHERE p.delivery_id = j.delivery_id) AS payload_retained, j.created_at,
    j.updated_at, j.completed_at, j.failed_at, (SELECT min(a.ended_at) FROM attempts a WHERE
    a.job_id = j.id AND a.outcome <> 'completed') AS first_failed_at, j.lease_expires_at,
    (j.state = 'failed' AND j.order_key IS NOT NULL AND j.order_hold = TRUE) AS holds_key
FROM jobs j
JOIN deliveries d ON d.id = j.delivery_id
WHERE j.state = 'failed'
  AND (j.source = $1 OR $1 IS NULL)
  AND (j.action = $2 OR $2 IS NULL)
  AND (j.last_error = $3 OR $3 IS NULL)
  AND (j.failed_at >= $4 OR $4 IS NULL)
  AND (j.failed_at < $5 OR $5 IS NULL)
  AND (j.id < $6 OR $6 IS NULL)
ORDER BY j.id DESC
LIMIT $7;

-- name: queue.dead_letters_oldest_failure
-- params: $1 source, $2 action, $3 reason, $4 since, $5 until, $6 before, $7 limit
SELECT j.id, j.delivery_id, j.source, j.action, j.state, j.attempts, j.max_attempts,
    j.last_error, j.trigger, d.event_id, d.event_type, j.business_id, EXISTS (SELECT 1 FROM
    payloads p WHERE p.delivery_id = j.delivery_id) AS payload_retained, j.created_at,
    j.updated_at, j.completed_at, j.failed_at, (SELECT min(a.ended_at) FROM attempts a WHERE
    a.job_id = j.id AND a.outcome <> 'completed') AS first_failed_at, j.lease_expires_at,
    (j.state = 'failed' AND j.order_key IS NOT NULL AND j.order_hold = TRUE) AS holds_key
FROM jobs j
JOIN deliveries d ON d.id = j.delivery_id
WHERE j.state = 'failed'
  AND (j.source = $1 OR $1 IS NULL)
  AND (j.action = $2 OR $2 IS NULL)
  AND (j.last_error = $3 OR $3 IS NULL)
  AND (j.failed_at >= $4 OR $4 IS NULL)
  AND (j.failed_at < $5 OR $5 IS NULL)
  AND ((j.failed_at, j.id) > (SELECT failed_at, id FROM jobs WHERE id = $6) OR $6 IS NULL)
ORDER BY j.failed_at, j.id
LIMIT $7;

-- name: queue.get_job
-- params: $1 id
SELECT j.id, j.delivery_id, j.source, j.action, j.state, j.attempts, j.max_attempts,
    j.last_error, j.trigger, d.event_id, d.event_type, j.business_id, EXISTS (SELECT 1 FROM
    payloads p WHERE p.delivery_id = j.delivery_id) AS payload_retained, j.created_at,
    j.updated_at, j.completed_at, j.failed_at, (SELECT min(a.ended_at) FROM attempts a WHERE
    a.job_id = j.id AND a.outcome <> 'completed') AS first_failed_at, j.lease_expires_at,
    (j.state = 'failed' AND j.order_key IS NOT NULL AND j.order_hold = TRUE) AS holds_key
FROM jobs j
JOIN deliveries d ON d.id = j.delivery_id
WHERE j.id = $1;

-- name: queue.renew_leases
-- params: $1 lease, $2 ids, $3 tokens
UPDATE jobs
SET lease_expires_at = now() + make_interval(secs => $1)
WHERE id = ANY($2)
  AND lease_token = ANY($3)
  AND state = 'processing'
RETURNING id;

-- name: queue.requeue
-- params: $1 more, $2 trigger, $3 ids, $4 states
UPDATE jobs
SET state = 'accepted', max_attempts = attempts + $1, next_attempt_at = now(), trigger =
    $2, last_error = NULL, completed_at = NULL, failed_at = NULL, lease_token = NULL,
    leased_by = NULL, lease_expires_at = NULL, updated_at = now()
WHERE id = ANY($3)
  AND state = ANY($4)
RETURNING id, source, delivery_id;

-- name: queue.target_deferrals
-- params: $1 id, $2 codes
SELECT count(*)
FROM attempts
WHERE job_id = $1
  AND outcome = 'deferred'
  AND error_code = ANY($2);

-- name: queue.waiting_behind
-- params: $1 id
SELECT h.id, h.delivery_id, h.state, h.attempts, h.max_attempts, h.last_error,
    (SELECT count(*) FROM jobs a WHERE a.order_key = j.order_key AND a.id < j.id
       AND a.order_key IS NOT NULL AND a.state <> 'completed'
       AND (a.state <> 'failed' OR a.order_hold = TRUE)) AS ahead
FROM jobs j
JOIN jobs h ON h.order_key = j.order_key AND h.id < j.id
WHERE j.id = $1
  AND j.state IN ('accepted', 'failed')
  AND h.order_key IS NOT NULL AND h.state <> 'completed'
  AND (h.state <> 'failed' OR h.order_hold = TRUE)
ORDER BY h.id
LIMIT 1;

-- name: reads.count_expired_leases
SELECT count(*)
FROM jobs
WHERE state = 'processing'
  AND lease_expires_at < now();

-- name: reads.count_failed_past_review
-- params: $1 age
SELECT count(*)
FROM jobs
WHERE state = 'failed'
  AND failed_at < now() - make_interval(secs => $1);

-- name: reads.count_held_keys
SELECT count(DISTINCT order_key)
FROM jobs
WHERE order_key IS NOT NULL AND state <> 'completed'
  AND state = 'failed' AND order_hold = TRUE;

-- name: reads.count_stale_accepted
-- params: $1 age
SELECT count(*)
FROM jobs
WHERE state = 'accepted'
  AND created_at < now() - make_interval(secs => $1);

-- name: reads.count_unrecorded_effects
-- params: $1 age
SELECT count(*)
FROM effects e
LEFT JOIN jobs j ON j.id = e.job_id
WHERE e.state = 'started'
  AND e.created_at < now() - make_interval(secs => $1)
  AND (j.state IS NULL OR j.state <> 'processing');

-- name: reads.count_unreviewed_transitions
-- params: $1 age
SELECT count(*)
FROM resource_transitions t
JOIN resources r ON r.id = t.resource_id
WHERE t.outcome = 'rejected'
  AND t.reviewed_at IS NULL
  AND t.created_at < now() - make_interval(secs => $1);

-- name: reads.dead
SELECT source, count(*) AS n
FROM jobs
WHERE state = 'failed'
GROUP BY source;

-- name: reads.failed_per_minute
-- params: $1 scan, $2 since
SELECT (extract(epoch FROM date_trunc('minute', ended_at)) / 60)::bigint AS minute, count(*) AS n
FROM attempts
WHERE id > (SELECT coalesce(max(id), 0) FROM attempts) - $1
  AND ended_at >= $2
  AND outcome IN ('retry', 'failed', 'lease_expired')
GROUP BY 1
ORDER BY 1;

-- name: reads.parked
SELECT source, count(*) AS n
FROM parked_events
GROUP BY source;

-- name: reads.paused
SELECT source, extract(epoch FROM now() - changed_at) AS seconds
FROM source_state
WHERE paused = TRUE;

-- name: reads.per_minute
-- params: $1 floor
SELECT source, (extract(epoch FROM date_trunc('minute', first_seen_at)) / 60)::bigint AS minute, count(*) AS n
FROM deliveries
WHERE id >= $1
GROUP BY 1, 2
ORDER BY 2;

-- name: reads.queue
SELECT source, count(*) AS depth, max(CASE WHEN state = 'accepted' AND next_attempt_at <= now()
    THEN extract(epoch FROM now() - next_attempt_at) ELSE 0 END) AS lag
FROM jobs
WHERE state IN ('accepted', 'processing')
GROUP BY source;

-- name: reads.reasons
SELECT source, action, coalesce(last_error, '') AS reason, count(*) AS n
FROM jobs
WHERE state = 'failed'
GROUP BY 1, 2, 3
ORDER BY n DESC, reason;

-- name: reads.sample_deliveries_without_jobs
-- params: $1 limit
SELECT min(d.id) AS id, min(d.id) AS delivery_id, d.source, d.event_type AS detail,
    min(d.first_seen_at) AS since, count(*) AS deliveries
FROM deliveries d
WHERE d.id IN (
    SELECT m.id FROM deliveries m
    WHERE NOT EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = m.id COLLATE "default")
      AND m.id >= hookinbox_jobs_kept_from() COLLATE "C")
GROUP BY d.source, d.event_type
ORDER BY d.source, d.event_type
LIMIT $1;

-- name: reads.sample_expired_leases
-- params: $1 limit
SELECT id, delivery_id, source, 'leased by ' || coalesce(leased_by, '?') || ', attempt ' ||
    attempts || '/' || max_attempts AS detail, lease_expires_at AS since
FROM jobs
WHERE state = 'processing'
  AND lease_expires_at < now()
ORDER BY lease_expires_at
LIMIT $1;

-- name: reads.sample_failed_past_review
-- params: $1 age, $2 limit
SELECT id, delivery_id, source, coalesce(last_error, '') AS detail, failed_at AS since
FROM jobs
WHERE state = 'failed'
  AND failed_at < now() - make_interval(secs => $1)
ORDER BY failed_at
LIMIT $2;

-- name: reads.sample_held_keys
-- params: $1 limit
SELECT j.id, j.delivery_id, j.source, 'holds its key (' || coalesce(j.last_error, '?') ||
    '): ' || CAST((SELECT count(*) FROM jobs w WHERE w.order_key = j.order_key
        AND w.id > j.id AND w.order_key IS NOT NULL AND w.state <> 'completed') AS text) ||
    ' waiting' AS detail, j.failed_at AS since
FROM jobs j
WHERE j.order_key IS NOT NULL AND j.state <> 'completed'
  AND j.state = 'failed' AND j.order_hold = TRUE
ORDER BY j.failed_at
LIMIT $1;

-- name: reads.sample_stale_accepted
-- params: $1 age, $2 limit
SELECT id, delivery_id, source, coalesce(last_error, 'never ran') AS detail, created_at AS since
FROM jobs
WHERE state = 'accepted'
  AND created_at < now() - make_interval(secs => $1)
ORDER BY created_at
LIMIT $2;

-- name: reads.sample_unrecorded_effects
-- params: $1 age, $2 limit
SELECT e.key AS id, j.delivery_id, j.source, 'job ' || coalesce(e.job_id, '?') || ' is ' ||
    coalesce(j.state, 'gone') AS detail, e.created_at AS since
FROM effects e
LEFT JOIN jobs j ON j.id = e.job_id
WHERE e.state = 'started'
  AND e.created_at < now() - make_interval(secs => $1)
  AND (j.state IS NULL OR j.state <> 'processing')
ORDER BY e.created_at
LIMIT $2;

-- name: reads.sample_unreviewed_transitions
-- params: $1 age, $2 limit
SELECT 'transition ' || CAST(t.id AS text) AS id, t.delivery_id, coalesce(t.source, r.kind) AS
    source, t.resource_id || ' ' || coalesce(t.from_state, '?') || ' -> ' || coalesce(t.to_state,
    '?') || ' (' || coalesce(t.reason, '?') || ', tenant ' || coalesce(t.tenant, '-') || ')' AS
    detail, t.created_at AS since
FROM resource_transitions t
JOIN resources r ON r.id = t.resource_id
WHERE t.outcome = 'rejected'
  AND t.reviewed_at IS NULL
  AND t.created_at < now() - make_interval(secs => $1)
ORDER BY t.id
LIMIT $2;

-- name: reads.tables
-- params: $1 pause, $2 parked, $3 outbox
SELECT to_regclass($1) IS NOT NULL AS pause, to_regclass($2) IS NOT NULL AS parked, to_regclass($3) IS NOT NULL AS
    outbox;

-- name: reads.unsent
SELECT coalesce(source, '_none') AS source, state = 'failed' AS failed, count(*) AS n
FROM outbox
WHERE state <> 'sent'
GROUP BY 1, 2;

-- name: receipts.add
-- params: $1 minute, $2 source, $3 outcome, $4 answers
INSERT INTO receipt_counts (minute, source, outcome, answers)
VALUES ($1, $2, $3, $4)
ON CONFLICT (minute, source, outcome)
DO UPDATE SET answers = receipt_counts.answers + excluded.answers;

-- name: receipts.forget
-- params: $1 oldest
DELETE FROM receipt_counts WHERE minute < $1;

-- name: receipts.since
-- params: $1 first
SELECT minute, source, outcome, answers
FROM receipt_counts
WHERE minute >= $1
ORDER BY minute, source, outcome;

-- name: rejected_deliveries.count_old
-- params: $1 age
SELECT count(*)
FROM rejected_deliveries
WHERE last_seen_at < now() - make_interval(secs => $1);

-- name: rejected_deliveries.get
-- params: $1 id
SELECT id, source, reason, body_sha256, body_bytes, (body IS NOT NULL) AS body_kept, headers,
    first_seen_at, last_seen_at, seen, retried_at, retry_outcome, retry_delivery_id, body
FROM rejected_deliveries
WHERE id = $1;

-- name: rejected_deliveries.keep
-- params: $1 id, $2 source, $3 reason, $4 sha, $5 body, $6 body_bytes, $7 stored, $8 headers, $9 subject_hash
INSERT INTO rejected_deliveries (id, source, reason, body_sha256, body, body_bytes, stored_bytes
    , headers, first_seen_at, last_seen_at, seen, subject_hash)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, now(), now(), 1,
    $9)
ON CONFLICT (source, body_sha256) DO UPDATE
SET reason = excluded.reason, headers = excluded.headers, stored_bytes = excluded.stored_bytes,
    body = coalesce(rejected_deliveries.body, excluded.body),
    subject_hash = coalesce(excluded.subject_hash, rejected_deliveries.subject_hash), last_seen_at =
    excluded.last_seen_at, seen = rejected_deliveries.seen + 1, retried_at = NULL, retry_outcome
    = NULL, retry_delivery_id = NULL
RETURNING id;

-- name: rejected_deliveries.list
-- params: $1 source, $2 everything, $3 before, $4 limit
SELECT id, source, reason, body_sha256, body_bytes, (body IS NOT NULL) AS body_kept, headers,
    first_seen_at, last_seen_at, seen, retried_at, retry_outcome, retry_delivery_id
FROM rejected_deliveries
WHERE (source = $1 OR $1 IS NULL)
  AND ($2 OR (retry_outcome IS NULL OR retry_outcome NOT IN ('accepted', 'duplicate')))
  AND (id < $3 OR $3 IS NULL)
ORDER BY id DESC
LIMIT $4;

-- name: rejected_deliveries.mark
-- params: $1 outcome, $2 delivery_id, $3 id
UPDATE rejected_deliveries
SET retried_at = now(), retry_outcome = $1, retry_delivery_id = $2
WHERE id = $3;

-- name: rejected_deliveries.oldest_unsettled
-- params: $1 source, $2 limit
SELECT id, source, reason, body_sha256, body_bytes, (body IS NOT NULL) AS body_kept, headers,
    first_seen_at, last_seen_at, seen, retried_at, retry_outcome, retry_delivery_id
FROM rejected_deliveries
WHERE (source = $1 OR $1 IS NULL)
  AND (retry_outcome IS NULL OR retry_outcome NOT IN ('accepted', 'duplicate'))
ORDER BY id
LIMIT $2;

-- name: rejected_deliveries.purge
-- params: $1 age, $2 limit
DELETE FROM rejected_deliveries
WHERE id IN (SELECT id FROM rejected_deliveries WHERE last_seen_at < now() - make_interval(secs => $1) LIMIT
    $2);

-- name: rejected_deliveries.ring_lock
-- params: $1 ring
SELECT pg_advisory_xact_lock(hashtext($1)) AS locked;

-- name: rejected_deliveries.totals
SELECT source, reason, count(*) AS rows_kept, sum(seen) AS seen, CAST(sum(stored_bytes) AS
    BIGINT) AS stored_bytes
FROM rejected_deliveries
GROUP BY source, reason
ORDER BY source, reason;

-- name: rejected_deliveries.trim
-- params: $1 source, $2 max_rows, $3 max_bytes
DELETE FROM rejected_deliveries
WHERE id IN (SELECT id FROM (SELECT id, row_number() OVER w AS n, CAST(sum(stored_bytes) OVER w
    AS BIGINT) AS total FROM rejected_deliveries WHERE source = $1 WINDOW w AS (ORDER BY
    last_seen_at DESC, id DESC ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)) ranked WHERE n
    > $2 OR total > $3);

-- name: retention.count_deliveries
-- params: $1 jobs_ceiling, $2 ceiling, $3 age
SELECT count(*) AS old,
    (SELECT count(DISTINCT j.delivery_id) FROM jobs j
     JOIN deliveries h ON h.id = j.delivery_id COLLATE "C"
     WHERE j.id < $1 AND j.state <> 'completed'
       AND h.id < $2 AND h.last_seen_at < now() - make_interval(secs => $3)) AS held
FROM deliveries d
WHERE d.id < $2
  AND d.last_seen_at < now() - make_interval(secs => $3);

-- name: retention.count_payloads
-- params: $1 age
SELECT count(*)
FROM payloads p
WHERE (SELECT d.first_seen_at FROM deliveries d WHERE d.id = p.delivery_id COLLATE "C") < now()
    - make_interval(secs => $1)
  AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = p.delivery_id COLLATE "default" AND j.id >= p.delivery_id COLLATE "default" AND j.id < hookinbox_id_after(p.delivery_id) COLLATE "default" AND (j.state <>
      'completed' OR j.completed_at >= now() - make_interval(secs => $1)) OFFSET 0);

-- name: retention.delivery_batch
-- params: $1 ceiling, $2 age, $3 limit
SELECT d.id
FROM deliveries d
WHERE d.id < $1
  AND d.last_seen_at < now() - make_interval(secs => $2)
  AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id COLLATE "default" AND j.id >= d.id COLLATE "default" AND j.id < hookinbox_id_after(d.id) COLLATE "default" AND j.state <> 'completed'
      OFFSET 0)
ORDER BY d.id
LIMIT $3 FOR UPDATE OF d SKIP LOCKED;

-- name: retention.drop_deliveries
-- params: $1 ids
DELETE FROM deliveries
WHERE id = ANY($1);

-- name: retention.drop_effects
-- params: $1 ids, $2 lo, $3 hi
DELETE FROM effects
WHERE job_id IN (SELECT id FROM jobs WHERE delivery_id = ANY($1) AND id >= $2 AND id < $3);

-- name: retention.drop_payloads
-- params: $1 ids
DELETE FROM payloads
WHERE delivery_id = ANY($1);

-- name: retention.drop_superseded
-- params: $1 ids, $2 lo, $3 hi
DELETE FROM effects_superseded
WHERE job_id IN (SELECT id FROM jobs WHERE delivery_id = ANY($1) AND id >= $2 AND id < $3);

-- name: retention.lock_batch_jobs
-- params: $1 ids, $2 lo, $3 hi
SELECT j.delivery_id, j.state
FROM jobs j
WHERE j.delivery_id = ANY($1) AND j.id >= $2 AND j.id < $3
ORDER BY j.id
FOR UPDATE;

-- name: retention.mark_purged
-- params: $1 ids
UPDATE deliveries
SET payload_purged_at = now()
WHERE id = ANY($1);

-- name: retention.payload_batch
-- params: $1 age, $2 limit
SELECT p.delivery_id AS id
FROM payloads p
WHERE (SELECT d.first_seen_at FROM deliveries d WHERE d.id = p.delivery_id COLLATE "C") < now()
    - make_interval(secs => $1)
  AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = p.delivery_id COLLATE "default" AND j.id >= p.delivery_id COLLATE "default" AND j.id < hookinbox_id_after(p.delivery_id) COLLATE "default" AND (j.state <>
      'completed' OR j.completed_at >= now() - make_interval(secs => $1)) OFFSET 0)
LIMIT $2 FOR UPDATE OF p SKIP LOCKED;

-- name: reviews.get
-- params: $1 id
SELECT t.id, CASE WHEN t.reason IN ('source_mismatch', 'tenant_mismatch', 'owner_mismatch')
    THEN NULL ELSE t.resource_id END AS resource_id, r.kind, t.source, t.tenant, CASE WHEN
    t.reason IN ('source_mismatch', 'tenant_mismatch', 'owner_mismatch') THEN NULL ELSE
    t.from_state END AS from_state, t.to_state, t.reason, t.delivery_id, t.job_id,
    t.event_type, t.created_at, t.reviewed_at, t.reviewed_by, t.review_note
FROM resource_transitions t
JOIN resources r ON r.id = t.resource_id
WHERE t.id = $1
  AND t.outcome = 'rejected';

-- name: reviews.list
-- params: $1 resolved, $2 tenant, $3 source, $4 before, $5 limit
SELECT t.id, CASE WHEN t.reason IN ('source_mismatch', 'tenant_mismatch', 'owner_mismatch')
    THEN NULL ELSE t.resource_id END AS resource_id, r.kind, t.source, t.tenant, CASE WHEN
    t.reason IN ('source_mismatch', 'tenant_mismatch', 'owner_mismatch') THEN NULL ELSE
    t.from_state END AS from_state, t.to_state, t.reason, t.delivery_id, t.job_id,
    t.event_type, t.created_at, t.reviewed_at, t.reviewed_by, t.review_note
FROM resource_transitions t
JOIN resources r ON r.id = t.resource_id
WHERE t.outcome = 'rejected'
  AND (t.reviewed_at IS NULL OR $1 = 1)
  AND (t.tenant = $2 OR $2 IS NULL)
  AND (t.source = $3 OR $3 IS NULL)
  AND (t.id < $4 OR $4 IS NULL)
ORDER BY t.id DESC
LIMIT $5;

-- name: reviews.resolve
-- params: $1 actor, $2 note, $3 id
UPDATE resource_transitions
SET reviewed_at = now(), reviewed_by = $1, review_note = $2
WHERE id = $3
  AND outcome = 'rejected'
  AND reviewed_at IS NULL;

-- name: sealed_rows.payloads_page
-- params: $1 magic, $2 after, $3 limit
SELECT delivery_id AS pk, body AS sealed
FROM payloads
WHERE substr(body, 1, 4) = $1 AND (delivery_id > $2 OR $2 IS NULL)
ORDER BY delivery_id
LIMIT $3;

-- name: sealed_rows.rejected_page
-- params: $1 magic, $2 after, $3 limit
SELECT id AS pk, body AS sealed
FROM rejected_deliveries
WHERE body IS NOT NULL AND substr(body, 1, 4) = $1 AND (id > $2 OR $2 IS NULL)
ORDER BY id
LIMIT $3;

-- name: sealed_rows.rewrap_payload
-- params: $1 sealed, $2 pk, $3 old
UPDATE payloads SET body = $1 WHERE delivery_id = $2 AND body = $3;

-- name: sealed_rows.rewrap_rejected
-- params: $1 sealed, $2 pk, $3 old
UPDATE rejected_deliveries SET body = $1 WHERE id = $2 AND body = $3;

-- name: sealed_rows.rewrap_snippet
-- params: $1 sealed, $2 job, $3 pk, $4 old
UPDATE attempts SET response_snippet = $1
WHERE job_id = $2 AND id = $3 AND response_snippet = $4;

-- name: sealed_rows.snippets_page
-- params: $1 prefix, $2 after, $3 limit
SELECT id AS pk, job_id AS job, response_snippet AS sealed
FROM attempts
WHERE response_snippet IS NOT NULL AND substr(response_snippet, 1, 5) = $1
  AND id > $2
ORDER BY id
LIMIT $3;

-- name: sources.list
SELECT source, paused, reason, changed_at, changed_by
FROM source_state
ORDER BY source;

-- name: sources.set
-- params: $1 source, $2 paused, $3 reason, $4 actor
INSERT INTO source_state (source, paused, reason, changed_at, changed_by)
VALUES ($1, $2, $3, now(), $4)
ON CONFLICT (source) DO UPDATE
SET paused = excluded.paused, reason = excluded.reason, changed_at = excluded.changed_at,
    changed_by = excluded.changed_by
RETURNING source, paused, reason, changed_at, changed_by;

-- name: tracked_resources.attach
-- params: $1 ref, $2 id
UPDATE resources
SET provider_ref = $1, version = version + 1, updated_at = now()
WHERE id = $2
RETURNING *;

-- name: tracked_resources.counts
SELECT outcome, reason, count(*) AS n
FROM resource_transitions
WHERE outcome IN ('applied', 'rejected')
GROUP BY outcome, reason;

-- name: tracked_resources.create
-- params: $1 id, $2 kind, $3 tenant, $4 owner, $5 state, $6 ref, $7 sources
INSERT INTO resources (id, kind, tenant, owner, state, provider_ref, sources, created_at,
    updated_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, now(), now())
ON CONFLICT DO NOTHING
RETURNING *;

-- name: tracked_resources.find
-- params: $1 kind, $2 ref
SELECT *
FROM resources
WHERE kind = $1
  AND provider_ref = $2;

-- name: tracked_resources.get
-- params: $1 id
SELECT *
FROM resources
WHERE id = $1;

-- name: tracked_resources.get_for_update
-- params: $1 id
SELECT *
FROM resources
WHERE id = $1 FOR UPDATE;

-- name: tracked_resources.lease_held
-- params: $1 id, $2 token
SELECT 1
FROM jobs
WHERE id = $1
  AND lease_token = $2
  AND state = 'processing' FOR UPDATE;

-- name: tracked_resources.list
-- params: $1 kind, $2 tenant, $3 state, $4 before, $5 limit
SELECT *
FROM resources
WHERE (kind = $1 OR $1 IS NULL)
  AND (tenant = $2 OR $2 IS NULL)
  AND (state = $3 OR $3 IS NULL)
  AND (id < $4 OR $4 IS NULL)
ORDER BY id DESC
LIMIT $5;

-- name: tracked_resources.log_of_delivery
-- params: $1 id
SELECT *
FROM resource_transitions
WHERE delivery_id = $1
ORDER BY id;

-- name: tracked_resources.log_of_resource
-- params: $1 id
SELECT *
FROM resource_transitions
WHERE resource_id = $1
ORDER BY id;

-- name: tracked_resources.outbox_unsent
-- params: $1 age, $2 limit
SELECT key, state
FROM outbox
WHERE state IN ('pending', 'sending')
  AND created_at < now() - make_interval(secs => $1)
ORDER BY created_at
LIMIT $2;

-- name: tracked_resources.parked_past_deadline
-- params: $1 limit
SELECT p.job_id
FROM parked_events p
JOIN jobs j ON j.id = p.job_id
WHERE p.deadline < now()
  AND j.state IN ('accepted', 'processing')
ORDER BY p.deadline
LIMIT $1;

-- name: tracked_resources.terminal_without_delivery
-- params: $1 kind, $2 state, $3 limit
SELECT r.id
FROM resources r
WHERE r.kind = $1
  AND r.state = $2
  AND NOT EXISTS (SELECT 1 FROM resource_transitions t WHERE t.resource_id = r.id AND t.outcome
      = 'applied' AND t.to_state = r.state AND t.delivery_id IS NOT NULL)
ORDER BY r.id
LIMIT $3;

-- name: tracked_resources.transition_without_outbox
-- params: $1 kind, $2 state, $3 outbox_kind, $4 limit
SELECT t.resource_id
FROM resource_transitions t
JOIN resources r ON r.id = t.resource_id
WHERE r.kind = $1
  AND t.outcome = 'applied'
  AND t.to_state = $2
  AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.key = $3 || ':' || t.resource_id)
ORDER BY t.id
LIMIT $4;

-- name: tracked_resources.unbound_moved
-- params: $1 kind, $2 initial, $3 limit
SELECT id, state
FROM resources
WHERE kind = $1
  AND sources IS NULL
  AND state <> $2
ORDER BY id
LIMIT $3;

-- name: tracked_resources.wake_parked
-- params: $1 kind, $2 ref
UPDATE jobs
SET next_attempt_at = now(), updated_at = now()
WHERE state = 'accepted'
  AND id IN (SELECT job_id FROM parked_events WHERE kind = $1 AND provider_ref = $2);

-- name: transitions.applied_before
-- params: $1 resource_id, $2 delivery_id
SELECT outbox_key
FROM resource_transitions
WHERE resource_id = $1
  AND delivery_id = $2
  AND outcome = 'applied'
LIMIT 1;

-- name: transitions.end_leased_attempt
-- params: $1 outcome, $2 error, $3 id
INSERT INTO attempts (job_id, number, trigger, worker, started_at, ended_at, outcome,
                      error_code)
SELECT id, attempts, trigger, leased_by, leased_at, now(), $1, $2
FROM jobs
WHERE id = $3 AND state = 'processing';

-- name: transitions.find
-- params: $1 kind, $2 ref
SELECT *
FROM resources
WHERE kind = $1
  AND provider_ref = $2 FOR UPDATE;

-- name: transitions.first_attempt
-- params: $1 id
UPDATE jobs
SET attempts = 1
WHERE id = $1;

-- name: transitions.log
-- params: $1 resource_id, $2 from_state, $3 to_state, $4 outcome, $5 reason, $6 delivery_id, $7 job_id, $8 event_type, $9 event_time, $10 outbox_key, $11 source, $12 tenant
INSERT INTO resource_transitions (resource_id, from_state, to_state, outcome, reason,
    delivery_id, job_id, event_type, event_time, outbox_key, source, tenant, created_at)
VALUES ($1, $2, $3, $4, $5, $6, $7,
    $8, $9, $10, $11, $12, now());

-- name: transitions.move
-- params: $1 state, $2 source, $3 id, $4 version
UPDATE resources
SET state = $1, sources = coalesce(sources, $2), version = version + 1,
    updated_at = now()
WHERE id = $3
  AND version = $4;

-- name: transitions.notify
-- params: $1 key, $2 kind, $3 source, $4 resource_id, $5 body
INSERT INTO outbox (key, kind, source, resource_id, body, next_attempt_at, created_at, updated_at)
VALUES ($1, $2, $3, $4, $5, now(), now(), now())
ON CONFLICT (key) DO NOTHING;

-- name: transitions.park
-- params: $1 job_id, $2 source, $3 kind, $4 ref, $5 park
INSERT INTO parked_events (job_id, source, kind, provider_ref, checks, parked_at, deadline)
VALUES ($1, $2, $3, $4, 1, now(), now() + make_interval(secs => $5))
RETURNING checks, deadline, now() AS now;

-- name: transitions.park_again
-- params: $1 job_id
UPDATE parked_events
SET checks = checks + 1
WHERE job_id = $1
RETURNING checks, deadline, now() AS now;

-- name: transitions.receiver_attempt
-- params: $1 id, $2 trigger, $3 worker, $4 outcome, $5 error
INSERT INTO attempts (job_id, number, trigger, worker, started_at, ended_at, outcome, error_code)
VALUES ($1, 1, $2, $3, now(), now(), $4, $5);

-- name: transitions.settle
-- params: $1 state, $2 error, $3 business_id, $4 due, $5 extra, $6 id
UPDATE jobs
SET state = $1, last_error = $2, business_id = coalesce($3, business_id),
    next_attempt_at = coalesce($4, next_attempt_at), max_attempts = max_attempts + $5,
    completed_at = CASE WHEN $1 = 'completed' THEN now() ELSE completed_at END, failed_at =
    CASE WHEN $1 = 'failed' THEN now() ELSE failed_at END, lease_token = NULL, leased_by =
    NULL, lease_expires_at = NULL, updated_at = now()
WHERE id = $6;

-- name: transitions.unpark
-- params: $1 job_id
DELETE FROM parked_events
WHERE job_id = $1;
