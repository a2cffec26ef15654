-- The admin_sessions statements (hookinbox.store.admin_sessions); the format:
-- hookinbox/store/statements.py.

-- name: forget_expired
DELETE FROM admin_sessions_revoked
WHERE revoked_until < {now};

-- name: revoke
INSERT INTO admin_sessions_revoked (session_id, revoked_until)
VALUES (:session_id, {now} + {secs:ttl})
ON CONFLICT (session_id) DO NOTHING;

-- name: is_revoked
SELECT 1 AS revoked
FROM admin_sessions_revoked
WHERE session_id = :session_id
  AND revoked_until > {now};
