-- Every statement sqlite runs, rendered (tests/store/test_sql_golden.py).

-- name: admin_sessions.forget_expired
DELETE FROM admin_sessions_revoked
WHERE revoked_until < ((julianday('now') - 2440587.5) * 86400.0);

-- name: admin_sessions.is_revoked
SELECT 1 AS revoked
FROM admin_sessions_revoked
WHERE session_id = :session_id
  AND revoked_until > ((julianday('now') - 2440587.5) * 86400.0);

-- name: admin_sessions.revoke
INSERT INTO admin_sessions_revoked (session_id, revoked_until)
VALUES (:session_id, ((julianday('now') - 2440587.5) * 86400.0) + :ttl)
ON CONFLICT (session_id) DO NOTHING;

-- name: audit.audit
INSERT INTO operator_actions (at, actor, command, source, delivery_id, job_id, detail)
VALUES (((julianday('now') - 2440587.5) * 86400.0), :actor, :command, :source, :delivery_id, :job_id, :detail);

-- name: audit.list
SELECT at, actor, command, source, delivery_id, job_id, detail
FROM operator_actions
WHERE (delivery_id = :delivery_id OR :delivery_id IS NULL)
ORDER BY id
LIMIT :limit;

-- name: catch_up.get
SELECT source, position, resume_after, resume_ceiling, version, updated_at, last_report
FROM catch_up_cursors
WHERE source = :source;

-- name: catch_up.known
SELECT event_id FROM deliveries WHERE source = :source AND event_id IN (SELECT value FROM json_each(:ids));

-- name: catch_up.list
SELECT source, position, resume_after, resume_ceiling, version, updated_at, last_report
FROM catch_up_cursors
ORDER BY source;

-- name: catch_up.lock
SELECT NULL AS locked;

-- name: catch_up.mark_origin
UPDATE deliveries SET origin = :origin WHERE id IN (SELECT value FROM json_each(:ids));

-- name: catch_up.save
INSERT INTO catch_up_cursors (source, position, resume_after, resume_ceiling, version,
                              updated_at, last_report)
VALUES (:source, :position, :resume_after, :resume_ceiling, 1, ((julianday('now') - 2440587.5) * 86400.0), :report)
ON CONFLICT (source) DO UPDATE
SET position = excluded.position, resume_after = excluded.resume_after,
    resume_ceiling = excluded.resume_ceiling, version = catch_up_cursors.version + 1,
    updated_at = excluded.updated_at, last_report = excluded.last_report
WHERE catch_up_cursors.version = :version
RETURNING version;

-- name: core.count_rows
SELECT (SELECT count(*) FROM deliveries) AS deliveries, (SELECT count(*) FROM jobs) AS jobs,
    (SELECT count(*) FROM payloads) AS payloads, (SELECT count(*) FROM effects) AS effects,
    (SELECT count(*) FROM attempts) AS attempts;

-- name: core.schema_version
SELECT max(version) AS version FROM schema_migrations;

-- name: core.store_clock
SELECT ((julianday('now') - 2440587.5) * 86400.0) AS now;

-- name: destination_state.circuit
SELECT failures, CAST(opened_at IS NOT NULL AS INTEGER) AS open, NULL AS soft
FROM destinations
WHERE name = :name ;

-- name: destination_state.drop_slot
DELETE FROM destination_slots
WHERE (job_id = :job AND lease_token = :token)
  OR (destination = :name AND expires_at <= ((julianday('now') - 2440587.5) * 86400.0));

-- name: destination_state.ensure
INSERT INTO destinations (name, tokens, refilled_at, updated_at)
VALUES (:name, :burst, ((julianday('now') - 2440587.5) * 86400.0), ((julianday('now') - 2440587.5) * 86400.0))
ON CONFLICT (name) DO NOTHING;

-- name: destination_state.failed
UPDATE destinations
SET failures = failures + 1, updated_at = ((julianday('now') - 2440587.5) * 86400.0), opened_at = CASE WHEN :opens = 1 THEN ((julianday('now') - 2440587.5) * 86400.0)
    ELSE opened_at END, last_opened_at = CASE WHEN :opens = 1 THEN ((julianday('now') - 2440587.5) * 86400.0) ELSE last_opened_at END
    , openings = openings + :newly, probe_until = CASE WHEN :opens = 1 THEN NULL ELSE
    probe_until END
WHERE name = :name;

-- name: destination_state.in_flight
SELECT count(*)
FROM destination_slots
WHERE destination = :name
  AND expires_at > ((julianday('now') - 2440587.5) * 86400.0)
  AND NOT (job_id = :job AND lease_token = :token);

-- name: destination_state.lock
SELECT tokens, (((julianday('now') - 2440587.5) * 86400.0) - refilled_at) AS since_refill, failures, (((julianday('now') - 2440587.5) * 86400.0) - opened_at) AS open_for,
    CAST(coalesce(probe_until > ((julianday('now') - 2440587.5) * 86400.0), FALSE) AS INTEGER) AS probing, NULL AS soft
FROM destinations
WHERE name = :name ;

-- name: destination_state.slot
INSERT INTO destination_slots (job_id, lease_token, destination, expires_at)
VALUES (:job, :token, :name, ((julianday('now') - 2440587.5) * 86400.0) + :slot)
ON CONFLICT (job_id, lease_token) DO UPDATE
SET destination = :name, expires_at = ((julianday('now') - 2440587.5) * 86400.0) + :slot;

-- name: destination_state.soft
SELECT NULL;

-- name: destination_state.states
SELECT d.name, d.tokens, (((julianday('now') - 2440587.5) * 86400.0) - d.refilled_at) AS since_refill, d.failures, (((julianday('now') - 2440587.5) * 86400.0) - d.opened_at) AS
    open_for, d.opened_at, d.last_opened_at, d.openings, (SELECT count(*) FROM destination_slots
    s WHERE s.destination = d.name AND s.expires_at > ((julianday('now') - 2440587.5) * 86400.0)) AS in_flight
FROM destinations d
ORDER BY d.name;

-- name: destination_state.succeeded
UPDATE destinations
SET failures = 0, opened_at = NULL, probe_until = NULL, updated_at = ((julianday('now') - 2440587.5) * 86400.0)
WHERE name = :name;

-- name: destination_state.take
UPDATE destinations
SET tokens = :tokens, refilled_at = ((julianday('now') - 2440587.5) * 86400.0), updated_at = ((julianday('now') - 2440587.5) * 86400.0), probe_until = CASE WHEN :probe =
    1 THEN ((julianday('now') - 2440587.5) * 86400.0) + :slot ELSE probe_until END
WHERE name = :name;

-- name: effects.drop
DELETE FROM effects
WHERE job_id IN (SELECT value FROM json_each(:ids))
RETURNING key;

-- name: effects.get
SELECT key, state, job_id, result, created_at, recorded_at
FROM effects
WHERE key = :key;

-- name: effects.held
SELECT 1
FROM jobs
WHERE id = :id
  AND state = 'processing'
  AND lease_expires_at > ((julianday('now') - 2440587.5) * 86400.0);

-- name: effects.of_jobs
SELECT key, state, job_id, result, created_at, recorded_at
FROM effects
WHERE job_id IN (SELECT value FROM json_each(:ids))
ORDER BY created_at, key;

-- name: effects.record
INSERT INTO effects (key, job_id, state, result, created_at, recorded_at)
VALUES (:key, NULL, 'recorded', :result, ((julianday('now') - 2440587.5) * 86400.0), ((julianday('now') - 2440587.5) * 86400.0))
ON CONFLICT (key) DO UPDATE
SET state = 'recorded', result = excluded.result, recorded_at = excluded.recorded_at
WHERE effects.state = 'started';

-- name: effects.release
DELETE FROM effects
WHERE key = :key
  AND job_id = :job_id
  AND state = 'started';

-- name: effects.set_aside
INSERT INTO effects_superseded (key, state, job_id, result, created_at, recorded_at,
    superseded_at, superseded_by) SELECT key, state, job_id, result, created_at, recorded_at,
    ((julianday('now') - 2440587.5) * 86400.0), :actor
FROM effects
WHERE job_id IN (SELECT value FROM json_each(:ids));

-- name: effects.start
INSERT INTO effects (key, job_id, state, created_at)
VALUES (:key, :job_id, 'started', ((julianday('now') - 2440587.5) * 86400.0))
ON CONFLICT (key) DO NOTHING;

-- name: erasure.batch
SELECT d.id
FROM deliveries d
WHERE d.subject_hash = :subject AND (d.source = :source OR :source IS NULL) AND (EXISTS (SELECT 1 FROM payloads p WHERE p.delivery_id = d.id ) OR EXISTS (SELECT 1 FROM jobs j JOIN attempts a ON a.job_id = j.id WHERE j.delivery_id = d.id
    AND a.response_snippet IS NOT NULL))
ORDER BY d.id
LIMIT :limit;

-- name: erasure.count_deliveries
SELECT count(*) AS deliveries, coalesce(sum(CASE WHEN EXISTS (SELECT 1 FROM payloads p WHERE p.delivery_id = d.id ) THEN 1 ELSE 0
    END), 0) AS payloads
FROM deliveries d
WHERE d.subject_hash = :subject AND (d.source = :source OR :source IS NULL);

-- name: erasure.count_rejected
SELECT count(*)
FROM rejected_deliveries
WHERE subject_hash = :subject AND (source = :source OR :source IS NULL) AND body IS NOT NULL;

-- name: erasure.count_snippets
SELECT count(*)
FROM deliveries d
JOIN jobs j ON j.delivery_id = d.id
JOIN attempts a ON a.job_id = j.id
WHERE d.subject_hash = :subject AND (d.source = :source OR :source IS NULL) AND a.response_snippet IS NOT NULL;

-- name: erasure.drop_payloads
DELETE FROM payloads
WHERE delivery_id IN (SELECT value FROM json_each(:ids));

-- name: erasure.drop_rejected_bodies
UPDATE rejected_deliveries
SET body = NULL, stored_bytes = stored_bytes - body_bytes
WHERE id IN (SELECT id FROM rejected_deliveries WHERE subject_hash = :subject AND (source =
    :source OR :source IS NULL) AND body IS NOT NULL LIMIT :limit);

-- name: erasure.drop_snippets
UPDATE attempts
SET response_snippet = NULL
WHERE response_snippet IS NOT NULL AND job_id IN (SELECT j.id FROM deliveries d
    JOIN jobs j ON j.delivery_id = d.id WHERE d.id IN (SELECT value FROM json_each(:ids)));

-- name: erasure.mark_erased
UPDATE deliveries
SET payload_purged_at = coalesce(payload_purged_at, ((julianday('now') - 2440587.5) * 86400.0))
WHERE id IN (SELECT value FROM json_each(:ids));

-- name: hot_path.add_deliveries
INSERT INTO deliveries (id, source, event_id, event_type, body_sha256, delivery_count,
                        first_seen_at, last_seen_at, subject_hash)
VALUES (:id, :source, :event_id, :event_type, :sha, :seen, ((julianday('now') - 2440587.5) * 86400.0), ((julianday('now') - 2440587.5) * 86400.0), :subject_hash)
ON CONFLICT (source, event_id) DO NOTHING;

-- name: hot_path.added
SELECT id FROM deliveries WHERE id IN (SELECT value FROM json_each(:ids));

-- name: hot_path.claim
UPDATE jobs
SET state = 'processing', attempts = attempts + 1, lease_token = :token, leased_by = :worker,
    leased_at = ((julianday('now') - 2440587.5) * 86400.0), lease_expires_at = ((julianday('now') - 2440587.5) * 86400.0) + :lease, updated_at = ((julianday('now') - 2440587.5) * 86400.0)
WHERE id IN (SELECT value FROM json_each(:ids))
RETURNING id, delivery_id, source, action, attempts, max_attempts, trigger;

-- name: hot_path.claimed
SELECT j.id, j.delivery_id, j.source, j.action, j.attempts, j.max_attempts, j.trigger,
       d.event_id, d.event_type, p.body, p.headers
FROM jobs j
JOIN deliveries d ON d.id = j.delivery_id
LEFT JOIN payloads p ON p.delivery_id = j.delivery_id
WHERE j.id IN (SELECT value FROM json_each(:ids));

