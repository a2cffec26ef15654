-- Deliveries refused for their signature or timestamp, kept for a retry.
-- Bounded: one row per (source, body), a ring per source in rows and bytes, purged after
-- the retention. Never a credential header; the body only up to a size (else NULL).
CREATE TABLE rejected_deliveries (
    id                text PRIMARY KEY,
    source            text NOT NULL,
    reason            text NOT NULL,
    body_sha256       text NOT NULL,
    body              {bytes},
    body_bytes        bigint NOT NULL,
    stored_bytes      bigint NOT NULL,
    headers           text NOT NULL,
    first_seen_at     {time} NOT NULL{default_now},
    last_seen_at      {time} NOT NULL{default_now},
    seen              integer NOT NULL DEFAULT 1,
    retried_at        {time},
    retry_outcome     text,
    retry_delivery_id text,
    CONSTRAINT rejected_deliveries_source_body_key UNIQUE (source, body_sha256)
);
CREATE INDEX rejected_deliveries_source_seen_idx ON rejected_deliveries (source, last_seen_at);
CREATE INDEX rejected_deliveries_seen_idx ON rejected_deliveries (last_seen_at);
