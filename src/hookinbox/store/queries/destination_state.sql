-- Destinations: token bucket, slots in flight, circuit (hookinbox.store.destination_state); the
-- file format: hookinbox/store/statements.py.

-- name: ensure
INSERT INTO destinations (name, tokens, refilled_at, updated_at)
VALUES (:name, :burst, {now}, {now})
ON CONFLICT (name) DO NOTHING;

-- name: lock
-- Every transaction here starts with a statement holding ``{soft_commit}``: the state is
-- soft (a lost slot or token after a PostgreSQL crash is harmless), so its commits do
-- not wait for the WAL flush, the bulk of their cost (bench/destination_gate.py).
SELECT tokens, {age:refilled_at} AS since_refill, failures, {age:opened_at} AS open_for,
    CAST(coalesce(probe_until > {now}, FALSE) AS INTEGER) AS probing, {soft_commit} AS soft
FROM destinations
WHERE name = :name {for_update};

-- name: soft
SELECT {soft_commit};

-- name: in_flight
-- Counted in a statement of its own, AFTER the lock: on PostgreSQL (read committed) a
-- subquery of the locking statement would read the snapshot taken before it waited for
-- the lock, and miss the slot the previous holder just wrote. Every live slot but this
-- lease's own (written again if the same lease asks twice).
SELECT count(*)
FROM destination_slots
WHERE destination = :name
  AND expires_at > {now}
  AND NOT (job_id = :job AND lease_token = :token);

-- name: take
UPDATE destinations
SET tokens = :tokens, refilled_at = {now}, updated_at = {now}, probe_until = CASE WHEN :probe =
    1 THEN {now} + {secs:slot} ELSE probe_until END
WHERE name = :name;

-- name: slot
INSERT INTO destination_slots (job_id, lease_token, destination, expires_at)
VALUES (:job, :token, :name, {now} + {secs:slot})
ON CONFLICT (job_id, lease_token) DO UPDATE
SET destination = :name, expires_at = {now} + {secs:slot};

-- name: drop_slot
-- This lease's slot, and any of the destination's that ran out (their worker died); a
-- slot of the same job's earlier lease holds until it runs out.
DELETE FROM destination_slots
WHERE (job_id = :job AND lease_token = :token)
  OR (destination = :name AND expires_at <= {now});

-- name: circuit
SELECT failures, CAST(opened_at IS NOT NULL AS INTEGER) AS open, {soft_commit} AS soft
FROM destinations
WHERE name = :name {for_update};

-- name: succeeded
UPDATE destinations
SET failures = 0, opened_at = NULL, probe_until = NULL, updated_at = {now}
WHERE name = :name;

-- name: failed
UPDATE destinations
SET failures = failures + 1, updated_at = {now}, opened_at = CASE WHEN :opens = 1 THEN {now}
    ELSE opened_at END, last_opened_at = CASE WHEN :opens = 1 THEN {now} ELSE last_opened_at END
    , openings = openings + :newly, probe_until = CASE WHEN :opens = 1 THEN NULL ELSE
    probe_until END
WHERE name = :name;

-- name: states
SELECT d.name, d.tokens, {age:d.refilled_at} AS since_refill, d.failures, {age:d.opened_at} AS
    open_for, d.opened_at, d.last_opened_at, d.openings, (SELECT count(*) FROM destination_slots
    s WHERE s.destination = d.name AND s.expires_at > {now}) AS in_flight
FROM destinations d
ORDER BY d.name;