-- name: hot_path.due
SELECT id, state FROM (
    SELECT * FROM (
        SELECT id, state, next_attempt_at AS due_at FROM jobs j
        WHERE state = 'accepted' AND next_attempt_at <= ((julianday('now') - 2440587.5) * 86400.0)
          AND CASE WHEN j.order_key IS NULL THEN TRUE ELSE (j.id < :horizon AND NOT EXISTS (
              SELECT 1 FROM jobs e
              WHERE e.order_key = j.order_key AND e.id < j.id
                AND e.order_key IS NOT NULL AND e.state <> 'completed'
                AND (e.state <> 'failed' OR e.order_hold = TRUE))) END
        ORDER BY next_attempt_at LIMIT :limit)
    UNION ALL
    SELECT * FROM (
        SELECT id, state, lease_expires_at AS due_at FROM jobs
        WHERE state = 'processing' AND lease_expires_at < ((julianday('now') - 2440587.5) * 86400.0) AND attempts < max_attempts
        ORDER BY lease_expires_at LIMIT :limit)
) AS due
ORDER BY due_at
LIMIT :limit;

-- name: hot_path.due_but_settled
SELECT id, state FROM (
    SELECT * FROM (
        SELECT id, state, next_attempt_at AS due_at FROM jobs j
        WHERE state = 'accepted' AND next_attempt_at <= ((julianday('now') - 2440587.5) * 86400.0) AND NOT (id IN (SELECT value FROM json_each(:settled)))
          AND CASE WHEN j.order_key IS NULL THEN TRUE ELSE (j.id < :horizon AND NOT EXISTS (
              SELECT 1 FROM jobs e
              WHERE e.order_key = j.order_key AND e.id < j.id
                AND e.order_key IS NOT NULL AND e.state <> 'completed'
                AND (e.state <> 'failed' OR e.order_hold = TRUE))) END
        ORDER BY next_attempt_at LIMIT :limit)
    UNION ALL
    SELECT * FROM (
        SELECT id, state, lease_expires_at AS due_at FROM jobs
        WHERE state = 'processing' AND lease_expires_at < ((julianday('now') - 2440587.5) * 86400.0) AND attempts < max_attempts
          AND NOT (id IN (SELECT value FROM json_each(:settled)))
        ORDER BY lease_expires_at LIMIT :limit)
) AS due
ORDER BY due_at
LIMIT :limit;

-- name: hot_path.end_settled
INSERT INTO attempts (job_id, number, trigger, worker, started_at, ended_at, outcome,
                      error_code, target, http_status, response_snippet, duration_ms,
                      next_attempt_at)
SELECT id, attempts, trigger, leased_by, leased_at, ((julianday('now') - 2440587.5) * 86400.0), :outcome, :error, :target,
       :http_status, :snippet, :duration_ms,
       CASE WHEN :state = 'accepted' THEN ((julianday('now') - 2440587.5) * 86400.0) + :delay END
FROM jobs
WHERE id = :id AND lease_token = :token AND state = 'processing';

-- name: hot_path.exhausted
UPDATE jobs
SET state = 'failed', last_error = :error, failed_at = ((julianday('now') - 2440587.5) * 86400.0),
    lease_token = NULL, leased_by = NULL, lease_expires_at = NULL, updated_at = ((julianday('now') - 2440587.5) * 86400.0)
WHERE id IN (SELECT value FROM json_each(:ids));

-- name: hot_path.expire_exhausted
INSERT INTO attempts (job_id, number, trigger, worker, started_at, ended_at, outcome,
                      error_code)
SELECT id, attempts, trigger, leased_by, leased_at, ((julianday('now') - 2440587.5) * 86400.0), :outcome, :error
FROM jobs
WHERE state = 'processing' AND lease_expires_at < ((julianday('now') - 2440587.5) * 86400.0) AND attempts >= max_attempts
RETURNING job_id;

-- name: hot_path.expire_leases
INSERT INTO attempts (job_id, number, trigger, worker, started_at, ended_at, outcome,
                      error_code)
SELECT id, attempts, trigger, leased_by, leased_at, ((julianday('now') - 2440587.5) * 86400.0), :outcome, :error
FROM jobs
WHERE id IN (SELECT value FROM json_each(:ids));

-- name: hot_path.finish
UPDATE jobs
SET state = :state, last_error = coalesce(:error, last_error),
    business_id = coalesce(:business_id, business_id),
    next_attempt_at = ((julianday('now') - 2440587.5) * 86400.0) + :delay, max_attempts = max_attempts + :refund,
    completed_at = CASE WHEN :state = 'completed' THEN ((julianday('now') - 2440587.5) * 86400.0) ELSE completed_at END,
    failed_at = CASE WHEN :state = 'failed' THEN ((julianday('now') - 2440587.5) * 86400.0) ELSE failed_at END,
    lease_token = NULL, leased_by = NULL, lease_expires_at = NULL, updated_at = ((julianday('now') - 2440587.5) * 86400.0)
WHERE id = :id AND lease_token = :token AND state = 'processing';

-- name: hot_path.held_leases
SELECT id, lease_token FROM jobs WHERE id IN (SELECT value FROM json_each(:ids)) AND state = 'processing' ;

-- name: hot_path.insert_delivery
INSERT INTO deliveries (id, source, event_id, event_type, body_sha256, delivery_count,
                        first_seen_at, last_seen_at, subject_hash)
VALUES (:id, :source, :event_id, :event_type, :sha, :seen, ((julianday('now') - 2440587.5) * 86400.0), ((julianday('now') - 2440587.5) * 86400.0), :subject_hash)
ON CONFLICT (source, event_id) DO NOTHING
RETURNING id;

-- name: hot_path.insert_job
INSERT INTO jobs (id, delivery_id, source, action, max_attempts, order_key, order_hold,
                  next_attempt_at, created_at, updated_at)
VALUES (:id, :delivery_id, :source, :action, :max_attempts, :order_key, :order_hold, ((julianday('now') - 2440587.5) * 86400.0),
        ((julianday('now') - 2440587.5) * 86400.0), ((julianday('now') - 2440587.5) * 86400.0));

-- name: hot_path.insert_payload
INSERT INTO payloads (delivery_id, body, headers) VALUES (:id, :body, :headers);

-- name: hot_path.seen_again
UPDATE deliveries
SET last_seen_at = ((julianday('now') - 2440587.5) * 86400.0), delivery_count = delivery_count + :seen,
    conflicts = conflicts + :seen * CAST(body_sha256 <> :sha AS INTEGER)
WHERE source = :source AND event_id = :event_id
RETURNING id, body_sha256;

-- name: journal.by_event
SELECT id
FROM deliveries
WHERE event_id = :event_id AND source IN (WITH RECURSIVE s(source) AS (
    SELECT (SELECT source FROM deliveries ORDER BY source LIMIT 1)
    UNION ALL
    SELECT (SELECT source FROM deliveries WHERE source > s.source ORDER BY source LIMIT 1)
    FROM s WHERE s.source IS NOT NULL
)
SELECT source FROM s WHERE source IS NOT NULL)
  AND (source = :source OR :source IS NULL)
ORDER BY first_seen_at, id;

-- name: journal.count_search
SELECT count(*) FROM (
    SELECT 1 FROM deliveries d
    WHERE (lower(d.event_type) LIKE :type ESCAPE '\' OR :type IS NULL)
  AND (d.id >= :floor OR :floor IS NULL)
  AND (d.id < :ceiling OR :ceiling IS NULL)
  AND (d.source = :source OR :source IS NULL)
  AND (CASE
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id
                 AND j.state = 'failed')
        THEN 'failed'
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id
                 AND j.state = 'processing')
        THEN 'processing'
    WHEN NOT EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id
                     AND j.state <> 'completed')
        THEN 'completed'
    ELSE 'accepted' END = :status OR :status IS NULL)
    LIMIT :cap
) AS c;

-- name: journal.count_search_by_payload
SELECT count(*) FROM (
    SELECT 1 FROM deliveries d
    WHERE d.id IN (SELECT p.delivery_id  FROM payloads p WHERE p.delivery_id >= :floor
         AND (p.delivery_id < :ceiling OR :ceiling IS NULL) AND CASE WHEN instr(p.body, :needle) > 0 AND json_valid(CAST(p.body AS TEXT)) THEN CAST(p.body AS TEXT) -> ('$."' || replace(:payload_path, '.', '"."') || '"') END = :payload_value)
      AND (lower(d.event_type) LIKE :type ESCAPE '\' OR :type IS NULL)
  AND (d.id >= :floor OR :floor IS NULL)
  AND (d.id < :ceiling OR :ceiling IS NULL)
  AND (d.source = :source OR :source IS NULL)
  AND (CASE
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id
                 AND j.state = 'failed')
        THEN 'failed'
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id
                 AND j.state = 'processing')
        THEN 'processing'
    WHEN NOT EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id
                     AND j.state <> 'completed')
        THEN 'completed'
    ELSE 'accepted' END = :status OR :status IS NULL)
    LIMIT :cap
) AS c;

-- name: journal.count_search_by_ref
SELECT count(*) FROM (
    SELECT 1 FROM deliveries d
    WHERE d.id IN (SELECT id FROM deliveries WHERE id = :ref
         UNION ALL SELECT id FROM deliveries WHERE event_id = :ref
             AND source IN (WITH RECURSIVE s(source) AS (
    SELECT (SELECT source FROM deliveries ORDER BY source LIMIT 1)
    UNION ALL
    SELECT (SELECT source FROM deliveries WHERE source > s.source ORDER BY source LIMIT 1)
    FROM s WHERE s.source IS NOT NULL
)
SELECT source FROM s WHERE source IS NOT NULL))
      AND (lower(d.event_type) LIKE :type ESCAPE '\' OR :type IS NULL)
  AND (d.id >= :floor OR :floor IS NULL)
  AND (d.id < :ceiling OR :ceiling IS NULL)
  AND (d.source = :source OR :source IS NULL)
  AND (CASE
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id
                 AND j.state = 'failed')
        THEN 'failed'
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id
                 AND j.state = 'processing')
        THEN 'processing'
    WHEN NOT EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id
                     AND j.state <> 'completed')
        THEN 'completed'
    ELSE 'accepted' END = :status OR :status IS NULL)
    LIMIT :cap
) AS c;

-- name: journal.count_search_by_ref_by_payload
SELECT count(*) FROM (
    SELECT 1 FROM deliveries d
    WHERE d.id IN (SELECT id FROM deliveries WHERE id = :ref
         UNION ALL SELECT id FROM deliveries WHERE event_id = :ref
             AND source IN (WITH RECURSIVE s(source) AS (
    SELECT (SELECT source FROM deliveries ORDER BY source LIMIT 1)
    UNION ALL
    SELECT (SELECT source FROM deliveries WHERE source > s.source ORDER BY source LIMIT 1)
    FROM s WHERE s.source IS NOT NULL
)
SELECT source FROM s WHERE source IS NOT NULL))
      AND d.id IN (SELECT p.delivery_id  FROM payloads p WHERE p.delivery_id >= :floor
         AND (p.delivery_id < :ceiling OR :ceiling IS NULL) AND CASE WHEN instr(p.body, :needle) > 0 AND json_valid(CAST(p.body AS TEXT)) THEN CAST(p.body AS TEXT) -> ('$."' || replace(:payload_path, '.', '"."') || '"') END = :payload_value)
      AND (lower(d.event_type) LIKE :type ESCAPE '\' OR :type IS NULL)
  AND (d.id >= :floor OR :floor IS NULL)
  AND (d.id < :ceiling OR :ceiling IS NULL)
  AND (d.source = :source OR :source IS NULL)
  AND (CASE
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id
                 AND j.state = 'failed')
        THEN 'failed'
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id
                 AND j.state = 'processing')
        THEN 'processing'
    WHEN NOT EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id
                     AND j.state <> 'completed')
        THEN 'completed'
    ELSE 'accepted' END = :status OR :status IS NULL)
    LIMIT :cap
) AS c;

