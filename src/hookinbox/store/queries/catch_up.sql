-- Catch-up (hookinbox.store.catch_up): the per-source cursor and a page of pulled events
-- reserved in one commit with it; the file format: hookinbox/store/statements.py.

-- name: lock
-- Pages of one source commit one at a time (SQLite's write lock already serializes).
SELECT {xact_lock:lock_key} AS locked;

-- name: get
SELECT source, position, resume_after, resume_ceiling, version, updated_at, last_report
FROM catch_up_cursors
WHERE source = :source;

-- name: list
SELECT source, position, resume_after, resume_ceiling, version, updated_at, last_report
FROM catch_up_cursors
ORDER BY source;

-- name: known
-- Which of a page's event ids the journal already holds: those are not reserved again,
-- so an event pulled from the API never counts as a second delivery of the webhook.
SELECT event_id FROM deliveries WHERE source = :source AND event_id {in:ids};

-- name: mark_origin
-- The rows a page reserved, marked as pulled (the reservation itself is the webhook's).
UPDATE deliveries SET origin = :origin WHERE id {in:ids};

-- name: save
-- The cursor moves only from the version this run read (a compare-and-set): a run that
-- finds another has moved it writes nothing and stops.
INSERT INTO catch_up_cursors (source, position, resume_after, resume_ceiling, version,
                              updated_at, last_report)
VALUES (:source, :position, :resume_after, :resume_ceiling, 1, {now}, :report)
ON CONFLICT (source) DO UPDATE
SET position = excluded.position, resume_after = excluded.resume_after,
    resume_ceiling = excluded.resume_ceiling, version = catch_up_cursors.version + 1,
    updated_at = excluded.updated_at, last_report = excluded.last_report
WHERE catch_up_cursors.version = :version
RETURNING version;
