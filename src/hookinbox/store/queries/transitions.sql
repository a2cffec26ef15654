-- The transitions statements (hookinbox.store.transitions); the format:
-- hookinbox/store/statements.py.

-- name: find
SELECT *
FROM resources
WHERE kind = :kind
  AND provider_ref = :ref {for_update};

-- name: log
-- :source and :tenant are the sender's (the tenant its review belongs to), not the
-- resource's.
INSERT INTO resource_transitions (resource_id, from_state, to_state, outcome, reason,
    delivery_id, job_id, event_type, event_time, outbox_key, source, tenant, created_at)
VALUES (:resource_id, :from_state, :to_state, :outcome, :reason, :delivery_id, :job_id,
    :event_type, :event_time, :outbox_key, :source, :tenant, {now});

-- name: applied_before
SELECT outbox_key
FROM resource_transitions
WHERE resource_id = :resource_id
  AND delivery_id = :delivery_id
  AND outcome = 'applied'
LIMIT 1;

-- name: move
-- The first event applied to a resource created without sources binds it to its own.
UPDATE resources
SET state = :state, sources = coalesce(sources, :source), version = version + 1,
    updated_at = {now}
WHERE id = :id
  AND version = :version;

-- name: notify
INSERT INTO outbox (key, kind, source, resource_id, body, next_attempt_at, created_at, updated_at)
VALUES (:key, :kind, :source, :resource_id, :body, {now}, {now}, {now})
ON CONFLICT (key) DO NOTHING;

-- name: park_again
UPDATE parked_events
SET checks = checks + 1
WHERE job_id = :job_id
RETURNING checks, deadline, {now} AS now;

-- name: park
INSERT INTO parked_events (job_id, source, kind, provider_ref, checks, parked_at, deadline)
VALUES (:job_id, :source, :kind, :ref, 1, {now}, {now} + {secs:park})
RETURNING checks, deadline, {now} AS now;

-- name: unpark
DELETE FROM parked_events
WHERE job_id = :job_id;

-- name: settle
UPDATE jobs
SET state = :state, last_error = :error, business_id = coalesce(:business_id, business_id),
    next_attempt_at = coalesce(:due, next_attempt_at), max_attempts = max_attempts + :extra,
    completed_at = CASE WHEN :state = 'completed' THEN {now} ELSE completed_at END, failed_at =
    CASE WHEN :state = 'failed' THEN {now} ELSE failed_at END, lease_token = NULL, leased_by =
    NULL, lease_expires_at = NULL, updated_at = {now}
WHERE id = :id;

-- name: first_attempt
UPDATE jobs
SET attempts = 1
WHERE id = :id;

-- name: receiver_attempt
INSERT INTO attempts (job_id, number, trigger, worker, started_at, ended_at, outcome, error_code)
VALUES (:id, 1, :trigger, :worker, {now}, {now}, :outcome, :error);

-- name: end_leased_attempt
-- The attempt of a job settled in a resource's transaction (the lease checked by the
-- caller), ended now with :outcome and :error: before the job's lease is cleared.
INSERT INTO attempts (job_id, number, trigger, worker, started_at, ended_at, outcome,
                      error_code)
SELECT id, attempts, trigger, leased_by, leased_at, {now}, :outcome, :error
FROM jobs
WHERE id = :id AND state = 'processing';
