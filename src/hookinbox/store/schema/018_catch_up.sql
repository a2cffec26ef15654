-- Catch-up: deliveries pulled from a provider's API instead of received as webhooks.
-- origin says which way each journal row came ('webhook' or 'catch_up'): an API answer
-- is authenticated by TLS and the API key, not by the webhook's signature, and operators
-- see the difference in the journal, the trace and the metrics.
ALTER TABLE deliveries ADD COLUMN origin text NOT NULL DEFAULT 'webhook';

-- One row per source that catch-up has run for: how far it has pulled (position, unix
-- seconds of the provider's clock: everything at or after it is still to be looked at),
-- where an interrupted run stopped (resume_after, the provider's page token, and
-- resume_ceiling, the newest time that run saw: the position once the run completes),
-- and what the last run reported. version is bumped by every write, so two runs of one
-- source at once never both move the cursor (a compare-and-set).
CREATE TABLE catch_up_cursors (
    source          text PRIMARY KEY,
    position        bigint,
    resume_after    text,
    resume_ceiling  bigint,
    version         bigint NOT NULL DEFAULT 0,
    updated_at      {time} NOT NULL,
    last_report     text
);
