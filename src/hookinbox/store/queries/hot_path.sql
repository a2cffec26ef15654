-- The portable hot path (hookinbox.store.hot_path): reserve, claim and settle, the
-- statements SQLite runs on its writer thread, one commit per batch; PostgreSQL runs its
-- own, one statement each (postgres/hot_path.sql). The file format:
-- hookinbox/store/statements.py.
--
-- Jobs a worker may take: due and waiting (state 'accepted', next_attempt_at passed), or
-- leased by a worker that stopped renewing the lease while attempts are left. Each half
-- alone matches a partial index (jobs_due_idx, jobs_lease_idx); the claim reads them
-- apart, since an OR of the two makes PostgreSQL scan the whole table and SQLite sort
-- every due job.
--
-- A job of an ordered route (order_key set) waits behind its key: it is due only when no
-- job of the same key with a smaller id is unfinished (waiting, leased, or a dead letter
-- that holds its key), one probe of jobs_order_idx, and only once its id is older than
-- :horizon (the worker's order grace: an earlier reservation on its way commits within
-- it). A waiting job is simply not claimed, so it spends no attempt. A job without a key
-- pays one NULL test. The test is a CASE, not an OR: PostgreSQL estimates an OR with
-- `order_key IS NULL` as selective while the column has no statistics yet (a new table,
-- a burst), then reads and sorts every due job instead of walking jobs_due_idx to the
-- limit (measured: a 10,000-job drain lost a third, ~3,500 to ~2,400 jobs/s); a CASE it
-- takes as a coin toss, and keeps the walk. A lapsed lease is its key's head already:
-- it is taken as before.
--
-- An attempt row is written once, complete, when its attempt ends: by the settle, or for
-- a lease that ran out, by the re-claim or the exhausted-lease sweep. Until then the
-- running attempt is the leased job itself (number attempts, worker leased_by, started at
-- leased_at): one insert per attempt, no update, no row the settle has to find.

-- name: insert_delivery
-- A first delivery's journal row; a repeat inserts nothing and returns no id.
INSERT INTO deliveries (id, source, event_id, event_type, body_sha256, delivery_count,
                        first_seen_at, last_seen_at, subject_hash)
VALUES (:id, :source, :event_id, :event_type, :sha, :seen, {now}, {now}, :subject_hash)
ON CONFLICT (source, event_id) DO NOTHING
RETURNING id;

-- name: add_deliveries
-- The batch's form of insert_delivery: run once per item in one prepared statement.
INSERT INTO deliveries (id, source, event_id, event_type, body_sha256, delivery_count,
                        first_seen_at, last_seen_at, subject_hash)
VALUES (:id, :source, :event_id, :event_type, :sha, :seen, {now}, {now}, :subject_hash)
ON CONFLICT (source, event_id) DO NOTHING;

-- name: added
-- Which of the batch's ids are rows now: the ones its insert wrote. The ids are the
-- receiver's own (hookinbox.ids.new_delivery_id, plain ASCII), so they travel exactly
-- as a list parameter (SQLite's json_each).
SELECT id FROM deliveries WHERE id {in:ids};

-- name: insert_payload
INSERT INTO payloads (delivery_id, body, headers) VALUES (:id, :body, :headers);

-- name: insert_job
INSERT INTO jobs (id, delivery_id, source, action, max_attempts, order_key, order_hold,
                  next_attempt_at, created_at, updated_at)
VALUES (:id, :delivery_id, :source, :action, :max_attempts, :order_key, :order_hold, {now},
        {now}, {now});

-- name: seen_again
-- A repeat: counted on the first row, with a conflict when its body differs.
UPDATE deliveries
SET last_seen_at = {now}, delivery_count = delivery_count + :seen,
    conflicts = conflicts + :seen * CAST(body_sha256 <> :sha AS INTEGER)
WHERE source = :source AND event_id = :event_id
RETURNING id, body_sha256;

-- name: due
-- The first :limit due jobs, by when each became due, from two scans each in its
-- partial index's order and stopped at the limit (an OR of the two made SQLite read
-- and sort every due job, at every claim).
SELECT id, state FROM (
    SELECT * FROM (
        SELECT id, state, next_attempt_at AS due_at FROM jobs j
        WHERE state = 'accepted' AND next_attempt_at <= {now}
          AND CASE WHEN j.order_key IS NULL THEN TRUE ELSE (j.id < :horizon AND NOT EXISTS (
              SELECT 1 FROM jobs e
              WHERE e.order_key = j.order_key AND e.id < j.id
                AND e.order_key IS NOT NULL AND e.state <> 'completed'
                AND (e.state <> 'failed' OR e.order_hold = TRUE))) END
        ORDER BY next_attempt_at LIMIT :limit)
    UNION ALL
    SELECT * FROM (
        SELECT id, state, lease_expires_at AS due_at FROM jobs
        WHERE state = 'processing' AND lease_expires_at < {now} AND attempts < max_attempts
        ORDER BY lease_expires_at LIMIT :limit)
) AS due
ORDER BY due_at
LIMIT :limit;

