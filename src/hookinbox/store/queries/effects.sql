-- The effects statements (hookinbox.store.effects); the format: hookinbox/store/statements.py.

-- name: get
SELECT key, state, job_id, result, created_at, recorded_at
FROM effects
WHERE key = :key;

-- name: start
INSERT INTO effects (key, job_id, state, created_at)
VALUES (:key, :job_id, 'started', {now})
ON CONFLICT (key) DO NOTHING;

-- name: held
SELECT 1
FROM jobs
WHERE id = :id
  AND state = 'processing'
  AND lease_expires_at > {now};

-- name: record
INSERT INTO effects (key, job_id, state, result, created_at, recorded_at)
VALUES (:key, NULL, 'recorded', :result, {now}, {now})
ON CONFLICT (key) DO UPDATE
SET state = 'recorded', result = excluded.result, recorded_at = excluded.recorded_at
WHERE effects.state = 'started';

-- name: release
DELETE FROM effects
WHERE key = :key
  AND job_id = :job_id
  AND state = 'started';

-- name: of_jobs
SELECT key, state, job_id, result, created_at, recorded_at
FROM effects
WHERE job_id {in:ids}
ORDER BY created_at, key;

-- name: set_aside
INSERT INTO effects_superseded (key, state, job_id, result, created_at, recorded_at,
    superseded_at, superseded_by) SELECT key, state, job_id, result, created_at, recorded_at,
    {now}, :actor
FROM effects
WHERE job_id {in:ids};

-- name: drop
DELETE FROM effects
WHERE job_id {in:ids}
RETURNING key;
