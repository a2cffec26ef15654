-- Ordered routes (docs/concepts/ordering.md). A job's order_key is a hash of its source,
-- action and the value its route's order_key reads (NULL for every unordered job);
-- order_hold says whether a dead letter of the key still holds it. A job with a key is
-- claimed only when no job of the same key with a smaller id is unfinished: the index
-- holds exactly the jobs that may hold a key (the released dead letters too, few and
-- filtered), so that check is one probe, and unordered jobs are not in it at all.
ALTER TABLE jobs ADD COLUMN order_key text;
ALTER TABLE jobs ADD COLUMN order_hold {flag:order_hold};
CREATE INDEX jobs_order_idx ON jobs (order_key, id)
    WHERE order_key IS NOT NULL AND state <> 'completed';
