-- Tracked resources (issue 4): resources moved by a declared state machine, the log of
-- every transition tried, events parked until their resource is known, and the outbox.
-- Times are unix seconds (REAL) from SQLite's clock: see hookinbox.store.dialect.SQLITE_NOW.

-- A resource the application created (a video task); provider_ref is the provider's id
-- for it, attached when known and unique per kind (NULLs do not collide).
CREATE TABLE resources (
    id           TEXT PRIMARY KEY,
    kind         TEXT NOT NULL,
    tenant       TEXT NOT NULL,
    owner        TEXT NOT NULL,
    state        TEXT NOT NULL,
    provider_ref TEXT,
    version      INTEGER NOT NULL DEFAULT 1,
    created_at   REAL NOT NULL,
    updated_at   REAL NOT NULL,
    UNIQUE (kind, provider_ref)
);
CREATE INDEX resources_tenant_idx ON resources (tenant, kind, id);
CREATE INDEX resources_kind_state_idx ON resources (kind, state);

-- Every transition tried: created, attached, applied, or rejected with its reason.
CREATE TABLE resource_transitions (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    resource_id TEXT NOT NULL REFERENCES resources (id) ON DELETE CASCADE,
    from_state  TEXT,
    to_state    TEXT,
    outcome     TEXT NOT NULL CHECK (outcome IN ('created', 'attached', 'applied', 'rejected')),
    reason      TEXT,
    delivery_id TEXT,
    job_id      TEXT,
    event_type  TEXT,
    event_time  TEXT,
    outbox_key  TEXT,
    created_at  REAL NOT NULL
);
CREATE INDEX resource_transitions_resource_idx ON resource_transitions (resource_id, id);
CREATE INDEX resource_transitions_delivery_idx ON resource_transitions (delivery_id);
CREATE INDEX resource_transitions_outcome_idx ON resource_transitions (outcome, reason);

-- A job whose event names a reference no resource has yet. The job itself stays
-- 'accepted' (a scheduled re-check); this row holds the deadline that dead-letters it.
CREATE TABLE parked_events (
    job_id       TEXT PRIMARY KEY REFERENCES jobs (id) ON DELETE CASCADE,
    source       TEXT NOT NULL,
    kind         TEXT NOT NULL,
    provider_ref TEXT NOT NULL,
    checks       INTEGER NOT NULL DEFAULT 1,
    parked_at    REAL NOT NULL,
    deadline     REAL NOT NULL
);
CREATE INDEX parked_events_ref_idx ON parked_events (kind, provider_ref);
CREATE INDEX parked_events_deadline_idx ON parked_events (deadline);

-- Notifications to send, written in the transition's transaction, sent by the relay
-- under their stable key (e.g. video-ready:{resource_id}), which is also the
-- Idempotency-Key. body is small JSON built from ids and states, never a payload.
CREATE TABLE outbox (
    key              TEXT PRIMARY KEY,
    kind             TEXT NOT NULL,
    source           TEXT,
    resource_id      TEXT REFERENCES resources (id) ON DELETE SET NULL,
    body             TEXT NOT NULL,
    state            TEXT NOT NULL DEFAULT 'pending'
                     CHECK (state IN ('pending', 'sending', 'sent', 'failed')),
    attempts         INTEGER NOT NULL DEFAULT 0,
    next_attempt_at  REAL NOT NULL,
    lease_token      TEXT,
    leased_by        TEXT,
    lease_expires_at REAL,
    last_error       TEXT,
    created_at       REAL NOT NULL,
    updated_at       REAL NOT NULL,
    sent_at          REAL,
    failed_at        REAL
);
CREATE INDEX outbox_due_idx ON outbox (next_attempt_at) WHERE state = 'pending';
CREATE INDEX outbox_lease_idx ON outbox (lease_expires_at) WHERE state = 'sending';
CREATE INDEX outbox_resource_idx ON outbox (resource_id);
