-- Admin sessions ended by a logout, each until its cookie would have expired: every
-- receiver process and host reads this table, so a logout ends the session everywhere.
CREATE TABLE admin_sessions_revoked (
    session_id    text PRIMARY KEY,
    revoked_until {time} NOT NULL
);
CREATE INDEX admin_sessions_revoked_until_idx ON admin_sessions_revoked (revoked_until);
