-- Two indexes every received delivery wrote and only rare reads used: one entry per
-- delivery each, in the same statement as the journal row (docs/performance.md, "What a
-- delivery costs PostgreSQL").
--
-- deliveries_event_id_idx (event_id alone, random keys: a random leaf per delivery) served
-- the lookups of an event id without its source (`deliveries show`, trace, search by
-- reference); those now walk the journal's sources over the dedup key (source, event_id)
-- and probe it once per source (queries/journal.sql, fragment sources).
--
-- jobs_accepted_created_idx (created_at of waiting jobs) served the doctor's count and
-- sample of jobs waiting for longer than an age; those now read the waiting jobs through
-- jobs_due_idx (the same rows: state 'accepted'), which the claim keeps small.
DROP INDEX IF EXISTS deliveries_event_id_idx;
DROP INDEX IF EXISTS jobs_accepted_created_idx;
