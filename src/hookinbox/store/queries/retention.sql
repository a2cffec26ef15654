-- Retention (hookinbox.store.retention): what may be purged, in bounded batches; the
-- file format: hookinbox/store/statements.py.
--
-- deliveries.id is COLLATE "C" on PostgreSQL, the columns pointing at it are plain text:
-- each lookup names the collation of the index it should walk (deliveries_pkey: "C";
-- payloads_pkey and jobs_pkey: "default"; a delivery's jobs are the range of jobs_pkey
-- {jobs_of:x} names). Without it PostgreSQL hashes all of deliveries, payloads and jobs
-- for every batch: 4 s per batch of 1,000 at 5 million rows, 0.2 s with it
-- (docs/performance.md, "Cost growth"). A batch's check of each row's jobs is a probe
-- per row ({per_row}): PostgreSQL cannot size a range of ids whose bounds come from the
-- outer row, and flattened into an anti-join it read every day of jobs once per batch
-- (0.24 s a batch at 5 million jobs).

-- name: count_payloads
-- A payload may go once every job of its delivery completed before the cutoff (a delivery
-- no route matched has nothing to wait for). Failed and unfinished deliveries keep theirs:
-- a dead-letter retry needs the body. The walk goes over payloads (oldest first) and
-- looks each delivery up: the journal holds many more rows than payloads once a purge
-- has run, and SQLite would otherwise scan the journal from its oldest row every batch.
SELECT count(*)
FROM payloads p
WHERE (SELECT d.first_seen_at FROM deliveries d WHERE d.id = p.delivery_id {collate:C}) < {now}
    - {secs:age}
  AND NOT EXISTS (SELECT 1 FROM jobs j WHERE {jobs_of:p.delivery_id} AND (j.state <>
      'completed' OR j.completed_at >= {now} - {secs:age}) {per_row});

-- name: payload_batch
-- The next batch of purgeable payloads (see count_payloads); PostgreSQL skips rows a worker holds.
SELECT p.delivery_id AS id
FROM payloads p
WHERE (SELECT d.first_seen_at FROM deliveries d WHERE d.id = p.delivery_id {collate:C}) < {now}
    - {secs:age}
  AND NOT EXISTS (SELECT 1 FROM jobs j WHERE {jobs_of:p.delivery_id} AND (j.state <>
      'completed' OR j.completed_at >= {now} - {secs:age}) {per_row})
LIMIT :limit {skip_locked:p};

-- name: drop_payloads
DELETE FROM payloads
WHERE delivery_id {in:ids};

-- name: mark_purged
UPDATE deliveries
SET payload_purged_at = {now}
WHERE id {in:ids};

-- name: count_deliveries
-- A journal row may go once it was last seen before the cutoff and all its jobs completed;
-- the others as old are held. The walk is over the primary key up to :ceiling (the id of
-- the cutoff, plus an allowance for the receivers' clocks): a row last seen before the
-- cutoff was first seen before it, and ids are first-seen ordered. No index on
-- last_seen_at: every duplicate updates it (020).
-- The held are found from the jobs' side, not by a probe of each old row's jobs (the
-- count runs once, unpaced, before the first batch: a probe per row is a core's seconds
-- at a day of a large store): the jobs of rows below :ceiling have ids below
-- :jobs_ceiling (a job's id is its delivery's, ':', its action), so only the days of
-- jobs below it are read, and on PostgreSQL the days the purge retired are gone. A row
-- whose id was made by hand as a leading part of the ceiling's is not counted held; the
-- batches still hold it back.
SELECT count(*) AS old,
    (SELECT count(DISTINCT j.delivery_id) FROM jobs j
     JOIN deliveries h ON h.id = j.delivery_id {collate:C}
     WHERE j.id < :jobs_ceiling AND j.state <> 'completed'
       AND h.id < :ceiling AND h.last_seen_at < {now} - {secs:age}) AS held
FROM deliveries d
WHERE d.id < :ceiling
  AND d.last_seen_at < {now} - {secs:age};

-- name: delivery_batch
-- Oldest ids first (see count_deliveries); what a batch skips (held rows, rows seen again)
-- is walked again by the next one, a few rows against the batch's thousand.
SELECT d.id
FROM deliveries d
WHERE d.id < :ceiling
  AND d.last_seen_at < {now} - {secs:age}
  AND NOT EXISTS (SELECT 1 FROM jobs j WHERE {jobs_of:d.id} AND j.state <> 'completed'
      {per_row})
ORDER BY d.id
LIMIT :limit {skip_locked:d};

-- name: lock_batch_jobs
-- The batch's jobs, locked before anything is deleted, in id order: a replay's requeue
-- locks the jobs it moves in that order too (by key), so the two wait for each other
-- and never deadlock, where the cascade's delete would lock them in whatever order its
-- join reads them. Read as locked, the state is the latest committed one: a delivery a
-- replay has made unfinished since the batch was read is left out of this batch.
-- The range of the batch's job ids (:lo, :hi) leaves the days of jobs it cannot touch
-- out of the plan (PostgreSQL's jobs are partitioned by day: migration 028).
SELECT j.delivery_id, j.state
FROM jobs j
WHERE j.delivery_id {in:ids} AND j.id >= :lo AND j.id < :hi
ORDER BY j.id
{for_update};

-- name: drop_effects
DELETE FROM effects
WHERE job_id IN (SELECT id FROM jobs WHERE delivery_id {in:ids} AND id >= :lo AND id < :hi);

-- name: drop_superseded
DELETE FROM effects_superseded
WHERE job_id IN (SELECT id FROM jobs WHERE delivery_id {in:ids} AND id >= :lo AND id < :hi);

-- name: drop_deliveries
-- Jobs, attempts and the payload go with the journal row (ON DELETE CASCADE).
DELETE FROM deliveries
WHERE id {in:ids};
