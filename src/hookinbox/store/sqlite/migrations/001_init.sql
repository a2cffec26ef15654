-- Times are unix seconds (REAL) from SQLite's clock: see hookinbox.store.dialect.SQLITE_NOW.
CREATE TABLE deliveries (
    id              TEXT PRIMARY KEY,
    source          TEXT NOT NULL,
    event_id        TEXT NOT NULL,
    event_type      TEXT NOT NULL,
    body_sha256     TEXT NOT NULL,
    first_seen_at   REAL NOT NULL,
    last_seen_at    REAL NOT NULL,
    delivery_count  INTEGER NOT NULL DEFAULT 1,
    conflicts       INTEGER NOT NULL DEFAULT 0,
    payload_purged_at REAL,
    UNIQUE (source, event_id)
);
CREATE INDEX deliveries_event_id_idx ON deliveries (event_id);
CREATE INDEX deliveries_source_id_idx ON deliveries (source, id);

CREATE TABLE payloads (
    delivery_id TEXT PRIMARY KEY REFERENCES deliveries (id) ON DELETE CASCADE,
    body        BLOB NOT NULL,
    headers     TEXT NOT NULL
);

CREATE TABLE jobs (
    id               TEXT PRIMARY KEY,
    delivery_id      TEXT NOT NULL REFERENCES deliveries (id) ON DELETE CASCADE,
    source           TEXT NOT NULL,
    action           TEXT NOT NULL,
    state            TEXT NOT NULL DEFAULT 'accepted'
                     CHECK (state IN ('accepted', 'processing', 'completed', 'failed')),
    attempts         INTEGER NOT NULL DEFAULT 0,
    max_attempts     INTEGER NOT NULL,
    next_attempt_at  REAL NOT NULL,
    lease_token      TEXT,
    leased_by        TEXT,
    lease_expires_at REAL,
    last_error       TEXT,
    business_id      TEXT,
    trigger          TEXT NOT NULL DEFAULT 'delivery',
    created_at       REAL NOT NULL,
    updated_at       REAL NOT NULL,
    completed_at     REAL,
    failed_at        REAL
);
CREATE INDEX jobs_delivery_idx ON jobs (delivery_id);
CREATE INDEX jobs_due_idx ON jobs (next_attempt_at) WHERE state = 'accepted';
CREATE INDEX jobs_lease_idx ON jobs (lease_expires_at) WHERE state = 'processing';
CREATE INDEX jobs_failed_idx ON jobs (failed_at) WHERE state = 'failed';

CREATE TABLE attempts (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id     TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    number     INTEGER NOT NULL,
    trigger    TEXT NOT NULL,
    worker     TEXT NOT NULL,
    started_at REAL NOT NULL,
    ended_at   REAL,
    outcome    TEXT,
    error_code TEXT
);
CREATE INDEX attempts_job_idx ON attempts (job_id, id);

CREATE TABLE effects (
    key         TEXT PRIMARY KEY,
    job_id      TEXT,
    state       TEXT NOT NULL CHECK (state IN ('started', 'recorded')),
    result      TEXT,
    created_at  REAL NOT NULL,
    recorded_at REAL
);
CREATE INDEX effects_job_idx ON effects (job_id);
