-- The journal: one row per (source, event id), kept for the whole key retention.
-- Ids are time-ordered (hex ms + counter) and compared byte by byte (COLLATE "C"), whatever the
-- database collation, so newest-first pages are a walk over the primary key.
CREATE TABLE deliveries (
    id              text COLLATE "C" PRIMARY KEY,
    source          text NOT NULL,
    event_id        text NOT NULL,
    event_type      text NOT NULL,
    body_sha256     text NOT NULL,
    first_seen_at   timestamptz NOT NULL DEFAULT now(),
    last_seen_at    timestamptz NOT NULL DEFAULT now(),
    delivery_count  integer NOT NULL DEFAULT 1,
    conflicts       integer NOT NULL DEFAULT 0,
    payload_purged_at timestamptz,
    CONSTRAINT deliveries_source_event_id_key UNIQUE (source, event_id)
);
CREATE INDEX deliveries_event_id_idx ON deliveries (event_id);
CREATE INDEX deliveries_source_id_idx ON deliveries (source, id);

-- Raw payloads, kept only until processing completes plus a short window.
CREATE TABLE payloads (
    delivery_id text PRIMARY KEY REFERENCES deliveries (id) ON DELETE CASCADE,
    body        bytea NOT NULL,
    headers     text NOT NULL
);

-- One job per (delivery, action); the id is stable: '{delivery_id}:{action}'.
CREATE TABLE jobs (
    id               text PRIMARY KEY,
    delivery_id      text NOT NULL REFERENCES deliveries (id) ON DELETE CASCADE,
    source           text NOT NULL,
    action           text NOT NULL,
    state            text NOT NULL DEFAULT 'accepted'
                     CHECK (state IN ('accepted', 'processing', 'completed', 'failed')),
    attempts         integer NOT NULL DEFAULT 0,
    max_attempts     integer NOT NULL,
    next_attempt_at  timestamptz NOT NULL DEFAULT now(),
    lease_token      text,
    leased_by        text,
    lease_expires_at timestamptz,
    last_error       text,
    business_id      text,
    trigger          text NOT NULL DEFAULT 'delivery',
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    completed_at     timestamptz,
    failed_at        timestamptz
);
CREATE INDEX jobs_delivery_idx ON jobs (delivery_id);
CREATE INDEX jobs_due_idx ON jobs (next_attempt_at) WHERE state = 'accepted';
CREATE INDEX jobs_lease_idx ON jobs (lease_expires_at) WHERE state = 'processing';
CREATE INDEX jobs_failed_idx ON jobs (failed_at) WHERE state = 'failed';

-- Every attempt of every job, for trace and for the dead-letter view.
CREATE TABLE attempts (
    id         bigserial PRIMARY KEY,
    job_id     text NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    number     integer NOT NULL,
    trigger    text NOT NULL,
    worker     text NOT NULL,
    started_at timestamptz NOT NULL DEFAULT now(),
    ended_at   timestamptz,
    outcome    text,
    error_code text
);
CREATE INDEX attempts_job_idx ON attempts (job_id, id);

-- The effects ledger: one row per stable business key.
CREATE TABLE effects (
    key         text PRIMARY KEY,
    job_id      text,
    state       text NOT NULL CHECK (state IN ('started', 'recorded')),
    result      text,
    created_at  timestamptz NOT NULL DEFAULT now(),
    recorded_at timestamptz
);
CREATE INDEX effects_job_idx ON effects (job_id);
