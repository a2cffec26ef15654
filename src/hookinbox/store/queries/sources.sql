-- The sources statements (hookinbox.store.sources); the format: hookinbox/store/statements.py.

-- name: set
INSERT INTO source_state (source, paused, reason, changed_at, changed_by)
VALUES (:source, :paused, :reason, {now}, :actor)
ON CONFLICT (source) DO UPDATE
SET paused = excluded.paused, reason = excluded.reason, changed_at = excluded.changed_at,
    changed_by = excluded.changed_by
RETURNING source, paused, reason, changed_at, changed_by;

-- name: list
SELECT source, paused, reason, changed_at, changed_by
FROM source_state
ORDER BY source;