-- name: due_but_settled
-- The due jobs but those of :settled: a claim riding on a settle never takes back a job
-- the same transaction has just settled (a retry due at once, say).
SELECT id, state FROM (
    SELECT * FROM (
        SELECT id, state, next_attempt_at AS due_at FROM jobs j
        WHERE state = 'accepted' AND next_attempt_at <= {now} AND NOT (id {in:settled})
          AND CASE WHEN j.order_key IS NULL THEN TRUE ELSE (j.id < :horizon AND NOT EXISTS (
              SELECT 1 FROM jobs e
              WHERE e.order_key = j.order_key AND e.id < j.id
                AND e.order_key IS NOT NULL AND e.state <> 'completed'
                AND (e.state <> 'failed' OR e.order_hold = TRUE))) END
        ORDER BY next_attempt_at LIMIT :limit)
    UNION ALL
    SELECT * FROM (
        SELECT id, state, lease_expires_at AS due_at FROM jobs
        WHERE state = 'processing' AND lease_expires_at < {now} AND attempts < max_attempts
          AND NOT (id {in:settled})
        ORDER BY lease_expires_at LIMIT :limit)
) AS due
ORDER BY due_at
LIMIT :limit;

-- name: expire_leases
-- The attempt each lapsed lease of :ids holds, ended now with :outcome and :error
-- (lease-expired), written from the old lease before the claim overwrites it.
INSERT INTO attempts (job_id, number, trigger, worker, started_at, ended_at, outcome,
                      error_code)
SELECT id, attempts, trigger, leased_by, leased_at, {now}, :outcome, :error
FROM jobs
WHERE id {in:ids};

-- name: claim
-- Lease the picked jobs; each claim counts an attempt.
UPDATE jobs
SET state = 'processing', attempts = attempts + 1, lease_token = :token, leased_by = :worker,
    leased_at = {now}, lease_expires_at = {now} + {secs:lease}, updated_at = {now}
WHERE id {in:ids}
RETURNING id, delivery_id, source, action, attempts, max_attempts, trigger;

-- name: claimed
-- The claimed jobs with their deliveries' identities and payloads.
SELECT j.id, j.delivery_id, j.source, j.action, j.attempts, j.max_attempts, j.trigger,
       d.event_id, d.event_type, p.body, p.headers
FROM jobs j
JOIN deliveries d ON d.id = j.delivery_id
LEFT JOIN payloads p ON p.delivery_id = j.delivery_id
WHERE j.id {in:ids};

-- name: held_leases
-- The leases the jobs of a settle batch hold now (locked on PostgreSQL; SQLite's write
-- lock already keeps them until the commit).
SELECT id, lease_token FROM jobs WHERE id {in:ids} AND state = 'processing' {for_update};

-- name: end_settled
-- A settled attempt, from the lease the job holds (read before finish clears it): its
-- outcome and error, what it met, and when the job is due again if it waits.
INSERT INTO attempts (job_id, number, trigger, worker, started_at, ended_at, outcome,
                      error_code, target, http_status, response_snippet, duration_ms,
                      next_attempt_at)
SELECT id, attempts, trigger, leased_by, leased_at, {now}, :outcome, :error, :target,
       :http_status, :snippet, :duration_ms,
       CASE WHEN :state = 'accepted' THEN {now} + {secs:delay} END
FROM jobs
WHERE id = :id AND lease_token = :token AND state = 'processing';

-- name: finish
-- Settling a leased job while the lease is ours: the job moves on (:refund gives the
-- attempt back when the job only waited on something outside itself), the lease ends.
-- A job's leased_at stays: when it was last claimed, read only while it is processing.
UPDATE jobs
SET state = :state, last_error = coalesce(:error, last_error),
    business_id = coalesce(:business_id, business_id),
    next_attempt_at = {now} + {secs:delay}, max_attempts = max_attempts + :refund,
    completed_at = CASE WHEN :state = 'completed' THEN {now} ELSE completed_at END,
    failed_at = CASE WHEN :state = 'failed' THEN {now} ELSE failed_at END,
    lease_token = NULL, leased_by = NULL, lease_expires_at = NULL, updated_at = {now}
WHERE id = :id AND lease_token = :token AND state = 'processing';

-- name: expire_exhausted
-- The attempts of the leases that ran out on their job's last attempt (its worker died),
-- ended now as lease-expired.
INSERT INTO attempts (job_id, number, trigger, worker, started_at, ended_at, outcome,
                      error_code)
SELECT id, attempts, trigger, leased_by, leased_at, {now}, :outcome, :error
FROM jobs
WHERE state = 'processing' AND lease_expires_at < {now} AND attempts >= max_attempts
RETURNING job_id;

-- name: exhausted
-- Those jobs dead-lettered.
UPDATE jobs
SET state = 'failed', last_error = :error, failed_at = {now},
    lease_token = NULL, leased_by = NULL, lease_expires_at = NULL, updated_at = {now}
WHERE id {in:ids};
