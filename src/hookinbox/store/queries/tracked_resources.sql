-- Tracked resources and their transition log (hookinbox.store.tracked_resources); the file
-- format: hookinbox/store/statements.py.

-- name: create
INSERT INTO resources (id, kind, tenant, owner, state, provider_ref, sources, created_at,
    updated_at)
VALUES (:id, :kind, :tenant, :owner, :state, :ref, :sources, {now}, {now})
ON CONFLICT DO NOTHING
RETURNING *;

-- name: get
SELECT *
FROM resources
WHERE id = :id;

-- name: get_for_update
SELECT *
FROM resources
WHERE id = :id {for_update};

-- name: find
SELECT *
FROM resources
WHERE kind = :kind
  AND provider_ref = :ref;

-- name: attach
UPDATE resources
SET provider_ref = :ref, version = version + 1, updated_at = {now}
WHERE id = :id
RETURNING *;

-- name: wake_parked
UPDATE jobs
SET next_attempt_at = {now}, updated_at = {now}
WHERE state = 'accepted'
  AND id IN (SELECT job_id FROM parked_events WHERE kind = :kind AND provider_ref = :ref);

-- name: list
SELECT *
FROM resources
WHERE (kind = :kind OR :kind IS NULL)
  AND (tenant = :tenant OR :tenant IS NULL)
  AND (state = :state OR :state IS NULL)
  AND (id < :before OR :before IS NULL)
ORDER BY id DESC
LIMIT :limit;

-- name: log_of_resource
SELECT *
FROM resource_transitions
WHERE resource_id = :id
ORDER BY id;

-- name: log_of_delivery
SELECT *
FROM resource_transitions
WHERE delivery_id = :id
ORDER BY id;

-- name: lease_held
SELECT 1
FROM jobs
WHERE id = :id
  AND lease_token = :token
  AND state = 'processing' {for_update};

-- name: counts
SELECT outcome, reason, count(*) AS n
FROM resource_transitions
WHERE outcome IN ('applied', 'rejected')
GROUP BY outcome, reason;

-- name: terminal_without_delivery
-- Reconciliation.
SELECT r.id
FROM resources r
WHERE r.kind = :kind
  AND r.state = :state
  AND NOT EXISTS (SELECT 1 FROM resource_transitions t WHERE t.resource_id = r.id AND t.outcome
      = 'applied' AND t.to_state = r.state AND t.delivery_id IS NOT NULL)
ORDER BY r.id
LIMIT :limit;

-- name: transition_without_outbox
SELECT t.resource_id
FROM resource_transitions t
JOIN resources r ON r.id = t.resource_id
WHERE r.kind = :kind
  AND t.outcome = 'applied'
  AND t.to_state = :state
  AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.key = :outbox_kind || ':' || t.resource_id)
ORDER BY t.id
LIMIT :limit;

-- name: unbound_moved
-- A resource moved from its initial state but bound to no source: only one moved before
-- sources were recorded; its next applied event binds it.
SELECT id, state
FROM resources
WHERE kind = :kind
  AND sources IS NULL
  AND state <> :initial
ORDER BY id
LIMIT :limit;

-- name: outbox_unsent
SELECT key, state
FROM outbox
WHERE state IN ('pending', 'sending')
  AND created_at < {now} - {secs:age}
ORDER BY created_at
LIMIT :limit;

-- name: parked_past_deadline
SELECT p.job_id
FROM parked_events p
JOIN jobs j ON j.id = p.job_id
WHERE p.deadline < {now}
  AND j.state IN ('accepted', 'processing')
ORDER BY p.deadline
LIMIT :limit;
