-- Refused deliveries kept for a retry (hookinbox.store.rejected_deliveries); the file format:
-- hookinbox/store/statements.py.

-- name: keep
INSERT INTO rejected_deliveries (id, source, reason, body_sha256, body, body_bytes, stored_bytes
    , headers, first_seen_at, last_seen_at, seen, subject_hash)
VALUES (:id, :source, :reason, :sha, :body, :body_bytes, :stored, :headers, {now}, {now}, 1,
    :subject_hash)
ON CONFLICT (source, body_sha256) DO UPDATE
SET reason = excluded.reason, headers = excluded.headers, stored_bytes = excluded.stored_bytes,
    body = coalesce(rejected_deliveries.body, excluded.body),
    subject_hash = coalesce(excluded.subject_hash, rejected_deliveries.subject_hash), last_seen_at =
    excluded.last_seen_at, seen = rejected_deliveries.seen + 1, retried_at = NULL, retry_outcome
    = NULL, retry_delivery_id = NULL
RETURNING id;

-- name: ring_lock
-- Writes of one source take turns (else two concurrent trims, each not seeing the other's
-- new row, could leave the ring one row over its bound).
SELECT {xact_lock:ring} AS locked;

-- name: trim
-- The ring: the source's rows newest first; past max_rows, or past max_bytes in total.
DELETE FROM rejected_deliveries
WHERE id IN (SELECT id FROM (SELECT id, row_number() OVER w AS n, CAST(sum(stored_bytes) OVER w
    AS BIGINT) AS total FROM rejected_deliveries WHERE source = :source WINDOW w AS (ORDER BY
    last_seen_at DESC, id DESC ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)) ranked WHERE n
    > :max_rows OR total > :max_bytes);

-- fragment: listed
id, source, reason, body_sha256, body_bytes, (body IS NOT NULL) AS body_kept, headers,
    first_seen_at, last_seen_at, seen, retried_at, retry_outcome, retry_delivery_id

-- fragment: unsettled
-- Not yet accepted by a retry.
(retry_outcome IS NULL OR retry_outcome NOT IN ('accepted', 'duplicate'))

-- name: list
SELECT {include:listed}
FROM rejected_deliveries
WHERE (source = :source OR :source IS NULL)
  AND (:everything OR {include:unsettled})
  AND (id < :before OR :before IS NULL)
ORDER BY id DESC
LIMIT :limit;

-- name: oldest_unsettled
-- Oldest first: a bulk retry catches up in the order the provider sent them.
SELECT {include:listed}
FROM rejected_deliveries
WHERE (source = :source OR :source IS NULL)
  AND {include:unsettled}
ORDER BY id
LIMIT :limit;

-- name: get
SELECT {include:listed}, body
FROM rejected_deliveries
WHERE id = :id;

-- name: mark
UPDATE rejected_deliveries
SET retried_at = {now}, retry_outcome = :outcome, retry_delivery_id = :delivery_id
WHERE id = :id;

-- name: count_old
SELECT count(*)
FROM rejected_deliveries
WHERE last_seen_at < {now} - {secs:age};

-- name: purge
DELETE FROM rejected_deliveries
WHERE id IN (SELECT id FROM rejected_deliveries WHERE last_seen_at < {now} - {secs:age} LIMIT
    :limit);

-- name: totals
SELECT source, reason, count(*) AS rows_kept, sum(seen) AS seen, CAST(sum(stored_bytes) AS
    BIGINT) AS stored_bytes
FROM rejected_deliveries
GROUP BY source, reason
ORDER BY source, reason;
