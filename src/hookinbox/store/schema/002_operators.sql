-- Operators: pause state per source, an audit of operator commands, the ledger
-- rows a forced replay set aside, and indexes for purge and reconcile.

-- A paused source answers 503 + Retry-After; every receiver process re-reads this table.
CREATE TABLE source_state (
    source     text PRIMARY KEY,
    paused     {flag:paused},
    reason     text,
    changed_at {time} NOT NULL{default_now},
    changed_by text NOT NULL
);

-- Who started what: every replay, dead-letter retry, pause, resume and forced effect.
-- Ids and short codes only, never a payload.
CREATE TABLE operator_actions (
    id          {serial},
    at          {time} NOT NULL{default_now},
    actor       text NOT NULL,
    command     text NOT NULL,
    source      text,
    delivery_id text,
    job_id      text,
    detail      text
);
CREATE INDEX operator_actions_delivery_idx ON operator_actions (delivery_id, id);
CREATE INDEX operator_actions_job_idx ON operator_actions (job_id, id);

-- Ledger rows moved aside by `replay --force-effects`, kept for the audit trail.
CREATE TABLE effects_superseded (
    id            {serial},
    key           text NOT NULL,
    job_id        text,
    state         text NOT NULL,
    result        text,
    created_at    {time} NOT NULL,
    recorded_at   {time},
    superseded_at {time} NOT NULL{default_now},
    superseded_by text NOT NULL
);
CREATE INDEX effects_superseded_job_idx ON effects_superseded (job_id);

CREATE INDEX deliveries_last_seen_idx ON deliveries (last_seen_at);
CREATE INDEX jobs_completed_idx ON jobs (completed_at) WHERE state = 'completed';
CREATE INDEX jobs_accepted_created_idx ON jobs (created_at) WHERE state = 'accepted';
CREATE INDEX effects_started_idx ON effects (created_at) WHERE state = 'started';
