-- Webhook answers per minute, source and outcome (duplicates, conflicts, refusals),
-- added up from every process's memory every few seconds: a count per row, never a row
-- per request, so a flood of forged requests costs one upsert per flush, not a write
-- each. The overview's last hour reads it; rows older than a few hours are dropped.
CREATE TABLE receipt_counts (
    minute  bigint NOT NULL,
    source  text NOT NULL,
    outcome text NOT NULL,
    answers bigint NOT NULL,
    PRIMARY KEY (minute, source, outcome)
);
