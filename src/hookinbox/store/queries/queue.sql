-- The queue statements (hookinbox.store.queue); the format: hookinbox/store/statements.py.

-- name: get_job
SELECT j.id, j.delivery_id, j.source, j.action, j.state, j.attempts, j.max_attempts,
    j.last_error, j.trigger, d.event_id, d.event_type, j.business_id, EXISTS (SELECT 1 FROM
    payloads p WHERE p.delivery_id = j.delivery_id) AS payload_retained, j.created_at,
    j.updated_at, j.completed_at, j.failed_at, (SELECT min(a.ended_at) FROM attempts a WHERE
    a.job_id = j.id AND a.outcome <> 'completed') AS first_failed_at, j.lease_expires_at,
    (j.state = 'failed' AND j.order_key IS NOT NULL AND j.order_hold = TRUE) AS holds_key
FROM jobs j
JOIN deliveries d ON d.id = j.delivery_id
WHERE j.id = :id;

-- name: count_dead
SELECT count(*)
FROM jobs j
WHERE j.state = 'failed'
  AND (j.source = :source OR :source IS NULL)
  AND (j.action = :action OR :action IS NULL)
  AND (j.last_error = :reason OR :reason IS NULL)
  AND (j.failed_at >= :since OR :since IS NULL)
  AND (j.failed_at < :until OR :until IS NULL);

-- name: attempts
-- The ended attempts, oldest first, then the running one: an attempt row is written only
-- when it ends (:mod:`hookinbox.store.hot_path`), so a leased job's attempt under way
-- (or whose lease ran out, not yet taken over) is read from the job's lease.
SELECT number, trigger, worker, started_at, ended_at, outcome, error_code, target, http_status,
    response_snippet, duration_ms, next_attempt_at
FROM ( SELECT 0 AS running, id AS seq, number, trigger, worker, started_at, ended_at, outcome,
    error_code, target, http_status, response_snippet, duration_ms, next_attempt_at FROM
    attempts WHERE job_id = :id UNION ALL SELECT 1, 0, attempts, trigger, leased_by, leased_at,
    NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL FROM jobs WHERE id = :id AND state =
    'processing') AS history
ORDER BY running, seq;

-- name: waiting_behind
-- What an ordered job that is not running waits behind: the oldest unfinished job of its
-- key before it (the key's head: running, retrying, or a dead letter that holds the
-- key), and how many unfinished jobs of its key are before it. No row: it waits for
-- nothing of its key.
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

-- name: target_deferrals
-- Waits a target asked for (429/503 with Retry-After) that gave their attempt back.
SELECT count(*)
FROM attempts
WHERE job_id = :id
  AND outcome = 'deferred'
  AND error_code {in:codes};


-- name: requeue
-- Attempts are never reset: a requeued job is granted :more attempts on top of those it
-- spent, so attempt numbers count on across replays and retries.
UPDATE jobs
SET state = 'accepted', max_attempts = attempts + :more, next_attempt_at = {now}, trigger =
    :trigger, last_error = NULL, completed_at = NULL, failed_at = NULL, lease_token = NULL,
    leased_by = NULL, lease_expires_at = NULL, updated_at = {now}
WHERE id {in:ids}
  AND state {in:states}
RETURNING id, source, delivery_id;

-- name: dead_letters_newest_job
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

-- name: dead_letters_newest_failure
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

-- name: dead_letters_oldest_failure
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

-- name: renew_leases
-- Renewing every lease a worker holds, in one statement (ids and tokens as lists).
UPDATE jobs
SET lease_expires_at = {now} + {secs:lease}
WHERE id {in:ids}
  AND lease_token {in:tokens}
  AND state = 'processing'
RETURNING id;
