-- PostgreSQL's payload, attempt and job partitions (hookinbox.store.partitions): one per
-- UTC day of delivery ids (an attempt's: of its job's id, which begins with the delivery
-- id), made ahead, retired whole. The functions are migrations 019's (payloads), 027's
-- (attempts) and 028's (jobs). The file format: hookinbox/store/statements.py.

-- name: has_partitions
-- Whether the store's schema has its payload partitions (migration 019): a store opened
-- at an earlier version (a test pinning it there) has nothing to make.
SELECT to_regprocedure('hookinbox_payload_partitions_ahead(date, date, text)') IS NOT NULL;

-- name: create_ahead
-- The day partitions missing from :first to :last (UTC days); how many were made.
SELECT hookinbox_payload_partitions_ahead(:first::date, :last::date);

-- name: has_attempt_partitions
-- Whether attempts are partitioned (migration 027).
SELECT to_regclass('attempts_default') IS NOT NULL;

-- name: create_attempts_ahead
SELECT hookinbox_attempt_partitions_ahead(:first::date, :last::date);

-- name: has_job_partitions
-- Whether jobs are partitioned (migration 028).
SELECT to_regclass('jobs_default') IS NOT NULL;

-- name: create_jobs_ahead
SELECT hookinbox_job_partitions_ahead(:first::date, :last::date);

-- name: listing
-- Every partition of :parent with its bounds and the planner's row estimate (-1: never
-- analyzed).
SELECT p.name, p.lo, p.hi, c.reltuples::bigint AS estimate
FROM hookinbox_partitions_of(:parent) p
JOIN pg_class c ON c.oid = to_regclass(p.name)
ORDER BY p.hi NULLS LAST;

-- name: retirable
-- The range partitions of :parent whose every id was made before the cutoff, oldest first.
SELECT p.name, coalesce(p.lo, '') AS lo, p.hi
FROM hookinbox_partitions_of(:parent) p
WHERE p.hi IS NOT NULL
  AND p.hi <= hookinbox_id_floor({now} - {secs:age})
ORDER BY p.hi;

-- name: held
-- The deliveries of a partition whose payload stays: a job unfinished, failed, or
-- completed less than the payload retention ago (a dead-letter retry needs the body).
-- One branch per state, each the size of its partial index's share (the queue, the dead
-- letters, the jobs completed within the retention), never a walk over the day's jobs;
-- the range of job ids prunes the days of jobs but this one.
-- Read before the retiring transaction, under no lock that stops a writer; that
-- transaction adds what became unfinished meanwhile.
SELECT j.delivery_id AS id FROM jobs j
WHERE j.state = 'accepted' AND j.id >= :lo AND j.id < :hi
  AND j.delivery_id >= :lo AND j.delivery_id < :hi
UNION
SELECT j.delivery_id FROM jobs j
WHERE j.state = 'processing' AND j.id >= :lo AND j.id < :hi
  AND j.delivery_id >= :lo AND j.delivery_id < :hi
UNION
SELECT j.delivery_id FROM jobs j
WHERE j.state = 'failed' AND j.id >= :lo AND j.id < :hi
  AND j.delivery_id >= :lo AND j.delivery_id < :hi
UNION
SELECT j.delivery_id FROM jobs j
WHERE j.state = 'completed' AND j.completed_at >= {now} - {secs:age}
  AND j.id >= :lo AND j.id < :hi AND j.delivery_id >= :lo AND j.delivery_id < :hi;

-- name: held_jobs
-- The jobs of a day that stay, with their attempts: unfinished or dead-lettered, through
-- the queue's partial indexes. Read before the retiring transaction (which finds them
-- again) to leave a day with too many for the next turn.
SELECT count(*) FROM (
    SELECT j.id FROM jobs j WHERE j.state = 'accepted' AND j.id >= :lo AND j.id < :hi
    UNION ALL
    SELECT j.id FROM jobs j WHERE j.state = 'processing' AND j.id >= :lo AND j.id < :hi
    UNION ALL
    SELECT j.id FROM jobs j WHERE j.state = 'failed' AND j.id >= :lo AND j.id < :hi
) h;

-- name: count_rows
-- A partition's rows, counted before its retiring transaction (for the report).
SELECT hookinbox_partition_rows(:part);

-- name: retire
-- One short transaction: DETACH, the held payloads back through the parent (into
-- DEFAULT), DROP; moved NULL when a lock was not had within :wait; locked_ms: how long
-- payloads was locked against writers.
SELECT moved, locked_ms
FROM hookinbox_retire_payload_partition(:part, :held::text[], :wait);

-- name: retire_attempts
-- As retire, for a partition of attempts: the attempts of its held jobs move to DEFAULT.
SELECT moved, locked_ms
FROM hookinbox_retire_attempt_partition(:part, :wait);

-- name: retire_jobs
-- As retire, for a partition of jobs: its held jobs move to DEFAULT.
SELECT moved, locked_ms
FROM hookinbox_retire_job_partition(:part, :wait);

-- name: drop_retired_effects
-- The ledger rows of a retired day's jobs (the journal's purge deleted them with their
-- jobs), in batches after the day: those of its range whose job is gone, over
-- effects_job_idx; a job held in DEFAULT keeps its own.
DELETE FROM effects
WHERE key = ANY(ARRAY(
    SELECT e.key FROM effects e
    WHERE e.job_id >= :lo AND e.job_id < :hi
      AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.id = e.job_id)
    LIMIT :limit));

-- name: drop_retired_superseded
DELETE FROM effects_superseded
WHERE id = ANY(ARRAY(
    SELECT e.id FROM effects_superseded e
    WHERE e.job_id >= :lo AND e.job_id < :hi
      AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.id = e.job_id)
    LIMIT :limit));

-- name: drop_retired_parked
-- A parked row left by a job that finished without its resource (it is deleted when the
-- job is woken or dead-lettered, and with the job by the delete trigger, which a DROP
-- does not run).
DELETE FROM parked_events
WHERE job_id = ANY(ARRAY(
    SELECT p.job_id FROM parked_events p
    WHERE p.job_id >= :lo AND p.job_id < :hi
      AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.id = p.job_id)
    LIMIT :limit));

-- name: count_overdue_payloads
-- The row-by-row path's share: payloads below :ceiling (the ids of a day before the
-- retirement cutoff), which may go by the rule of retention.sql count_payloads. That is
-- DEFAULT's (held when their day retired, or received while it had no partition), and a
-- day's that could not retire for a whole day (too many held payloads, or locks always
-- busy), such as a converted store's old table still holding many dead letters' bodies.
-- :ceiling prunes the days in retention away.
SELECT count(*)
FROM payloads p
WHERE p.delivery_id < :ceiling
  AND (SELECT d.first_seen_at FROM deliveries d WHERE d.id = p.delivery_id COLLATE "C") < {now}
    - {secs:age}
  AND NOT EXISTS (SELECT 1 FROM jobs j WHERE {jobs_of:p.delivery_id} AND (j.state <>
      'completed' OR j.completed_at >= {now} - {secs:age}) {per_row});

-- name: overdue_payload_batch
SELECT p.delivery_id AS id
FROM payloads p
WHERE p.delivery_id < :ceiling
  AND (SELECT d.first_seen_at FROM deliveries d WHERE d.id = p.delivery_id COLLATE "C") < {now}
    - {secs:age}
  AND NOT EXISTS (SELECT 1 FROM jobs j WHERE {jobs_of:p.delivery_id} AND (j.state <>
      'completed' OR j.completed_at >= {now} - {secs:age}) {per_row})
LIMIT :limit {skip_locked:p};
