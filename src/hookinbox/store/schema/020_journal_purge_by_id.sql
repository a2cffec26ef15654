-- The journal purge walks deliveries in id order (ids are first-seen ordered, and a row last
-- seen before the cutoff was first seen before it) and filters on last_seen_at, so the
-- index on last_seen_at has no reader left. It had a writer on every duplicate: each
-- UPDATE of last_seen_at changed an indexed column, so none could be a HOT update (a new
-- index entry in every index of the journal, per duplicate).
DROP INDEX deliveries_last_seen_idx;
