-- What each attempt met (issue 12, timeline detail): the target (a forward's host and
-- path, or the handler's name), the HTTP status or nothing, a bounded snippet of the
-- target's answer (never the payload sent), how long it took, and when the job is due
-- again. Written by the settle that ends the attempt.
ALTER TABLE attempts ADD COLUMN target text;
ALTER TABLE attempts ADD COLUMN http_status integer;
ALTER TABLE attempts ADD COLUMN response_snippet text;
ALTER TABLE attempts ADD COLUMN duration_ms integer;
ALTER TABLE attempts ADD COLUMN next_attempt_at {time};

-- A forward destination shared by every worker process (issue 13, backpressure): a token
-- bucket (tokens, refilled_at), the forwards under way (destination_slots), and the
-- circuit (consecutive failures, opened_at; probe_until holds the one half-open probe;
-- last_opened_at and openings stay when it closes, for notices and the admin).
-- Every change happens with the row locked, so processes on any host agree.
CREATE TABLE destinations (
    name         text PRIMARY KEY,
    tokens       double precision NOT NULL,
    refilled_at  {time} NOT NULL,
    failures     integer NOT NULL DEFAULT 0,
    opened_at    {time},
    probe_until  {time},
    openings     integer NOT NULL DEFAULT 0,
    last_opened_at {time},
    updated_at   {time} NOT NULL
);
-- One row per forward under way; a slot whose worker died runs out at expires_at.
CREATE TABLE destination_slots (
    job_id       text PRIMARY KEY,
    destination  text NOT NULL,
    expires_at   {time} NOT NULL
);
CREATE INDEX destination_slots_destination_idx ON destination_slots (destination, expires_at);
