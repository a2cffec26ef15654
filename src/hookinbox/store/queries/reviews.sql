-- The reviews statements (hookinbox.store.reviews); the format: hookinbox/store/statements.py.

-- name: list
SELECT t.id, t.resource_id, r.kind, r.tenant, t.from_state, t.to_state, t.reason, t.delivery_id,
    t.job_id, t.event_type, t.created_at, t.reviewed_at, t.reviewed_by, t.review_note
FROM resource_transitions t
JOIN resources r ON r.id = t.resource_id
WHERE t.outcome = 'rejected'
  AND (t.reviewed_at IS NULL OR :resolved = 1)
  AND (t.id < :before OR :before IS NULL)
ORDER BY t.id DESC
LIMIT :limit;

-- name: get
SELECT t.id, t.resource_id, r.kind, r.tenant, t.from_state, t.to_state, t.reason, t.delivery_id,
    t.job_id, t.event_type, t.created_at, t.reviewed_at, t.reviewed_by, t.review_note
FROM resource_transitions t
JOIN resources r ON r.id = t.resource_id
WHERE t.id = :id
  AND t.outcome = 'rejected';

-- name: resolve
UPDATE resource_transitions
SET reviewed_at = {now}, reviewed_by = :actor, review_note = :note
WHERE id = :id
  AND outcome = 'rejected'
  AND reviewed_at IS NULL;
