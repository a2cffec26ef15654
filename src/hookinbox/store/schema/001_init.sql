-- Written once for both databases; the macros in braces are the dialect's types
-- (hookinbox.store.dialect: {time} is timestamptz on PostgreSQL and REAL unix seconds
-- from SQLite's own clock on SQLite, {serial} an auto-numbered key, ...).

-- The journal: one row per (source, event id), kept for the whole key retention.
-- Ids are time-ordered (hex ms + counter) and compared byte by byte (COLLATE "C"), whatever the
-- database collation, so newest-first pages are a walk over the primary key.
CREATE TABLE deliveries (
    id              {ordered_text} PRIMARY KEY,
    source          text NOT NULL,
    event_id        text NOT NULL,
    event_type      text NOT NULL,
    body_sha256     text NOT NULL,
    first_seen_at   {time} NOT NULL{default_now},
    last_seen_at    {time} NOT NULL{default_now},
    delivery_count  integer NOT NULL DEFAULT 1,
    conflicts       integer NOT NULL DEFAULT 0,
    payload_purged_at {time},
    CONSTRAINT deliveries_source_event_id_key UNIQUE (source, event_id)
);
CREATE INDEX deliveries_event_id_idx ON deliveries (event_id);
CREATE INDEX deliveries_source_id_idx ON deliveries (source, id);

-- Raw payloads, kept only until processing completes plus a short window.
CREATE TABLE payloads (
    delivery_id text PRIMARY KEY REFERENCES deliveries (id) ON DELETE CASCADE,
    body        {bytes} NOT NULL,
    headers     text NOT NULL
);

-- One job per (delivery, action); the id is stable: the delivery id, ':', the action.
CREATE TABLE jobs (
    id               text PRIMARY KEY,
    delivery_id      text NOT NULL REFERENCES deliveries (id) ON DELETE CASCADE,
    source           text NOT NULL,
    action           text NOT NULL,
    state            text NOT NULL DEFAULT 'accepted'
                     CHECK (state IN ('accepted', 'processing', 'completed', 'failed')),
    attempts         integer NOT NULL DEFAULT 0,
    max_attempts     integer NOT NULL,
    next_attempt_at  {time} NOT NULL{default_now},
    lease_token      text,
    leased_by        text,
    lease_expires_at {time},
    last_error       text,
    business_id      text,
    trigger          text NOT NULL DEFAULT 'delivery',
    created_at       {time} NOT NULL{default_now},
    updated_at       {time} NOT NULL{default_now},
    completed_at     {time},
    failed_at        {time}
);
CREATE INDEX jobs_delivery_idx ON jobs (delivery_id);
CREATE INDEX jobs_due_idx ON jobs (next_attempt_at) WHERE state = 'accepted';
CREATE INDEX jobs_lease_idx ON jobs (lease_expires_at) WHERE state = 'processing';
CREATE INDEX jobs_failed_idx ON jobs (failed_at) WHERE state = 'failed';

-- Every attempt of every job, for trace and for the dead-letter view.
CREATE TABLE attempts (
    id         {serial},
    job_id     text NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    number     integer NOT NULL,
    trigger    text NOT NULL,
    worker     text NOT NULL,
    started_at {time} NOT NULL{default_now},
    ended_at   {time},
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
    created_at  {time} NOT NULL{default_now},
    recorded_at {time}
);
CREATE INDEX effects_job_idx ON effects (job_id);