-- name: journal.count_search_by_ref_failed
SELECT count(*) FROM (
    SELECT 1 FROM deliveries d
    WHERE d.id IN (SELECT id FROM deliveries WHERE id = :ref
         UNION ALL SELECT id FROM deliveries WHERE event_id = :ref
             AND source IN (WITH RECURSIVE s(source) AS (
    SELECT (SELECT source FROM deliveries ORDER BY source LIMIT 1)
    UNION ALL
    SELECT (SELECT source FROM deliveries WHERE source > s.source ORDER BY source LIMIT 1)
    FROM s WHERE s.source IS NOT NULL
)
SELECT source FROM s WHERE source IS NOT NULL))
      AND d.id IN (SELECT delivery_id FROM jobs WHERE state = 'failed')
      AND (lower(d.event_type) LIKE :type ESCAPE '\' OR :type IS NULL)
  AND (d.id >= :floor OR :floor IS NULL)
  AND (d.id < :ceiling OR :ceiling IS NULL)
  AND (d.source = :source OR :source IS NULL)
  AND (CASE
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id
                 AND j.state = 'failed')
        THEN 'failed'
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id
                 AND j.state = 'processing')
        THEN 'processing'
    WHEN NOT EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id
                     AND j.state <> 'completed')
        THEN 'completed'
    ELSE 'accepted' END = :status OR :status IS NULL)
    LIMIT :cap
) AS c;

-- name: journal.count_search_by_ref_failed_by_payload
SELECT count(*) FROM (
    SELECT 1 FROM deliveries d
    WHERE d.id IN (SELECT id FROM deliveries WHERE id = :ref
         UNION ALL SELECT id FROM deliveries WHERE event_id = :ref
             AND source IN (WITH RECURSIVE s(source) AS (
    SELECT (SELECT source FROM deliveries ORDER BY source LIMIT 1)
    UNION ALL
    SELECT (SELECT source FROM deliveries WHERE source > s.source ORDER BY source LIMIT 1)
    FROM s WHERE s.source IS NOT NULL
)
SELECT source FROM s WHERE source IS NOT NULL))
      AND d.id IN (SELECT delivery_id FROM jobs WHERE state = 'failed')
      AND d.id IN (SELECT p.delivery_id  FROM payloads p WHERE p.delivery_id >= :floor
         AND (p.delivery_id < :ceiling OR :ceiling IS NULL) AND CASE WHEN instr(p.body, :needle) > 0 AND json_valid(CAST(p.body AS TEXT)) THEN CAST(p.body AS TEXT) -> ('$."' || replace(:payload_path, '.', '"."') || '"') END = :payload_value)
      AND (lower(d.event_type) LIKE :type ESCAPE '\' OR :type IS NULL)
  AND (d.id >= :floor OR :floor IS NULL)
  AND (d.id < :ceiling OR :ceiling IS NULL)
  AND (d.source = :source OR :source IS NULL)
  AND (CASE
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id
                 AND j.state = 'failed')
        THEN 'failed'
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id
                 AND j.state = 'processing')
        THEN 'processing'
    WHEN NOT EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id
                     AND j.state <> 'completed')
        THEN 'completed'
    ELSE 'accepted' END = :status OR :status IS NULL)
    LIMIT :cap
) AS c;

-- name: journal.count_search_by_ref_processing
SELECT count(*) FROM (
    SELECT 1 FROM deliveries d
    WHERE d.id IN (SELECT id FROM deliveries WHERE id = :ref
         UNION ALL SELECT id FROM deliveries WHERE event_id = :ref
             AND source IN (WITH RECURSIVE s(source) AS (
    SELECT (SELECT source FROM deliveries ORDER BY source LIMIT 1)
    UNION ALL
    SELECT (SELECT source FROM deliveries WHERE source > s.source ORDER BY source LIMIT 1)
    FROM s WHERE s.source IS NOT NULL
)
SELECT source FROM s WHERE source IS NOT NULL))
      AND d.id IN (SELECT delivery_id FROM jobs WHERE state = 'processing')
      AND (lower(d.event_type) LIKE :type ESCAPE '\' OR :type IS NULL)
  AND (d.id >= :floor OR :floor IS NULL)
  AND (d.id < :ceiling OR :ceiling IS NULL)
  AND (d.source = :source OR :source IS NULL)
  AND (CASE
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id
                 AND j.state = 'failed')
        THEN 'failed'
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id
                 AND j.state = 'processing')
        THEN 'processing'
    WHEN NOT EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id
                     AND j.state <> 'completed')
        THEN 'completed'
    ELSE 'accepted' END = :status OR :status IS NULL)
    LIMIT :cap
) AS c;

-- name: journal.count_search_by_ref_processing_by_payload
SELECT count(*) FROM (
    SELECT 1 FROM deliveries d
    WHERE d.id IN (SELECT id FROM deliveries WHERE id = :ref
         UNION ALL SELECT id FROM deliveries WHERE event_id = :ref
             AND source IN (WITH RECURSIVE s(source) AS (
    SELECT (SELECT source FROM deliveries ORDER BY source LIMIT 1)
    UNION ALL
    SELECT (SELECT source FROM deliveries WHERE source > s.source ORDER BY source LIMIT 1)
    FROM s WHERE s.source IS NOT NULL
)
SELECT source FROM s WHERE source IS NOT NULL))
      AND d.id IN (SELECT delivery_id FROM jobs WHERE state = 'processing')
      AND d.id IN (SELECT p.delivery_id  FROM payloads p WHERE p.delivery_id >= :floor
         AND (p.delivery_id < :ceiling OR :ceiling IS NULL) AND CASE WHEN instr(p.body, :needle) > 0 AND json_valid(CAST(p.body AS TEXT)) THEN CAST(p.body AS TEXT) -> ('$."' || replace(:payload_path, '.', '"."') || '"') END = :payload_value)
      AND (lower(d.event_type) LIKE :type ESCAPE '\' OR :type IS NULL)
  AND (d.id >= :floor OR :floor IS NULL)
  AND (d.id < :ceiling OR :ceiling IS NULL)
  AND (d.source = :source OR :source IS NULL)
  AND (CASE
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id
                 AND j.state = 'failed')
        THEN 'failed'
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id
                 AND j.state = 'processing')
        THEN 'processing'
    WHEN NOT EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id
                     AND j.state <> 'completed')
        THEN 'completed'
    ELSE 'accepted' END = :status OR :status IS NULL)
    LIMIT :cap
) AS c;

-- name: journal.count_search_failed
SELECT count(*) FROM (
    SELECT 1 FROM deliveries d
    WHERE d.id IN (SELECT delivery_id FROM jobs WHERE state = 'failed')
      AND (lower(d.event_type) LIKE :type ESCAPE '\' OR :type IS NULL)
  AND (d.id >= :floor OR :floor IS NULL)
  AND (d.id < :ceiling OR :ceiling IS NULL)
  AND (d.source = :source OR :source IS NULL)
  AND (CASE
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id
                 AND j.state = 'failed')
        THEN 'failed'
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id
                 AND j.state = 'processing')
        THEN 'processing'
    WHEN NOT EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id
                     AND j.state <> 'completed')
        THEN 'completed'
    ELSE 'accepted' END = :status OR :status IS NULL)
    LIMIT :cap
) AS c;

-- name: journal.count_search_failed_by_payload
SELECT count(*) FROM (
    SELECT 1 FROM deliveries d
    WHERE d.id IN (SELECT delivery_id FROM jobs WHERE state = 'failed')
      AND d.id IN (SELECT p.delivery_id  FROM payloads p WHERE p.delivery_id >= :floor
         AND (p.delivery_id < :ceiling OR :ceiling IS NULL) AND CASE WHEN instr(p.body, :needle) > 0 AND json_valid(CAST(p.body AS TEXT)) THEN CAST(p.body AS TEXT) -> ('$."' || replace(:payload_path, '.', '"."') || '"') END = :payload_value)
      AND (lower(d.event_type) LIKE :type ESCAPE '\' OR :type IS NULL)
  AND (d.id >= :floor OR :floor IS NULL)
  AND (d.id < :ceiling OR :ceiling IS NULL)
  AND (d.source = :source OR :source IS NULL)
  AND (CASE
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id
                 AND j.state = 'failed')
        THEN 'failed'
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id
                 AND j.state = 'processing')
        THEN 'processing'
    WHEN NOT EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id
                     AND j.state <> 'completed')
        THEN 'completed'
    ELSE 'accepted' END = :status OR :status IS NULL)
    LIMIT :cap
) AS c;

-- name: journal.count_search_processing
SELECT count(*) FROM (
    SELECT 1 FROM deliveries d
    WHERE d.id IN (SELECT delivery_id FROM jobs WHERE state = 'processing')
      AND (lower(d.event_type) LIKE :type ESCAPE '\' OR :type IS NULL)
  AND (d.id >= :floor OR :floor IS NULL)
  AND (d.id < :ceiling OR :ceiling IS NULL)
  AND (d.source = :source OR :source IS NULL)
  AND (CASE
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id
                 AND j.state = 'failed')
        THEN 'failed'
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id
                 AND j.state = 'processing')
        THEN 'processing'
    WHEN NOT EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id
                     AND j.state <> 'completed')
        THEN 'completed'
    ELSE 'accepted' END = :status OR :status IS NULL)
    LIMIT :cap
) AS c;

-- name: journal.count_search_processing_by_payload
SELECT count(*) FROM (
    SELECT 1 FROM deliveries d
    WHERE d.id IN (SELECT delivery_id FROM jobs WHERE state = 'processing')
      AND d.id IN (SELECT p.delivery_id  FROM payloads p WHERE p.delivery_id >= :floor
         AND (p.delivery_id < :ceiling OR :ceiling IS NULL) AND CASE WHEN instr(p.body, :needle) > 0 AND json_valid(CAST(p.body AS TEXT)) THEN CAST(p.body AS TEXT) -> ('$."' || replace(:payload_path, '.', '"."') || '"') END = :payload_value)
      AND (lower(d.event_type) LIKE :type ESCAPE '\' OR :type IS NULL)
  AND (d.id >= :floor OR :floor IS NULL)
  AND (d.id < :ceiling OR :ceiling IS NULL)
  AND (d.source = :source OR :source IS NULL)
  AND (CASE
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id
                 AND j.state = 'failed')
        THEN 'failed'
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id
                 AND j.state = 'processing')
        THEN 'processing'
    WHEN NOT EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id
                     AND j.state <> 'completed')
        THEN 'completed'
    ELSE 'accepted' END = :status OR :status IS NULL)
    LIMIT :cap
) AS c;

-- name: journal.get
SELECT d.id, d.source, d.event_id, d.event_type, d.body_sha256, d.first_seen_at, d.last_seen_at,
d.delivery_count, d.conflicts, d.origin,
EXISTS (SELECT 1 FROM payloads p WHERE p.delivery_id = d.id ) AS payload_retained
FROM deliveries d
WHERE d.id IN (SELECT id FROM deliveries WHERE id = :ref
               UNION ALL SELECT id FROM deliveries WHERE event_id = :ref
                   AND source IN (WITH RECURSIVE s(source) AS (
    SELECT (SELECT source FROM deliveries ORDER BY source LIMIT 1)
    UNION ALL
    SELECT (SELECT source FROM deliveries WHERE source > s.source ORDER BY source LIMIT 1)
    FROM s WHERE s.source IS NOT NULL
)
SELECT source FROM s WHERE source IS NOT NULL) AND (source = :source OR :source IS NULL))
ORDER BY (d.id = :ref) DESC, d.first_seen_at DESC
LIMIT 1;

-- name: journal.jobs_of
SELECT id, action, state, attempts, max_attempts, last_error, next_attempt_at,
       lease_expires_at, business_id, created_at, updated_at
FROM jobs j
WHERE j.delivery_id = :id
ORDER BY action;

-- name: journal.list
SELECT d.id, d.source, d.event_id, d.event_type, d.body_sha256, d.first_seen_at, d.last_seen_at,
d.delivery_count, d.conflicts, d.origin,
EXISTS (SELECT 1 FROM payloads p WHERE p.delivery_id = d.id ) AS payload_retained, (SELECT group_concat(state) FROM (SELECT state FROM jobs j WHERE j.delivery_id = d.id ORDER BY action)) AS states
FROM deliveries d
WHERE (d.source = :source OR :source IS NULL)
  AND (d.id < :before OR :before IS NULL)
  AND (CASE
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id
                 AND j.state = 'failed')
        THEN 'failed'
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id
                 AND j.state = 'processing')
        THEN 'processing'
    WHEN NOT EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id
                     AND j.state <> 'completed')
        THEN 'completed'
    ELSE 'accepted' END = :status OR :status IS NULL)
