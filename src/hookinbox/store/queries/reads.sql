-- The reads statements (hookinbox.store.reads); the format: hookinbox/store/statements.py.

-- name: tables
SELECT {table_exists:pause} AS pause, {table_exists:parked} AS parked, {table_exists:outbox} AS
    outbox;

-- name: queue
SELECT source, count(*) AS depth, max(CASE WHEN state = 'accepted' AND next_attempt_at <= {now}
    THEN {age:next_attempt_at} ELSE 0 END) AS lag
FROM jobs
WHERE state IN ('accepted', 'processing')
GROUP BY source;

-- name: dead
SELECT source, count(*) AS n
FROM jobs
WHERE state = 'failed'
GROUP BY source;

-- name: paused
SELECT source, {age:changed_at} AS seconds
FROM source_state
WHERE paused = TRUE;

-- name: parked
SELECT source, count(*) AS n
FROM parked_events
GROUP BY source;

-- name: unsent
SELECT coalesce(source, '_none') AS source, state = 'failed' AS failed, count(*) AS n
FROM outbox
WHERE state <> 'sent'
GROUP BY 1, 2;

-- name: per_minute
SELECT source, {minute:first_seen_at} AS minute, count(*) AS n
FROM deliveries
WHERE id >= :floor
GROUP BY 1, 2
ORDER BY 2;

-- name: failed_per_minute
SELECT {minute:ended_at} AS minute, count(*) AS n
FROM attempts
WHERE id > (SELECT coalesce(max(id), 0) FROM attempts) - :scan
  AND ended_at >= :since
  AND outcome IN ('retry', 'failed', 'lease_expired')
GROUP BY 1
ORDER BY 1;

-- name: reasons
SELECT source, action, coalesce(last_error, '') AS reason, count(*) AS n
FROM jobs
WHERE state = 'failed'
GROUP BY 1, 2, 3
ORDER BY n DESC, reason;

-- name: count_expired_leases
SELECT count(*)
FROM jobs
WHERE state = 'processing'
  AND lease_expires_at < {now};

-- name: count_stale_accepted
SELECT count(*)
FROM jobs
WHERE state = 'accepted'
  AND created_at < {now} - {secs:age};

-- name: count_failed_past_review
SELECT count(*)
FROM jobs
WHERE state = 'failed'
  AND failed_at < {now} - {secs:age};

-- name: count_unrecorded_effects
SELECT count(*)
FROM effects e
LEFT JOIN jobs j ON j.id = e.job_id
WHERE e.state = 'started'
  AND e.created_at < {now} - {secs:age}
  AND (j.state IS NULL OR j.state <> 'processing');

-- name: count_unreviewed_transitions
SELECT count(*)
FROM resource_transitions t
JOIN resources r ON r.id = t.resource_id
WHERE t.outcome = 'rejected'
  AND t.reviewed_at IS NULL
  AND t.created_at < {now} - {secs:age};

-- name: count_held_keys
-- Keys of ordered routes held by a dead letter (on_dead_letter = "hold"): nothing more of
-- the key runs until the dead job is retried.
SELECT count(DISTINCT order_key)
FROM jobs
WHERE order_key IS NOT NULL AND state <> 'completed'
  AND state = 'failed' AND order_hold = TRUE;

-- name: sample_expired_leases
SELECT id, delivery_id, source, 'leased by ' || coalesce(leased_by, '?') || ', attempt ' ||
    attempts || '/' || max_attempts AS detail, lease_expires_at AS since
FROM jobs
WHERE state = 'processing'
  AND lease_expires_at < {now}
ORDER BY lease_expires_at
LIMIT :limit;

-- name: sample_stale_accepted
SELECT id, delivery_id, source, coalesce(last_error, 'never ran') AS detail, created_at AS since
FROM jobs
WHERE state = 'accepted'
  AND created_at < {now} - {secs:age}
ORDER BY created_at
LIMIT :limit;

-- name: sample_failed_past_review
SELECT id, delivery_id, source, coalesce(last_error, '') AS detail, failed_at AS since
FROM jobs
WHERE state = 'failed'
  AND failed_at < {now} - {secs:age}
ORDER BY failed_at
LIMIT :limit;

-- name: sample_deliveries_without_jobs
-- Grouped by source and type, each group with its count: the check's count is their sum
-- (no count statement of its own, so the journal is read once).
-- Not the journal rows before the first day of jobs still there (PostgreSQL's days of
-- jobs retire at the key retention; a journal row seen again since keeps its key only).
-- A whole-journal check: one hash anti-join on the delivery id, without the range of
-- {jobs_of}, which serves a probe by key and here would be a filter on every pair. The
-- anti-join reads the journal's ids alone (PostgreSQL: from its primary key, not its
-- rows); only the rows it finds are read whole, for their source and type.
SELECT min(d.id) AS id, min(d.id) AS delivery_id, d.source, d.event_type AS detail,
    min(d.first_seen_at) AS since, count(*) AS deliveries
FROM deliveries d
WHERE d.id IN (
    SELECT m.id FROM deliveries m
    WHERE NOT EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = m.id {collate:default})
      AND m.id >= {jobs_kept_from})
GROUP BY d.source, d.event_type
ORDER BY d.source, d.event_type
LIMIT :limit;

-- name: sample_unrecorded_effects
SELECT e.key AS id, j.delivery_id, j.source, 'job ' || coalesce(e.job_id, '?') || ' is ' ||
    coalesce(j.state, 'gone') AS detail, e.created_at AS since
FROM effects e
LEFT JOIN jobs j ON j.id = e.job_id
WHERE e.state = 'started'
  AND e.created_at < {now} - {secs:age}
  AND (j.state IS NULL OR j.state <> 'processing')
ORDER BY e.created_at
LIMIT :limit;

-- name: sample_unreviewed_transitions
-- The source is the sender's (lines written before it was recorded: the machine's kind),
-- and the tenant the line is filed under follows its reason.
SELECT 'transition ' || CAST(t.id AS text) AS id, t.delivery_id, coalesce(t.source, r.kind) AS
    source, t.resource_id || ' ' || coalesce(t.from_state, '?') || ' -> ' || coalesce(t.to_state,
    '?') || ' (' || coalesce(t.reason, '?') || ', tenant ' || coalesce(t.tenant, '-') || ')' AS
    detail, t.created_at AS since
FROM resource_transitions t
JOIN resources r ON r.id = t.resource_id
WHERE t.outcome = 'rejected'
  AND t.reviewed_at IS NULL
  AND t.created_at < {now} - {secs:age}
ORDER BY t.id
LIMIT :limit;

-- name: sample_held_keys
SELECT j.id, j.delivery_id, j.source, 'holds its key (' || coalesce(j.last_error, '?') ||
    '): ' || CAST((SELECT count(*) FROM jobs w WHERE w.order_key = j.order_key
        AND w.id > j.id AND w.order_key IS NOT NULL AND w.state <> 'completed') AS text) ||
    ' waiting' AS detail, j.failed_at AS since
FROM jobs j
WHERE j.order_key IS NOT NULL AND j.state <> 'completed'
  AND j.state = 'failed' AND j.order_hold = TRUE
ORDER BY j.failed_at
LIMIT :limit;
