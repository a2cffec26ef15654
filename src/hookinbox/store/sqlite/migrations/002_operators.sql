-- Operators (issue 3): pause state per source, an audit of operator commands, the ledger
-- rows a forced replay set aside, and indexes for purge and reconcile.
-- Times are unix seconds (REAL) from SQLite's clock: see hookinbox.store.dialect.SQLITE_NOW.

-- A paused source answers 503 + Retry-After; every receiver process re-reads this table.
CREATE TABLE source_state (
    source     TEXT PRIMARY KEY,
    paused     INTEGER NOT NULL DEFAULT 0 CHECK (paused IN (0, 1)),
    reason     TEXT,
    changed_at REAL NOT NULL,
    changed_by TEXT NOT NULL
);

-- Who started what: every replay, dead-letter retry, pause, resume and forced effect.
-- Ids and short codes only, never a payload.
CREATE TABLE operator_actions (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    at          REAL NOT NULL,
    actor       TEXT NOT NULL,
    command     TEXT NOT NULL,
    source      TEXT,
    delivery_id TEXT,
    job_id      TEXT,
    detail      TEXT
);
CREATE INDEX operator_actions_delivery_idx ON operator_actions (delivery_id, id);
CREATE INDEX operator_actions_job_idx ON operator_actions (job_id, id);

-- Ledger rows moved aside by `replay --force-effects`, kept for the audit trail.
CREATE TABLE effects_superseded (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    key           TEXT NOT NULL,
    job_id        TEXT,
    state         TEXT NOT NULL,
    result        TEXT,
    created_at    REAL NOT NULL,
    recorded_at   REAL,
    superseded_at REAL NOT NULL,
    superseded_by TEXT NOT NULL
);
CREATE INDEX effects_superseded_job_idx ON effects_superseded (job_id);

CREATE INDEX deliveries_last_seen_idx ON deliveries (last_seen_at);
CREATE INDEX jobs_completed_idx ON jobs (completed_at) WHERE state = 'completed';
CREATE INDEX jobs_accepted_created_idx ON jobs (created_at) WHERE state = 'accepted';
CREATE INDEX effects_started_idx ON effects (created_at) WHERE state = 'started';