ORDER BY d.id DESC
LIMIT :limit;

-- name: journal.payload
SELECT body FROM payloads WHERE delivery_id = :id;

-- name: journal.payload_walk
SELECT d.id, d.source, d.event_id, d.event_type, d.body_sha256, d.first_seen_at, d.last_seen_at,
d.delivery_count, d.conflicts, d.origin,
EXISTS (SELECT 1 FROM payloads p WHERE p.delivery_id = d.id ) AS payload_retained, (SELECT group_concat(state) FROM (SELECT state FROM jobs j WHERE j.delivery_id = d.id ORDER BY action)) AS states, p.body AS body
FROM payloads p JOIN deliveries d ON d.id = p.delivery_id
WHERE p.delivery_id >= :floor AND (p.delivery_id < :ceiling OR :ceiling IS NULL)
  AND (p.delivery_id < :before OR :before IS NULL)
  AND (d.id = :ref OR d.event_id = :ref OR :ref IS NULL)
  AND (lower(d.event_type) LIKE :type ESCAPE '\' OR :type IS NULL)
  AND (d.id >= :floor OR :floor IS NULL)
  AND (d.id < :ceiling OR :ceiling IS NULL)
  AND (d.source = :source OR :source IS NULL)
  AND (CASE
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id
                 AND j.state = 'failed')
        THEN 'failed'
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id
                 AND j.state = 'processing')
        THEN 'processing'
    WHEN NOT EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id
                     AND j.state <> 'completed')
        THEN 'completed'
    ELSE 'accepted' END = :status OR :status IS NULL)
ORDER BY p.delivery_id DESC
LIMIT :limit;

-- name: journal.search
SELECT d.id, d.source, d.event_id, d.event_type, d.body_sha256, d.first_seen_at, d.last_seen_at,
d.delivery_count, d.conflicts, d.origin,
EXISTS (SELECT 1 FROM payloads p WHERE p.delivery_id = d.id ) AS payload_retained, (SELECT group_concat(state) FROM (SELECT state FROM jobs j WHERE j.delivery_id = d.id ORDER BY action)) AS states
FROM deliveries d
WHERE (lower(d.event_type) LIKE :type ESCAPE '\' OR :type IS NULL)
  AND (d.id >= :floor OR :floor IS NULL)
  AND (d.id < :ceiling OR :ceiling IS NULL)
  AND (d.source = :source OR :source IS NULL)
  AND (CASE
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id
                 AND j.state = 'failed')
        THEN 'failed'
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id
                 AND j.state = 'processing')
        THEN 'processing'
    WHEN NOT EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id
                     AND j.state <> 'completed')
        THEN 'completed'
    ELSE 'accepted' END = :status OR :status IS NULL)
  AND (d.id < :before OR :before IS NULL)
ORDER BY d.id DESC
LIMIT :limit;

-- name: journal.search_by_payload
SELECT d.id, d.source, d.event_id, d.event_type, d.body_sha256, d.first_seen_at, d.last_seen_at,
d.delivery_count, d.conflicts, d.origin,
EXISTS (SELECT 1 FROM payloads p WHERE p.delivery_id = d.id ) AS payload_retained, (SELECT group_concat(state) FROM (SELECT state FROM jobs j WHERE j.delivery_id = d.id ORDER BY action)) AS states
FROM deliveries d
WHERE d.id IN (SELECT p.delivery_id  FROM payloads p WHERE p.delivery_id >= :floor
         AND (p.delivery_id < :ceiling OR :ceiling IS NULL) AND CASE WHEN instr(p.body, :needle) > 0 AND json_valid(CAST(p.body AS TEXT)) THEN CAST(p.body AS TEXT) -> ('$."' || replace(:payload_path, '.', '"."') || '"') END = :payload_value)
  AND (lower(d.event_type) LIKE :type ESCAPE '\' OR :type IS NULL)
  AND (d.id >= :floor OR :floor IS NULL)
  AND (d.id < :ceiling OR :ceiling IS NULL)
  AND (d.source = :source OR :source IS NULL)
  AND (CASE
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id
                 AND j.state = 'failed')
        THEN 'failed'
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id
                 AND j.state = 'processing')
        THEN 'processing'
    WHEN NOT EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id
                     AND j.state <> 'completed')
        THEN 'completed'
    ELSE 'accepted' END = :status OR :status IS NULL)
  AND (d.id < :before OR :before IS NULL)
ORDER BY d.id DESC
LIMIT :limit;

-- name: journal.search_by_ref
SELECT d.id, d.source, d.event_id, d.event_type, d.body_sha256, d.first_seen_at, d.last_seen_at,
d.delivery_count, d.conflicts, d.origin,
EXISTS (SELECT 1 FROM payloads p WHERE p.delivery_id = d.id ) AS payload_retained, (SELECT group_concat(state) FROM (SELECT state FROM jobs j WHERE j.delivery_id = d.id ORDER BY action)) AS states
FROM deliveries d
WHERE d.id IN (SELECT id FROM deliveries WHERE id = :ref
         UNION ALL SELECT id FROM deliveries WHERE event_id = :ref
             AND source IN (WITH RECURSIVE s(source) AS (
    SELECT (SELECT source FROM deliveries ORDER BY source LIMIT 1)
    UNION ALL
    SELECT (SELECT source FROM deliveries WHERE source > s.source ORDER BY source LIMIT 1)
    FROM s WHERE s.source IS NOT NULL
)
SELECT source FROM s WHERE source IS NOT NULL))
  AND (lower(d.event_type) LIKE :type ESCAPE '\' OR :type IS NULL)
  AND (d.id >= :floor OR :floor IS NULL)
  AND (d.id < :ceiling OR :ceiling IS NULL)
  AND (d.source = :source OR :source IS NULL)
  AND (CASE
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id
                 AND j.state = 'failed')
        THEN 'failed'
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id
                 AND j.state = 'processing')
        THEN 'processing'
    WHEN NOT EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id
                     AND j.state <> 'completed')
        THEN 'completed'
    ELSE 'accepted' END = :status OR :status IS NULL)
  AND (d.id < :before OR :before IS NULL)
ORDER BY d.id DESC
LIMIT :limit;

-- name: journal.search_by_ref_by_payload
SELECT d.id, d.source, d.event_id, d.event_type, d.body_sha256, d.first_seen_at, d.last_seen_at,
d.delivery_count, d.conflicts, d.origin,
EXISTS (SELECT 1 FROM payloads p WHERE p.delivery_id = d.id ) AS payload_retained, (SELECT group_concat(state) FROM (SELECT state FROM jobs j WHERE j.delivery_id = d.id ORDER BY action)) AS states
FROM deliveries d
WHERE d.id IN (SELECT id FROM deliveries WHERE id = :ref
         UNION ALL SELECT id FROM deliveries WHERE event_id = :ref
             AND source IN (WITH RECURSIVE s(source) AS (
    SELECT (SELECT source FROM deliveries ORDER BY source LIMIT 1)
    UNION ALL
    SELECT (SELECT source FROM deliveries WHERE source > s.source ORDER BY source LIMIT 1)
    FROM s WHERE s.source IS NOT NULL
)
SELECT source FROM s WHERE source IS NOT NULL))
  AND d.id IN (SELECT p.delivery_id  FROM payloads p WHERE p.delivery_id >= :floor
         AND (p.delivery_id < :ceiling OR :ceiling IS NULL) AND CASE WHEN instr(p.body, :needle) > 0 AND json_valid(CAST(p.body AS TEXT)) THEN CAST(p.body AS TEXT) -> ('$."' || replace(:payload_path, '.', '"."') || '"') END = :payload_value)
  AND (lower(d.event_type) LIKE :type ESCAPE '\' OR :type IS NULL)
  AND (d.id >= :floor OR :floor IS NULL)
  AND (d.id < :ceiling OR :ceiling IS NULL)
  AND (d.source = :source OR :source IS NULL)
  AND (CASE
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id
                 AND j.state = 'failed')
        THEN 'failed'
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id
                 AND j.state = 'processing')
        THEN 'processing'
    WHEN NOT EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id
                     AND j.state <> 'completed')
        THEN 'completed'
    ELSE 'accepted' END = :status OR :status IS NULL)
  AND (d.id < :before OR :before IS NULL)
ORDER BY d.id DESC
LIMIT :limit;

-- name: journal.search_by_ref_failed
SELECT d.id, d.source, d.event_id, d.event_type, d.body_sha256, d.first_seen_at, d.last_seen_at,
d.delivery_count, d.conflicts, d.origin,
EXISTS (SELECT 1 FROM payloads p WHERE p.delivery_id = d.id ) AS payload_retained, (SELECT group_concat(state) FROM (SELECT state FROM jobs j WHERE j.delivery_id = d.id ORDER BY action)) AS states
FROM deliveries d
WHERE d.id IN (SELECT id FROM deliveries WHERE id = :ref
         UNION ALL SELECT id FROM deliveries WHERE event_id = :ref
             AND source IN (WITH RECURSIVE s(source) AS (
    SELECT (SELECT source FROM deliveries ORDER BY source LIMIT 1)
    UNION ALL
    SELECT (SELECT source FROM deliveries WHERE source > s.source ORDER BY source LIMIT 1)
    FROM s WHERE s.source IS NOT NULL
)
SELECT source FROM s WHERE source IS NOT NULL))
  AND d.id IN (SELECT delivery_id FROM jobs WHERE state = 'failed')
  AND (lower(d.event_type) LIKE :type ESCAPE '\' OR :type IS NULL)
  AND (d.id >= :floor OR :floor IS NULL)
  AND (d.id < :ceiling OR :ceiling IS NULL)
  AND (d.source = :source OR :source IS NULL)
  AND (CASE
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id
                 AND j.state = 'failed')
        THEN 'failed'
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id
                 AND j.state = 'processing')
        THEN 'processing'
    WHEN NOT EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id
                     AND j.state <> 'completed')
        THEN 'completed'
    ELSE 'accepted' END = :status OR :status IS NULL)
  AND (d.id < :before OR :before IS NULL)
ORDER BY d.id DESC
LIMIT :limit;

-- name: journal.search_by_ref_failed_by_payload
SELECT d.id, d.source, d.event_id, d.event_type, d.body_sha256, d.first_seen_at, d.last_seen_at,
d.delivery_count, d.conflicts, d.origin,
EXISTS (SELECT 1 FROM payloads p WHERE p.delivery_id = d.id ) AS payload_retained, (SELECT group_concat(state) FROM (SELECT state FROM jobs j WHERE j.delivery_id = d.id ORDER BY action)) AS states
FROM deliveries d
WHERE d.id IN (SELECT id FROM deliveries WHERE id = :ref
         UNION ALL SELECT id FROM deliveries WHERE event_id = :ref
             AND source IN (WITH RECURSIVE s(source) AS (
    SELECT (SELECT source FROM deliveries ORDER BY source LIMIT 1)
    UNION ALL
    SELECT (SELECT source FROM deliveries WHERE source > s.source ORDER BY source LIMIT 1)
    FROM s WHERE s.source IS NOT NULL
)
SELECT source FROM s WHERE source IS NOT NULL))
  AND d.id IN (SELECT delivery_id FROM jobs WHERE state = 'failed')
  AND d.id IN (SELECT p.delivery_id  FROM payloads p WHERE p.delivery_id >= :floor
         AND (p.delivery_id < :ceiling OR :ceiling IS NULL) AND CASE WHEN instr(p.body, :needle) > 0 AND json_valid(CAST(p.body AS TEXT)) THEN CAST(p.body AS TEXT) -> ('$."' || replace(:payload_path, '.', '"."') || '"') END = :payload_value)
  AND (lower(d.event_type) LIKE :type ESCAPE '\' OR :type IS NULL)
  AND (d.id >= :floor OR :floor IS NULL)
  AND (d.id < :ceiling OR :ceiling IS NULL)
  AND (d.source = :source OR :source IS NULL)
  AND (CASE
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id
                 AND j.state = 'failed')
        THEN 'failed'
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id
                 AND j.state = 'processing')
        THEN 'processing'
    WHEN NOT EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id
                     AND j.state <> 'completed')
        THEN 'completed'
    ELSE 'accepted' END = :status OR :status IS NULL)
  AND (d.id < :before OR :before IS NULL)
