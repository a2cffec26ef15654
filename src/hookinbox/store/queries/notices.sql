-- The notices statements (hookinbox.store.notices); the format: hookinbox/store/statements.py.

-- name: dead_letters
SELECT source, action AS subject, coalesce(last_error, '') AS reason, {minute:failed_at} AS
    minute, count(*) AS n, NULL AS actor
FROM jobs
WHERE state = 'failed'
  AND failed_at > {now} - {secs:lookback}
GROUP BY source, action, last_error, {minute:failed_at}
ORDER BY minute
LIMIT :limit;

-- name: pauses
SELECT source, 'paused' AS subject, 'operator' AS reason, {minute:at} AS minute, count(*) AS n,
    max(actor) AS actor
FROM operator_actions
WHERE command = 'pause'
  AND source IS NOT NULL
  AND at > {now} - {secs:lookback}
GROUP BY source, {minute:at}
ORDER BY minute
LIMIT :limit;

-- name: rejected
SELECT source, 'rejected' AS subject, reason, {minute:last_seen_at} AS minute, CAST(sum(seen) AS
    BIGINT) AS n, NULL AS actor
FROM rejected_deliveries
WHERE last_seen_at > {now} - {secs:lookback}
GROUP BY source, reason, {minute:last_seen_at}
ORDER BY minute
LIMIT :limit;

-- name: circuits
-- A circuit's last opening (kept when it closes again): no source, the destination as
-- the subject.
SELECT '' AS source, name AS subject, 'consecutive_failures' AS reason, {minute:last_opened_at}
    AS minute, 1 AS n, NULL AS actor
FROM destinations
WHERE last_opened_at > {now} - {secs:lookback}
ORDER BY minute
LIMIT :limit;

-- name: sent_last_hour
SELECT count(*)
FROM outbox
WHERE kind = :kind
  AND created_at > {now} - {secs:hour};

-- name: exists
SELECT count(*)
FROM outbox
WHERE key = :key;

-- name: insert
INSERT INTO outbox (key, kind, source, resource_id, body, next_attempt_at, created_at, updated_at)
VALUES (:key, :kind, :source, NULL, :body, {now}, {now}, {now})
ON CONFLICT (key) DO NOTHING;
