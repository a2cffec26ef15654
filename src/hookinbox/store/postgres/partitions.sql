-- PostgreSQL's payload partitions (hookinbox.store.partitions): one per UTC day of
-- delivery ids, made ahead, retired whole. The functions are migration 019's. The file
-- format: hookinbox/store/statements.py.

-- name: create_ahead
-- The day partitions missing from :first to :last (UTC days); how many were made.
SELECT hookinbox_payload_partitions_ahead(:first::date, :last::date);

-- name: listing
-- Every partition with its bounds and the planner's row estimate (-1: never analyzed).
SELECT p.name, p.lo, p.hi, c.reltuples::bigint AS estimate
FROM hookinbox_payload_partitions() p
JOIN pg_class c ON c.oid = to_regclass(p.name)
ORDER BY p.hi NULLS LAST;

-- name: retirable
-- The range partitions whose every delivery id was made before the cutoff, oldest first.
SELECT p.name, coalesce(p.lo, '') AS lo, p.hi
FROM hookinbox_payload_partitions() p
WHERE p.hi IS NOT NULL
  AND p.hi <= hookinbox_id_floor({now} - {secs:age})
ORDER BY p.hi;

-- name: held
-- The deliveries of a partition whose payload stays: a job unfinished, failed, or
-- completed less than the payload retention ago (a dead-letter retry needs the body).
-- Read before the retiring transaction, under no lock that stops a writer; that
-- transaction adds what became unfinished meanwhile.
SELECT DISTINCT j.delivery_id AS id
FROM jobs j
WHERE j.delivery_id >= :lo AND j.delivery_id < :hi
  AND (j.state <> 'completed' OR j.completed_at >= {now} - {secs:age});

-- name: retire
-- One short transaction: DETACH, the held payloads back through the parent (into
-- DEFAULT), DROP; rows and moved NULL when a lock was not had within :wait; locked_ms:
-- how long payloads was locked against writers.
SELECT rows, moved, locked_ms
FROM hookinbox_retire_payload_partition(:part, :held::text[], :wait);

-- name: count_default_payloads
-- The delete path's share: the payloads the DEFAULT partition holds (those held when their
-- day retired, or received while their day had no partition) that may go now (the rule of
-- retention.sql count_payloads).
SELECT count(*)
FROM payloads_default p
WHERE (SELECT d.first_seen_at FROM deliveries d WHERE d.id = p.delivery_id COLLATE "C") < {now}
    - {secs:age}
  AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = p.delivery_id AND (j.state <>
      'completed' OR j.completed_at >= {now} - {secs:age}));

-- name: default_payload_batch
SELECT p.delivery_id AS id
FROM payloads_default p
WHERE (SELECT d.first_seen_at FROM deliveries d WHERE d.id = p.delivery_id COLLATE "C") < {now}
    - {secs:age}
  AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = p.delivery_id AND (j.state <>
      'completed' OR j.completed_at >= {now} - {secs:age}))
LIMIT :limit {skip_locked:p};