ORDER BY d.id DESC
LIMIT :limit;

-- name: journal.search_by_ref_processing
SELECT d.id, d.source, d.event_id, d.event_type, d.body_sha256, d.first_seen_at, d.last_seen_at,
d.delivery_count, d.conflicts, d.origin,
EXISTS (SELECT 1 FROM payloads p WHERE p.delivery_id = d.id ) AS payload_retained, (SELECT group_concat(state) FROM (SELECT state FROM jobs j WHERE j.delivery_id = d.id ORDER BY action)) AS states
FROM deliveries d
WHERE d.id IN (SELECT id FROM deliveries WHERE id = :ref
         UNION ALL SELECT id FROM deliveries WHERE event_id = :ref
             AND source IN (WITH RECURSIVE s(source) AS (
    SELECT (SELECT source FROM deliveries ORDER BY source LIMIT 1)
    UNION ALL
    SELECT (SELECT source FROM deliveries WHERE source > s.source ORDER BY source LIMIT 1)
    FROM s WHERE s.source IS NOT NULL
)
SELECT source FROM s WHERE source IS NOT NULL))
  AND d.id IN (SELECT delivery_id FROM jobs WHERE state = 'processing')
  AND (lower(d.event_type) LIKE :type ESCAPE '\' OR :type IS NULL)
  AND (d.id >= :floor OR :floor IS NULL)
  AND (d.id < :ceiling OR :ceiling IS NULL)
  AND (d.source = :source OR :source IS NULL)
  AND (CASE
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id
                 AND j.state = 'failed')
        THEN 'failed'
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id
                 AND j.state = 'processing')
        THEN 'processing'
    WHEN NOT EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id
                     AND j.state <> 'completed')
        THEN 'completed'
    ELSE 'accepted' END = :status OR :status IS NULL)
  AND (d.id < :before OR :before IS NULL)
ORDER BY d.id DESC
LIMIT :limit;

-- name: journal.search_by_ref_processing_by_payload
SELECT d.id, d.source, d.event_id, d.event_type, d.body_sha256, d.first_seen_at, d.last_seen_at,
d.delivery_count, d.conflicts, d.origin,
EXISTS (SELECT 1 FROM payloads p WHERE p.delivery_id = d.id ) AS payload_retained, (SELECT group_concat(state) FROM (SELECT state FROM jobs j WHERE j.delivery_id = d.id ORDER BY action)) AS states
FROM deliveries d
WHERE d.id IN (SELECT id FROM deliveries WHERE id = :ref
         UNION ALL SELECT id FROM deliveries WHERE event_id = :ref
             AND source IN (WITH RECURSIVE s(source) AS (
    SELECT (SELECT source FROM deliveries ORDER BY source LIMIT 1)
    UNION ALL
    SELECT (SELECT source FROM deliveries WHERE source > s.source ORDER BY source LIMIT 1)
    FROM s WHERE s.source IS NOT NULL
)
SELECT source FROM s WHERE source IS NOT NULL))
  AND d.id IN (SELECT delivery_id FROM jobs WHERE state = 'processing')
  AND d.id IN (SELECT p.delivery_id  FROM payloads p WHERE p.delivery_id >= :floor
         AND (p.delivery_id < :ceiling OR :ceiling IS NULL) AND CASE WHEN instr(p.body, :needle) > 0 AND json_valid(CAST(p.body AS TEXT)) THEN CAST(p.body AS TEXT) -> ('$."' || replace(:payload_path, '.', '"."') || '"') END = :payload_value)
  AND (lower(d.event_type) LIKE :type ESCAPE '\' OR :type IS NULL)
  AND (d.id >= :floor OR :floor IS NULL)
  AND (d.id < :ceiling OR :ceiling IS NULL)
  AND (d.source = :source OR :source IS NULL)
  AND (CASE
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id
                 AND j.state = 'failed')
        THEN 'failed'
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id
                 AND j.state = 'processing')
        THEN 'processing'
    WHEN NOT EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id
                     AND j.state <> 'completed')
        THEN 'completed'
    ELSE 'accepted' END = :status OR :status IS NULL)
  AND (d.id < :before OR :before IS NULL)
ORDER BY d.id DESC
LIMIT :limit;

-- name: journal.search_failed
SELECT d.id, d.source, d.event_id, d.event_type, d.body_sha256, d.first_seen_at, d.last_seen_at,
d.delivery_count, d.conflicts, d.origin,
EXISTS (SELECT 1 FROM payloads p WHERE p.delivery_id = d.id ) AS payload_retained, (SELECT group_concat(state) FROM (SELECT state FROM jobs j WHERE j.delivery_id = d.id ORDER BY action)) AS states
FROM deliveries d
WHERE d.id IN (SELECT delivery_id FROM jobs WHERE state = 'failed')
  AND (lower(d.event_type) LIKE :type ESCAPE '\' OR :type IS NULL)
  AND (d.id >= :floor OR :floor IS NULL)
  AND (d.id < :ceiling OR :ceiling IS NULL)
  AND (d.source = :source OR :source IS NULL)
  AND (CASE
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id
                 AND j.state = 'failed')
        THEN 'failed'
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id
                 AND j.state = 'processing')
        THEN 'processing'
    WHEN NOT EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id
                     AND j.state <> 'completed')
        THEN 'completed'
    ELSE 'accepted' END = :status OR :status IS NULL)
  AND (d.id < :before OR :before IS NULL)
ORDER BY d.id DESC
LIMIT :limit;

-- name: journal.search_failed_by_payload
SELECT d.id, d.source, d.event_id, d.event_type, d.body_sha256, d.first_seen_at, d.last_seen_at,
d.delivery_count, d.conflicts, d.origin,
EXISTS (SELECT 1 FROM payloads p WHERE p.delivery_id = d.id ) AS payload_retained, (SELECT group_concat(state) FROM (SELECT state FROM jobs j WHERE j.delivery_id = d.id ORDER BY action)) AS states
FROM deliveries d
WHERE d.id IN (SELECT delivery_id FROM jobs WHERE state = 'failed')
  AND d.id IN (SELECT p.delivery_id  FROM payloads p WHERE p.delivery_id >= :floor
         AND (p.delivery_id < :ceiling OR :ceiling IS NULL) AND CASE WHEN instr(p.body, :needle) > 0 AND json_valid(CAST(p.body AS TEXT)) THEN CAST(p.body AS TEXT) -> ('$."' || replace(:payload_path, '.', '"."') || '"') END = :payload_value)
  AND (lower(d.event_type) LIKE :type ESCAPE '\' OR :type IS NULL)
  AND (d.id >= :floor OR :floor IS NULL)
  AND (d.id < :ceiling OR :ceiling IS NULL)
  AND (d.source = :source OR :source IS NULL)
  AND (CASE
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id
                 AND j.state = 'failed')
        THEN 'failed'
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id
                 AND j.state = 'processing')
        THEN 'processing'
    WHEN NOT EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id
                     AND j.state <> 'completed')
        THEN 'completed'
    ELSE 'accepted' END = :status OR :status IS NULL)
  AND (d.id < :before OR :before IS NULL)
ORDER BY d.id DESC
LIMIT :limit;

-- name: journal.search_processing
SELECT d.id, d.source, d.event_id, d.event_type, d.body_sha256, d.first_seen_at, d.last_seen_at,
d.delivery_count, d.conflicts, d.origin,
EXISTS (SELECT 1 FROM payloads p WHERE p.delivery_id = d.id ) AS payload_retained, (SELECT group_concat(state) FROM (SELECT state FROM jobs j WHERE j.delivery_id = d.id ORDER BY action)) AS states
FROM deliveries d
WHERE d.id IN (SELECT delivery_id FROM jobs WHERE state = 'processing')
  AND (lower(d.event_type) LIKE :type ESCAPE '\' OR :type IS NULL)
  AND (d.id >= :floor OR :floor IS NULL)
  AND (d.id < :ceiling OR :ceiling IS NULL)
  AND (d.source = :source OR :source IS NULL)
  AND (CASE
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id
                 AND j.state = 'failed')
        THEN 'failed'
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id
                 AND j.state = 'processing')
        THEN 'processing'
    WHEN NOT EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id
                     AND j.state <> 'completed')
        THEN 'completed'
    ELSE 'accepted' END = :status OR :status IS NULL)
  AND (d.id < :before OR :before IS NULL)
ORDER BY d.id DESC
LIMIT :limit;

-- name: journal.search_processing_by_payload
SELECT d.id, d.source, d.event_id, d.event_type, d.body_sha256, d.first_seen_at, d.last_seen_at,
d.delivery_count, d.conflicts, d.origin,
EXISTS (SELECT 1 FROM payloads p WHERE p.delivery_id = d.id ) AS payload_retained, (SELECT group_concat(state) FROM (SELECT state FROM jobs j WHERE j.delivery_id = d.id ORDER BY action)) AS states
FROM deliveries d
WHERE d.id IN (SELECT delivery_id FROM jobs WHERE state = 'processing')
  AND d.id IN (SELECT p.delivery_id  FROM payloads p WHERE p.delivery_id >= :floor
         AND (p.delivery_id < :ceiling OR :ceiling IS NULL) AND CASE WHEN instr(p.body, :needle) > 0 AND json_valid(CAST(p.body AS TEXT)) THEN CAST(p.body AS TEXT) -> ('$."' || replace(:payload_path, '.', '"."') || '"') END = :payload_value)
  AND (lower(d.event_type) LIKE :type ESCAPE '\' OR :type IS NULL)
  AND (d.id >= :floor OR :floor IS NULL)
  AND (d.id < :ceiling OR :ceiling IS NULL)
  AND (d.source = :source OR :source IS NULL)
  AND (CASE
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id
                 AND j.state = 'failed')
        THEN 'failed'
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id
                 AND j.state = 'processing')
        THEN 'processing'
    WHEN NOT EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id
                     AND j.state <> 'completed')
        THEN 'completed'
    ELSE 'accepted' END = :status OR :status IS NULL)
  AND (d.id < :before OR :before IS NULL)
ORDER BY d.id DESC
LIMIT :limit;

-- name: journal.stored
SELECT body, headers FROM payloads WHERE delivery_id = :id;

-- The searches: one statement per choice of filters (by reference, by a rare status, by
-- payload), so a search by id or by a rare status walks an index instead of the journal;
-- count_* counts up to :cap what the search of the same name finds.;

-- name: notices.circuits
SELECT '' AS source, name AS subject, 'consecutive_failures' AS reason, CAST(last_opened_at / 60 AS INTEGER)
    AS minute, 1 AS n, NULL AS actor
FROM destinations
WHERE last_opened_at > ((julianday('now') - 2440587.5) * 86400.0) - :lookback
ORDER BY minute
LIMIT :limit;

-- name: notices.dead_letters
SELECT source, action AS subject, coalesce(last_error, '') AS reason, CAST(failed_at / 60 AS INTEGER) AS
    minute, count(*) AS n, NULL AS actor
FROM jobs
WHERE state = 'failed'
  AND failed_at > ((julianday('now') - 2440587.5) * 86400.0) - :lookback
GROUP BY source, action, last_error, CAST(failed_at / 60 AS INTEGER)
ORDER BY minute
LIMIT :limit;

-- name: notices.exists
SELECT count(*)
FROM outbox
WHERE key = :key;

-- name: notices.insert
INSERT INTO outbox (key, kind, source, resource_id, body, next_attempt_at, created_at, updated_at)
VALUES (:key, :kind, :source, NULL, :body, ((julianday('now') - 2440587.5) * 86400.0), ((julianday('now') - 2440587.5) * 86400.0), ((julianday('now') - 2440587.5) * 86400.0))
ON CONFLICT (key) DO NOTHING;

