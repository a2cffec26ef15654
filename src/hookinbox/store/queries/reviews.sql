-- The reviews statements (hookinbox.store.reviews); the format: hookinbox/store/statements.py.

-- name: list
-- A line is the sender's: its source and tenant, and for a mismatch neither the id nor the
-- state of the resource it was refused (another party's).
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

-- name: get
-- A line is the sender's: its source and tenant, and for a mismatch neither the id nor the
-- state of the resource it was refused (another party's).
SELECT t.id, CASE WHEN t.reason IN ('source_mismatch', 'tenant_mismatch', 'owner_mismatch')
    THEN NULL ELSE t.resource_id END AS resource_id, r.kind, t.source, t.tenant, CASE WHEN
    t.reason IN ('source_mismatch', 'tenant_mismatch', 'owner_mismatch') THEN NULL ELSE
    t.from_state END AS from_state, t.to_state, t.reason, t.delivery_id, t.job_id,
    t.event_type, t.created_at, t.reviewed_at, t.reviewed_by, t.review_note
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
