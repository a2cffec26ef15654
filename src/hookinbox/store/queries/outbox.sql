-- The outbox statements (hookinbox.store.outbox); the format: hookinbox/store/statements.py.

-- name: exhausted
UPDATE outbox
SET state = 'failed', last_error = :error, failed_at = {now}, lease_token = NULL, leased_by =
    NULL, lease_expires_at = NULL, updated_at = {now}
WHERE state = 'sending'
  AND lease_expires_at < {now}
  AND attempts >= :max;

-- name: claim
UPDATE outbox
SET state = 'sending', attempts = attempts + 1, lease_token = :token, leased_by = :worker,
    lease_expires_at = {now} + {secs:lease}, updated_at = {now}
WHERE key IN (SELECT key FROM outbox WHERE ((state = 'pending' AND next_attempt_at <= {now}) OR
    (state = 'sending' AND lease_expires_at < {now} AND attempts < :max)) AND (:only_notices =
    FALSE OR kind LIKE 'notify:%') ORDER BY next_attempt_at LIMIT :limit {skip_locked})
RETURNING key, kind, resource_id, body, attempts;

-- name: finish
UPDATE outbox
SET state = :state, last_error = coalesce(:error, last_error), next_attempt_at = {now} +
    {secs:delay}, sent_at = CASE WHEN :state = 'sent' THEN {now} ELSE sent_at END, failed_at =
    CASE WHEN :state = 'failed' THEN {now} ELSE failed_at END, lease_token = NULL, leased_by =
    NULL, lease_expires_at = NULL, updated_at = {now}
WHERE key = :key
  AND lease_token = :token
  AND state = 'sending';

-- name: renew
UPDATE outbox
SET lease_expires_at = {now} + {secs:lease}
WHERE key = :key
  AND lease_token = :token
  AND state = 'sending';

-- name: state
SELECT state
FROM outbox
WHERE key = :key {for_update};

-- name: requeue
UPDATE outbox
SET state = 'pending', attempts = 0, next_attempt_at = {now}, failed_at = NULL, updated_at = {now}
WHERE key = :key
RETURNING *;

-- name: get
SELECT *
FROM outbox
WHERE key = :key;

-- name: list
SELECT *
FROM outbox
WHERE (state = :state OR :state IS NULL)
  AND (kind = :kind OR :kind IS NULL)
ORDER BY created_at DESC, key
LIMIT :limit;