-- name: notices.pauses
SELECT source, 'paused' AS subject, 'operator' AS reason, CAST(at / 60 AS INTEGER) AS minute, count(*) AS n,
    max(actor) AS actor
FROM operator_actions
WHERE command = 'pause'
  AND source IS NOT NULL
  AND at > ((julianday('now') - 2440587.5) * 86400.0) - :lookback
GROUP BY source, CAST(at / 60 AS INTEGER)
ORDER BY minute
LIMIT :limit;

-- name: notices.rejected
SELECT source, 'rejected' AS subject, reason, CAST(last_seen_at / 60 AS INTEGER) AS minute, CAST(sum(seen) AS
    BIGINT) AS n, NULL AS actor
FROM rejected_deliveries
WHERE last_seen_at > ((julianday('now') - 2440587.5) * 86400.0) - :lookback
GROUP BY source, reason, CAST(last_seen_at / 60 AS INTEGER)
ORDER BY minute
LIMIT :limit;

-- name: notices.sent_last_hour
SELECT count(*)
FROM outbox
WHERE kind = :kind
  AND created_at > ((julianday('now') - 2440587.5) * 86400.0) - :hour;

-- name: outbox.claim
UPDATE outbox
SET state = 'sending', attempts = attempts + 1, lease_token = :token, leased_by = :worker,
    lease_expires_at = ((julianday('now') - 2440587.5) * 86400.0) + :lease, updated_at = ((julianday('now') - 2440587.5) * 86400.0)
WHERE key IN (SELECT key FROM outbox WHERE ((state = 'pending' AND next_attempt_at <= ((julianday('now') - 2440587.5) * 86400.0)) OR
    (state = 'sending' AND lease_expires_at < ((julianday('now') - 2440587.5) * 86400.0) AND attempts < :max)) AND (:only_notices =
    FALSE OR kind LIKE 'notify:%') ORDER BY next_attempt_at LIMIT :limit )
RETURNING key, kind, resource_id, body, attempts;

-- name: outbox.exhausted
UPDATE outbox
SET state = 'failed', last_error = :error, failed_at = ((julianday('now') - 2440587.5) * 86400.0), lease_token = NULL, leased_by =
    NULL, lease_expires_at = NULL, updated_at = ((julianday('now') - 2440587.5) * 86400.0)
WHERE state = 'sending'
  AND lease_expires_at < ((julianday('now') - 2440587.5) * 86400.0)
  AND attempts >= :max;

-- name: outbox.finish
UPDATE outbox
SET state = :state, last_error = coalesce(:error, last_error), next_attempt_at = ((julianday('now') - 2440587.5) * 86400.0) +
    :delay, sent_at = CASE WHEN :state = 'sent' THEN ((julianday('now') - 2440587.5) * 86400.0) ELSE sent_at END, failed_at =
    CASE WHEN :state = 'failed' THEN ((julianday('now') - 2440587.5) * 86400.0) ELSE failed_at END, lease_token = NULL, leased_by =
    NULL, lease_expires_at = NULL, updated_at = ((julianday('now') - 2440587.5) * 86400.0)
WHERE key = :key
  AND lease_token = :token
  AND state = 'sending';

-- name: outbox.get
SELECT *
FROM outbox
WHERE key = :key;

-- name: outbox.list
SELECT *
FROM outbox
WHERE (state = :state OR :state IS NULL)
  AND (kind = :kind OR :kind IS NULL)
ORDER BY created_at DESC, key
LIMIT :limit;

-- name: outbox.renew
UPDATE outbox
SET lease_expires_at = ((julianday('now') - 2440587.5) * 86400.0) + :lease
WHERE key = :key
  AND lease_token = :token
  AND state = 'sending';

-- name: outbox.requeue
UPDATE outbox
SET state = 'pending', attempts = 0, next_attempt_at = ((julianday('now') - 2440587.5) * 86400.0), failed_at = NULL, updated_at = ((julianday('now') - 2440587.5) * 86400.0)
WHERE key = :key
RETURNING *;

-- name: outbox.state
SELECT state
FROM outbox
WHERE key = :key ;

-- name: queue.attempts
SELECT number, trigger, worker, started_at, ended_at, outcome, error_code, target, http_status,
    response_snippet, duration_ms, next_attempt_at
FROM ( SELECT 0 AS running, id AS seq, number, trigger, worker, started_at, ended_at, outcome,
    error_code, target, http_status, response_snippet, duration_ms, next_attempt_at FROM
    attempts WHERE job_id = :id UNION ALL SELECT 1, 0, attempts, trigger, leased_by, leased_at,
    NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL FROM jobs WHERE id = :id AND state =
    'processing') AS history
ORDER BY running, seq;

-- name: queue.count_dead
SELECT count(*)
FROM jobs j
WHERE j.state = 'failed'
  AND (j.source = :source OR :source IS NULL)
  AND (j.action = :action OR :action IS NULL)
  AND (j.last_error = :reason OR :reason IS NULL)
  AND (j.failed_at >= :since OR :since IS NULL)
  AND (j.failed_at < :until OR :until IS NULL);

-- name: queue.dead_letters_newest_failure
SELECT j.id, j.delivery_id, j.source, j.action, j.state, j.attempts, j.max_attempts,
    j.last_error, j.trigger, d.event_id, d.event_type, j.business_id, EXISTS (SELECT 1 FROM
    payloads p WHERE p.delivery_id = j.delivery_id) AS payload_retained, j.created_at,
    j.updated_at, j.completed_at, j.failed_at, (SELECT min(a.ended_at) FROM attempts a WHERE
    a.job_id = j.id AND a.outcome <> 'completed') AS first_failed_at, j.lease_expires_at,
    (j.state = 'failed' AND j.order_key IS NOT NULL AND j.order_hold = TRUE) AS holds_key
FROM jobs j
JOIN deliveries d ON d.id = j.delivery_id
WHERE j.state = 'failed'
  AND (j.source = :source OR :source IS NULL)
  AND (j.action = :action OR :action IS NULL)
  AND (j.last_error = :reason OR :reason IS NULL)
  AND (j.failed_at >= :since OR :since IS NULL)
  AND (j.failed_at < :until OR :until IS NULL)
  AND ((j.failed_at, j.id) < (SELECT failed_at, id FROM jobs WHERE id = :before) OR :before IS NULL)
ORDER BY j.failed_at DESC, j.id DESC
LIMIT :limit;

-- name: queue.dead_letters_newest_job
SELECT j.id, j.delivery_id, j.source, j.action, j.state, j.attempts, j.max_attempts,
    j.last_error, j.trigger, d.event_id, d.event_type, j.business_id, EXISTS (SELECT 1 FROM
    payloads p WHERE p.delivery_id = j.delivery_id) AS payload_retained, j.created_at,
    j.updated_at, j.completed_at, j.failed_at, (SELECT min(a.ended_at) FROM attempts a WHERE
    a.job_id = j.id AND a.outcome <> 'completed') AS first_failed_at, j.lease_expires_at,
    (j.state = 'failed' AND j.order_key IS NOT NULL AND j.order_hold = TRUE) AS holds_key
FROM jobs j
JOIN deliveries d ON d.id = j.delivery_id
WHERE j.state = 'failed'
  AND (j.source = :source OR :source IS NULL)
  AND (j.action = :action OR :action IS NULL)
  AND (j.last_error = :reason OR :reason IS NULL)
  AND (j.failed_at >= :since OR :since IS NULL)
  AND (j.failed_at < :until OR :until IS NULL)
  AND (j.id < :before OR :before IS NULL)
ORDER BY j.id DESC
LIMIT :limit;

-- name: queue.dead_letters_oldest_failure
SELECT j.id, j.delivery_id, j.source, j.action, j.state, j.attempts, j.max_attempts,
    j.last_error, j.trigger, d.event_id, d.event_type, j.business_id, EXISTS (SELECT 1 FROM
    payloads p WHERE p.delivery_id = j.delivery_id) AS payload_retained, j.created_at,
    j.updated_at, j.completed_at, j.failed_at, (SELECT min(a.ended_at) FROM attempts a WHERE
    a.job_id = j.id AND a.outcome <> 'completed') AS first_failed_at, j.lease_expires_at,
    (j.state = 'failed' AND j.order_key IS NOT NULL AND j.order_hold = TRUE) AS holds_key
FROM jobs j
JOIN deliveries d ON d.id = j.delivery_id
WHERE j.state = 'failed'
  AND (j.source = :source OR :source IS NULL)
  AND (j.action = :action OR :action IS NULL)
  AND (j.last_error = :reason OR :reason IS NULL)
  AND (j.failed_at >= :since OR :since IS NULL)
  AND (j.failed_at < :until OR :until IS NULL)
  AND ((j.failed_at, j.id) > (SELECT failed_at, id FROM jobs WHERE id = :before) OR :before IS NULL)
ORDER BY j.failed_at, j.id
LIMIT :limit;

-- name: queue.get_job
SELECT j.id, j.delivery_id, j.source, j.action, j.state, j.attempts, j.max_attempts,
    j.last_error, j.trigger, d.event_id, d.event_type, j.business_id, EXISTS (SELECT 1 FROM
    payloads p WHERE p.delivery_id = j.delivery_id) AS payload_retained, j.created_at,
    j.updated_at, j.completed_at, j.failed_at, (SELECT min(a.ended_at) FROM attempts a WHERE
    a.job_id = j.id AND a.outcome <> 'completed') AS first_failed_at, j.lease_expires_at,
    (j.state = 'failed' AND j.order_key IS NOT NULL AND j.order_hold = TRUE) AS holds_key
FROM jobs j
JOIN deliveries d ON d.id = j.delivery_id
WHERE j.id = :id;

-- name: queue.renew_leases
UPDATE jobs
SET lease_expires_at = ((julianday('now') - 2440587.5) * 86400.0) + :lease
WHERE id IN (SELECT value FROM json_each(:ids))
  AND lease_token IN (SELECT value FROM json_each(:tokens))
  AND state = 'processing'
RETURNING id;

-- name: queue.requeue
UPDATE jobs
SET state = 'accepted', max_attempts = attempts + :more, next_attempt_at = ((julianday('now') - 2440587.5) * 86400.0), trigger =
    :trigger, last_error = NULL, completed_at = NULL, failed_at = NULL, lease_token = NULL,
    leased_by = NULL, lease_expires_at = NULL, updated_at = ((julianday('now') - 2440587.5) * 86400.0)
WHERE id IN (SELECT value FROM json_each(:ids))
  AND state IN (SELECT value FROM json_each(:states))
RETURNING id, source, delivery_id;

-- name: queue.target_deferrals
SELECT count(*)
FROM attempts
WHERE job_id = :id
  AND outcome = 'deferred'
  AND error_code IN (SELECT value FROM json_each(:codes));

-- name: queue.waiting_behind
SELECT h.id, h.delivery_id, h.state, h.attempts, h.max_attempts, h.last_error,
    (SELECT count(*) FROM jobs a WHERE a.order_key = j.order_key AND a.id < j.id
       AND a.order_key IS NOT NULL AND a.state <> 'completed'
       AND (a.state <> 'failed' OR a.order_hold = TRUE)) AS ahead
FROM jobs j
JOIN jobs h ON h.order_key = j.order_key AND h.id < j.id
WHERE j.id = :id
  AND j.state IN ('accepted', 'failed')
  AND h.order_key IS NOT NULL AND h.state <> 'completed'
  AND (h.state <> 'failed' OR h.order_hold = TRUE)
ORDER BY h.id
LIMIT 1;

-- name: reads.count_expired_leases
SELECT count(*)
FROM jobs
WHERE state = 'processing'
  AND lease_expires_at < ((julianday('now') - 2440587.5) * 86400.0);

-- name: reads.count_failed_past_review
SELECT count(*)
FROM jobs
WHERE state = 'failed'
  AND failed_at < ((julianday('now') - 2440587.5) * 86400.0) - :age;

-- name: reads.count_held_keys
SELECT count(DISTINCT order_key)
FROM jobs
WHERE order_key IS NOT NULL AND state <> 'completed'
  AND state = 'failed' AND order_hold = TRUE;

