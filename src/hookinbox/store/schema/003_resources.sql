-- Tracked resources: resources moved by a declared state machine, the log of
-- every transition tried, events parked until their resource is known, and the outbox.

-- A resource the application created (a video task); provider_ref is the provider's id
-- for it, attached when known and unique per kind (NULLs do not collide).
CREATE TABLE resources (
    id           text PRIMARY KEY,
    kind         text NOT NULL,
    tenant       text NOT NULL,
    owner        text NOT NULL,
    state        text NOT NULL,
    provider_ref text,
    version      integer NOT NULL DEFAULT 1,
    created_at   {time} NOT NULL{default_now},
    updated_at   {time} NOT NULL{default_now},
    CONSTRAINT resources_kind_provider_ref_key UNIQUE (kind, provider_ref)
);
CREATE INDEX resources_tenant_idx ON resources (tenant, kind, id);
CREATE INDEX resources_kind_state_idx ON resources (kind, state);

-- Every transition tried: created, attached, applied, or rejected with its reason.
CREATE TABLE resource_transitions (
    id          {serial},
    resource_id text NOT NULL REFERENCES resources (id) ON DELETE CASCADE,
    from_state  text,
    to_state    text,
    outcome     text NOT NULL CHECK (outcome IN ('created', 'attached', 'applied', 'rejected')),
    reason      text,
    delivery_id text,
    job_id      text,
    event_type  text,
    event_time  text,
    outbox_key  text,
    created_at  {time} NOT NULL{default_now}
);
CREATE INDEX resource_transitions_resource_idx ON resource_transitions (resource_id, id);
CREATE INDEX resource_transitions_delivery_idx ON resource_transitions (delivery_id);
CREATE INDEX resource_transitions_outcome_idx ON resource_transitions (outcome, reason);

-- A job whose event names a reference no resource has yet. The job itself stays
-- 'accepted' (a scheduled re-check); this row holds the deadline that dead-letters it.
CREATE TABLE parked_events (
    job_id       text PRIMARY KEY REFERENCES jobs (id) ON DELETE CASCADE,
    source       text NOT NULL,
    kind         text NOT NULL,
    provider_ref text NOT NULL,
    checks       integer NOT NULL DEFAULT 1,
    parked_at    {time} NOT NULL{default_now},
    deadline     {time} NOT NULL
);
CREATE INDEX parked_events_ref_idx ON parked_events (kind, provider_ref);
CREATE INDEX parked_events_deadline_idx ON parked_events (deadline);

-- Notifications to send, written in the transition's transaction, sent by the relay
-- under their stable key (e.g. video-ready:res_...), which is also the
-- Idempotency-Key. body is small JSON built from ids and states, never a payload.
CREATE TABLE outbox (
    key              text PRIMARY KEY,
    kind             text NOT NULL,
    source           text,
    resource_id      text REFERENCES resources (id) ON DELETE SET NULL,
    body             text NOT NULL,
    state            text NOT NULL DEFAULT 'pending'
                     CHECK (state IN ('pending', 'sending', 'sent', 'failed')),
    attempts         integer NOT NULL DEFAULT 0,
    next_attempt_at  {time} NOT NULL{default_now},
    lease_token      text,
    leased_by        text,
    lease_expires_at {time},
    last_error       text,
    created_at       {time} NOT NULL{default_now},
    updated_at       {time} NOT NULL{default_now},
    sent_at          {time},
    failed_at        {time}
);
CREATE INDEX outbox_due_idx ON outbox (next_attempt_at) WHERE state = 'pending';
CREATE INDEX outbox_lease_idx ON outbox (lease_expires_at) WHERE state = 'sending';
CREATE INDEX outbox_resource_idx ON outbox (resource_id);