-- name: reads.count_stale_accepted
SELECT count(*)
FROM jobs
WHERE state = 'accepted'
  AND created_at < ((julianday('now') - 2440587.5) * 86400.0) - :age;

-- name: reads.count_unrecorded_effects
SELECT count(*)
FROM effects e
LEFT JOIN jobs j ON j.id = e.job_id
WHERE e.state = 'started'
  AND e.created_at < ((julianday('now') - 2440587.5) * 86400.0) - :age
  AND (j.state IS NULL OR j.state <> 'processing');

-- name: reads.count_unreviewed_transitions
SELECT count(*)
FROM resource_transitions t
JOIN resources r ON r.id = t.resource_id
WHERE t.outcome = 'rejected'
  AND t.reviewed_at IS NULL
  AND t.created_at < ((julianday('now') - 2440587.5) * 86400.0) - :age;

-- name: reads.dead
SELECT source, count(*) AS n
FROM jobs
WHERE state = 'failed'
GROUP BY source;

-- name: reads.failed_per_minute
SELECT CAST(ended_at / 60 AS INTEGER) AS minute, count(*) AS n
FROM attempts
WHERE id > (SELECT coalesce(max(id), 0) FROM attempts) - :scan
  AND ended_at >= :since
  AND outcome IN ('retry', 'failed', 'lease_expired')
GROUP BY 1
ORDER BY 1;

-- name: reads.parked
SELECT source, count(*) AS n
FROM parked_events
GROUP BY source;

-- name: reads.paused
SELECT source, (((julianday('now') - 2440587.5) * 86400.0) - changed_at) AS seconds
FROM source_state
WHERE paused = TRUE;

-- name: reads.per_minute
SELECT source, CAST(first_seen_at / 60 AS INTEGER) AS minute, count(*) AS n
FROM deliveries
WHERE id >= :floor
GROUP BY 1, 2
ORDER BY 2;

-- name: reads.queue
SELECT source, count(*) AS depth, max(CASE WHEN state = 'accepted' AND next_attempt_at <= ((julianday('now') - 2440587.5) * 86400.0)
    THEN (((julianday('now') - 2440587.5) * 86400.0) - next_attempt_at) ELSE 0 END) AS lag
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
SELECT min(d.id) AS id, min(d.id) AS delivery_id, d.source, d.event_type AS detail,
    min(d.first_seen_at) AS since, count(*) AS deliveries
FROM deliveries d
WHERE d.id IN (
    SELECT m.id FROM deliveries m
    WHERE NOT EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = m.id )
      AND m.id >= '')
GROUP BY d.source, d.event_type
ORDER BY d.source, d.event_type
LIMIT :limit;

-- name: reads.sample_expired_leases
SELECT id, delivery_id, source, 'leased by ' || coalesce(leased_by, '?') || ', attempt ' ||
    attempts || '/' || max_attempts AS detail, lease_expires_at AS since
FROM jobs
WHERE state = 'processing'
  AND lease_expires_at < ((julianday('now') - 2440587.5) * 86400.0)
ORDER BY lease_expires_at
LIMIT :limit;

-- name: reads.sample_failed_past_review
SELECT id, delivery_id, source, coalesce(last_error, '') AS detail, failed_at AS since
FROM jobs
WHERE state = 'failed'
  AND failed_at < ((julianday('now') - 2440587.5) * 86400.0) - :age
ORDER BY failed_at
LIMIT :limit;

-- name: reads.sample_held_keys
SELECT j.id, j.delivery_id, j.source, 'holds its key (' || coalesce(j.last_error, '?') ||
    '): ' || CAST((SELECT count(*) FROM jobs w WHERE w.order_key = j.order_key
        AND w.id > j.id AND w.order_key IS NOT NULL AND w.state <> 'completed') AS text) ||
    ' waiting' AS detail, j.failed_at AS since
FROM jobs j
WHERE j.order_key IS NOT NULL AND j.state <> 'completed'
  AND j.state = 'failed' AND j.order_hold = TRUE
ORDER BY j.failed_at
LIMIT :limit;

-- name: reads.sample_stale_accepted
SELECT id, delivery_id, source, coalesce(last_error, 'never ran') AS detail, created_at AS since
FROM jobs
WHERE state = 'accepted'
  AND created_at < ((julianday('now') - 2440587.5) * 86400.0) - :age
ORDER BY created_at
LIMIT :limit;

-- name: reads.sample_unrecorded_effects
SELECT e.key AS id, j.delivery_id, j.source, 'job ' || coalesce(e.job_id, '?') || ' is ' ||
    coalesce(j.state, 'gone') AS detail, e.created_at AS since
FROM effects e
LEFT JOIN jobs j ON j.id = e.job_id
WHERE e.state = 'started'
  AND e.created_at < ((julianday('now') - 2440587.5) * 86400.0) - :age
  AND (j.state IS NULL OR j.state <> 'processing')
ORDER BY e.created_at
LIMIT :limit;

-- name: reads.sample_unreviewed_transitions
SELECT 'transition ' || CAST(t.id AS text) AS id, t.delivery_id, coalesce(t.source, r.kind) AS
    source, t.resource_id || ' ' || coalesce(t.from_state, '?') || ' -> ' || coalesce(t.to_state,
    '?') || ' (' || coalesce(t.reason, '?') || ', tenant ' || coalesce(t.tenant, '-') || ')' AS
    detail, t.created_at AS since
FROM resource_transitions t
JOIN resources r ON r.id = t.resource_id
WHERE t.outcome = 'rejected'
  AND t.reviewed_at IS NULL
  AND t.created_at < ((julianday('now') - 2440587.5) * 86400.0) - :age
ORDER BY t.id
LIMIT :limit;

-- name: reads.tables
SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = :pause) AS pause, EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = :parked) AS parked, EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = :outbox) AS
    outbox;

-- name: reads.unsent
SELECT coalesce(source, '_none') AS source, state = 'failed' AS failed, count(*) AS n
FROM outbox
WHERE state <> 'sent'
GROUP BY 1, 2;

-- name: receipts.add
INSERT INTO receipt_counts (minute, source, outcome, answers)
VALUES (:minute, :source, :outcome, :answers)
ON CONFLICT (minute, source, outcome)
DO UPDATE SET answers = receipt_counts.answers + excluded.answers;

-- name: receipts.forget
DELETE FROM receipt_counts WHERE minute < :oldest;

-- name: receipts.since
SELECT minute, source, outcome, answers
FROM receipt_counts
WHERE minute >= :first
ORDER BY minute, source, outcome;

-- name: rejected_deliveries.count_old
SELECT count(*)
FROM rejected_deliveries
WHERE last_seen_at < ((julianday('now') - 2440587.5) * 86400.0) - :age;

-- name: rejected_deliveries.get
SELECT id, source, reason, body_sha256, body_bytes, (body IS NOT NULL) AS body_kept, headers,
    first_seen_at, last_seen_at, seen, retried_at, retry_outcome, retry_delivery_id, body
FROM rejected_deliveries
WHERE id = :id;

-- name: rejected_deliveries.keep
INSERT INTO rejected_deliveries (id, source, reason, body_sha256, body, body_bytes, stored_bytes
    , headers, first_seen_at, last_seen_at, seen, subject_hash)
VALUES (:id, :source, :reason, :sha, :body, :body_bytes, :stored, :headers, ((julianday('now') - 2440587.5) * 86400.0), ((julianday('now') - 2440587.5) * 86400.0), 1,
    :subject_hash)
ON CONFLICT (source, body_sha256) DO UPDATE
SET reason = excluded.reason, headers = excluded.headers, stored_bytes = excluded.stored_bytes,
    body = coalesce(rejected_deliveries.body, excluded.body),
    subject_hash = coalesce(excluded.subject_hash, rejected_deliveries.subject_hash), last_seen_at =
    excluded.last_seen_at, seen = rejected_deliveries.seen + 1, retried_at = NULL, retry_outcome
    = NULL, retry_delivery_id = NULL
RETURNING id;

-- name: rejected_deliveries.list
SELECT id, source, reason, body_sha256, body_bytes, (body IS NOT NULL) AS body_kept, headers,
    first_seen_at, last_seen_at, seen, retried_at, retry_outcome, retry_delivery_id
FROM rejected_deliveries
WHERE (source = :source OR :source IS NULL)
  AND (:everything OR (retry_outcome IS NULL OR retry_outcome NOT IN ('accepted', 'duplicate')))
  AND (id < :before OR :before IS NULL)
ORDER BY id DESC
LIMIT :limit;

-- name: rejected_deliveries.mark
UPDATE rejected_deliveries
SET retried_at = ((julianday('now') - 2440587.5) * 86400.0), retry_outcome = :outcome, retry_delivery_id = :delivery_id
WHERE id = :id;

-- name: rejected_deliveries.oldest_unsettled
SELECT id, source, reason, body_sha256, body_bytes, (body IS NOT NULL) AS body_kept, headers,
    first_seen_at, last_seen_at, seen, retried_at, retry_outcome, retry_delivery_id
FROM rejected_deliveries
WHERE (source = :source OR :source IS NULL)
  AND (retry_outcome IS NULL OR retry_outcome NOT IN ('accepted', 'duplicate'))
ORDER BY id
LIMIT :limit;

-- name: rejected_deliveries.purge
DELETE FROM rejected_deliveries
WHERE id IN (SELECT id FROM rejected_deliveries WHERE last_seen_at < ((julianday('now') - 2440587.5) * 86400.0) - :age LIMIT
    :limit);

-- name: rejected_deliveries.ring_lock
SELECT NULL AS locked;

-- name: rejected_deliveries.totals
SELECT source, reason, count(*) AS rows_kept, sum(seen) AS seen, CAST(sum(stored_bytes) AS
    BIGINT) AS stored_bytes
FROM rejected_deliveries
GROUP BY source, reason
ORDER BY source, reason;

-- name: rejected_deliveries.trim
DELETE FROM rejected_deliveries
WHERE id IN (SELECT id FROM (SELECT id, row_number() OVER w AS n, CAST(sum(stored_bytes) OVER w
    AS BIGINT) AS total FROM rejected_deliveries WHERE source = :source WINDOW w AS (ORDER BY
    last_seen_at DESC, id DESC ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)) ranked WHERE n
    > :max_rows OR total > :max_bytes);

-- name: retention.count_deliveries
SELECT count(*) AS old,
    (SELECT count(DISTINCT j.delivery_id) FROM jobs j
     JOIN deliveries h ON h.id = j.delivery_id 
     WHERE j.id < :jobs_ceiling AND j.state <> 'completed'
       AND h.id < :ceiling AND h.last_seen_at < ((julianday('now') - 2440587.5) * 86400.0) - :age) AS held
FROM deliveries d
WHERE d.id < :ceiling
  AND d.last_seen_at < ((julianday('now') - 2440587.5) * 86400.0) - :age;

-- name: retention.count_payloads
SELECT count(*)
FROM payloads p
WHERE (SELECT d.first_seen_at FROM deliveries d WHERE d.id = p.delivery_id ) < ((julianday('now') - 2440587.5) * 86400.0)
    - :age
  AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = p.delivery_id AND (j.state <>
      'completed' OR j.completed_at >= ((julianday('now') - 2440587.5) * 86400.0) - :age) );

-- name: retention.delivery_batch
SELECT d.id
FROM deliveries d
WHERE d.id < :ceiling
  AND d.last_seen_at < ((julianday('now') - 2440587.5) * 86400.0) - :age
  AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id AND j.state <> 'completed'
      )
ORDER BY d.id
LIMIT :limit ;

-- name: retention.drop_deliveries
DELETE FROM deliveries
WHERE id IN (SELECT value FROM json_each(:ids));

-- name: retention.drop_effects
DELETE FROM effects
WHERE job_id IN (SELECT id FROM jobs WHERE delivery_id IN (SELECT value FROM json_each(:ids)) AND id >= :lo AND id < :hi);

-- name: retention.drop_payloads
DELETE FROM payloads
WHERE delivery_id IN (SELECT value FROM json_each(:ids));

-- name: retention.drop_superseded
DELETE FROM effects_superseded
WHERE job_id IN (SELECT id FROM jobs WHERE delivery_id IN (SELECT value FROM json_each(:ids)) AND id >= :lo AND id < :hi);

-- name: retention.lock_batch_jobs
SELECT j.delivery_id, j.state
FROM jobs j
WHERE j.delivery_id IN (SELECT value FROM json_each(:ids)) AND j.id >= :lo AND j.id < :hi
ORDER BY j.id
;

-- name: retention.mark_purged
UPDATE deliveries
SET payload_purged_at = ((julianday('now') - 2440587.5) * 86400.0)
WHERE id IN (SELECT value FROM json_each(:ids));

-- name: retention.payload_batch
SELECT p.delivery_id AS id
FROM payloads p
WHERE (SELECT d.first_seen_at FROM deliveries d WHERE d.id = p.delivery_id ) < ((julianday('now') - 2440587.5) * 86400.0)
    - :age
  AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = p.delivery_id AND (j.state <>
      'completed' OR j.completed_at >= ((julianday('now') - 2440587.5) * 86400.0) - :age) )
LIMIT :limit ;

-- name: reviews.get
SELECT t.id, CASE WHEN t.reason IN ('source_mismatch', 'tenant_mismatch', 'owner_mismatch')
    THEN NULL ELSE t.resource_id END AS resource_id, r.kind, t.source, t.tenant, CASE WHEN
    t.reason IN ('source_mismatch', 'tenant_mismatch', 'owner_mismatch') THEN NULL ELSE
    t.from_state END AS from_state, t.to_state, t.reason, t.delivery_id, t.job_id,
    t.event_type, t.created_at, t.reviewed_at, t.reviewed_by, t.review_note
FROM resource_transitions t
JOIN resources r ON r.id = t.resource_id
WHERE t.id = :id
  AND t.outcome = 'rejected';

-- name: reviews.list
SELECT t.id, CASE WHEN t.reason IN ('source_mismatch', 'tenant_mismatch', 'owner_mismatch')
    THEN NULL ELSE t.resource_id END AS resource_id, r.kind, t.source, t.tenant, CASE WHEN
    t.reason IN ('source_mismatch', 'tenant_mismatch', 'owner_mismatch') THEN NULL ELSE
    t.from_state END AS from_state, t.to_state, t.reason, t.delivery_id, t.job_id,
    t.event_type, t.created_at, t.reviewed_at, t.reviewed_by, t.review_note
FROM resource_transitions t
JOIN resources r ON r.id = t.resource_id
WHERE t.outcome = 'rejected'
  AND (t.reviewed_at IS NULL OR :resolved = 1)
  AND (t.tenant = :tenant OR :tenant IS NULL)
  AND (t.source = :source OR :source IS NULL)
  AND (t.id < :before OR :before IS NULL)
ORDER BY t.id DESC
LIMIT :limit;

-- name: reviews.resolve
UPDATE resource_transitions
SET reviewed_at = ((julianday('now') - 2440587.5) * 86400.0), reviewed_by = :actor, review_note = :note
WHERE id = :id
  AND outcome = 'rejected'
  AND reviewed_at IS NULL;

-- name: sealed_rows.payloads_page
SELECT delivery_id AS pk, body AS sealed
FROM payloads
WHERE substr(body, 1, 4) = :magic AND (delivery_id > :after OR :after IS NULL)
ORDER BY delivery_id
LIMIT :limit;

-- name: sealed_rows.rejected_page
SELECT id AS pk, body AS sealed
FROM rejected_deliveries
WHERE body IS NOT NULL AND substr(body, 1, 4) = :magic AND (id > :after OR :after IS NULL)
ORDER BY id
LIMIT :limit;

-- name: sealed_rows.rewrap_payload
UPDATE payloads SET body = :sealed WHERE delivery_id = :pk AND body = :old;

-- name: sealed_rows.rewrap_rejected
UPDATE rejected_deliveries SET body = :sealed WHERE id = :pk AND body = :old;

-- name: sealed_rows.rewrap_snippet
UPDATE attempts SET response_snippet = :sealed
WHERE job_id = :job AND id = :pk AND response_snippet = :old;

-- name: sealed_rows.snippets_page
SELECT id AS pk, job_id AS job, response_snippet AS sealed
FROM attempts
WHERE response_snippet IS NOT NULL AND substr(response_snippet, 1, 5) = :prefix
  AND id > :after
ORDER BY id
LIMIT :limit;

-- name: sources.list
SELECT source, paused, reason, changed_at, changed_by
FROM source_state
ORDER BY source;

-- name: sources.set
INSERT INTO source_state (source, paused, reason, changed_at, changed_by)
VALUES (:source, :paused, :reason, ((julianday('now') - 2440587.5) * 86400.0), :actor)
ON CONFLICT (source) DO UPDATE
SET paused = excluded.paused, reason = excluded.reason, changed_at = excluded.changed_at,
    changed_by = excluded.changed_by
RETURNING source, paused, reason, changed_at, changed_by;

-- name: tracked_resources.attach
UPDATE resources
SET provider_ref = :ref, version = version + 1, updated_at = ((julianday('now') - 2440587.5) * 86400.0)
WHERE id = :id
RETURNING *;

-- name: tracked_resources.counts
SELECT outcome, reason, count(*) AS n
FROM resource_transitions
WHERE outcome IN ('applied', 'rejected')
GROUP BY outcome, reason;

-- name: tracked_resources.create
INSERT INTO resources (id, kind, tenant, owner, state, provider_ref, sources, created_at,
    updated_at)
VALUES (:id, :kind, :tenant, :owner, :state, :ref, :sources, ((julianday('now') - 2440587.5) * 86400.0), ((julianday('now') - 2440587.5) * 86400.0))
ON CONFLICT DO NOTHING
RETURNING *;

-- name: tracked_resources.find
SELECT *
FROM resources
WHERE kind = :kind
  AND provider_ref = :ref;

-- name: tracked_resources.get
SELECT *
FROM resources
WHERE id = :id;

-- name: tracked_resources.get_for_update
SELECT *
FROM resources
WHERE id = :id ;

-- name: tracked_resources.lease_held
SELECT 1
FROM jobs
WHERE id = :id
  AND lease_token = :token
  AND state = 'processing' ;

-- name: tracked_resources.list
SELECT *
FROM resources
WHERE (kind = :kind OR :kind IS NULL)
  AND (tenant = :tenant OR :tenant IS NULL)
  AND (state = :state OR :state IS NULL)
  AND (id < :before OR :before IS NULL)
ORDER BY id DESC
LIMIT :limit;

-- name: tracked_resources.log_of_delivery
SELECT *
FROM resource_transitions
WHERE delivery_id = :id
ORDER BY id;

-- name: tracked_resources.log_of_resource
SELECT *
FROM resource_transitions
WHERE resource_id = :id
ORDER BY id;

-- name: tracked_resources.outbox_unsent
SELECT key, state
FROM outbox
WHERE state IN ('pending', 'sending')
  AND created_at < ((julianday('now') - 2440587.5) * 86400.0) - :age
ORDER BY created_at
LIMIT :limit;

-- name: tracked_resources.parked_past_deadline
SELECT p.job_id
FROM parked_events p
JOIN jobs j ON j.id = p.job_id
WHERE p.deadline < ((julianday('now') - 2440587.5) * 86400.0)
  AND j.state IN ('accepted', 'processing')
ORDER BY p.deadline
LIMIT :limit;

-- name: tracked_resources.terminal_without_delivery
SELECT r.id
FROM resources r
WHERE r.kind = :kind
  AND r.state = :state
  AND NOT EXISTS (SELECT 1 FROM resource_transitions t WHERE t.resource_id = r.id AND t.outcome
      = 'applied' AND t.to_state = r.state AND t.delivery_id IS NOT NULL)
ORDER BY r.id
LIMIT :limit;

-- name: tracked_resources.transition_without_outbox
SELECT t.resource_id
FROM resource_transitions t
JOIN resources r ON r.id = t.resource_id
WHERE r.kind = :kind
  AND t.outcome = 'applied'
  AND t.to_state = :state
  AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.key = :outbox_kind || ':' || t.resource_id)
ORDER BY t.id
LIMIT :limit;

-- name: tracked_resources.unbound_moved
SELECT id, state
FROM resources
WHERE kind = :kind
  AND sources IS NULL
  AND state <> :initial
ORDER BY id
LIMIT :limit;

-- name: tracked_resources.wake_parked
UPDATE jobs
SET next_attempt_at = ((julianday('now') - 2440587.5) * 86400.0), updated_at = ((julianday('now') - 2440587.5) * 86400.0)
WHERE state = 'accepted'
  AND id IN (SELECT job_id FROM parked_events WHERE kind = :kind AND provider_ref = :ref);

-- name: transitions.applied_before
SELECT outbox_key
FROM resource_transitions
WHERE resource_id = :resource_id
  AND delivery_id = :delivery_id
  AND outcome = 'applied'
LIMIT 1;

-- name: transitions.end_leased_attempt
INSERT INTO attempts (job_id, number, trigger, worker, started_at, ended_at, outcome,
                      error_code)
SELECT id, attempts, trigger, leased_by, leased_at, ((julianday('now') - 2440587.5) * 86400.0), :outcome, :error
FROM jobs
WHERE id = :id AND state = 'processing';

-- name: transitions.find
SELECT *
FROM resources
WHERE kind = :kind
  AND provider_ref = :ref ;

-- name: transitions.first_attempt
UPDATE jobs
SET attempts = 1
WHERE id = :id;

-- name: transitions.log
INSERT INTO resource_transitions (resource_id, from_state, to_state, outcome, reason,
    delivery_id, job_id, event_type, event_time, outbox_key, source, tenant, created_at)
VALUES (:resource_id, :from_state, :to_state, :outcome, :reason, :delivery_id, :job_id,
    :event_type, :event_time, :outbox_key, :source, :tenant, ((julianday('now') - 2440587.5) * 86400.0));

-- name: transitions.move
UPDATE resources
SET state = :state, sources = coalesce(sources, :source), version = version + 1,
    updated_at = ((julianday('now') - 2440587.5) * 86400.0)
WHERE id = :id
  AND version = :version;

-- name: transitions.notify
INSERT INTO outbox (key, kind, source, resource_id, body, next_attempt_at, created_at, updated_at)
VALUES (:key, :kind, :source, :resource_id, :body, ((julianday('now') - 2440587.5) * 86400.0), ((julianday('now') - 2440587.5) * 86400.0), ((julianday('now') - 2440587.5) * 86400.0))
ON CONFLICT (key) DO NOTHING;

-- name: transitions.park
INSERT INTO parked_events (job_id, source, kind, provider_ref, checks, parked_at, deadline)
VALUES (:job_id, :source, :kind, :ref, 1, ((julianday('now') - 2440587.5) * 86400.0), ((julianday('now') - 2440587.5) * 86400.0) + :park)
RETURNING checks, deadline, ((julianday('now') - 2440587.5) * 86400.0) AS now;

-- name: transitions.park_again
UPDATE parked_events
SET checks = checks + 1
WHERE job_id = :job_id
RETURNING checks, deadline, ((julianday('now') - 2440587.5) * 86400.0) AS now;

-- name: transitions.receiver_attempt
INSERT INTO attempts (job_id, number, trigger, worker, started_at, ended_at, outcome, error_code)
VALUES (:id, 1, :trigger, :worker, ((julianday('now') - 2440587.5) * 86400.0), ((julianday('now') - 2440587.5) * 86400.0), :outcome, :error);

-- name: transitions.settle
UPDATE jobs
SET state = :state, last_error = :error, business_id = coalesce(:business_id, business_id),
    next_attempt_at = coalesce(:due, next_attempt_at), max_attempts = max_attempts + :extra,
    completed_at = CASE WHEN :state = 'completed' THEN ((julianday('now') - 2440587.5) * 86400.0) ELSE completed_at END, failed_at =
    CASE WHEN :state = 'failed' THEN ((julianday('now') - 2440587.5) * 86400.0) ELSE failed_at END, lease_token = NULL, leased_by =
    NULL, lease_expires_at = NULL, updated_at = ((julianday('now') - 2440587.5) * 86400.0)
WHERE id = :id;

-- name: transitions.unpark
DELETE FROM parked_events
WHERE job_id = :job_id;
