-- Each attempt row is written once, complete, when the attempt ends (issue 11, worker
-- throughput): by the settle, or, for a lease that ran out, by the re-claim or the
-- exhausted-lease sweep. Until then the running attempt is the leased job itself:
-- leased_by is its worker and leased_at (set by each claim, from the database clock)
-- its start.
ALTER TABLE jobs ADD COLUMN leased_at {time};

-- Attempts left open by an older version (jobs leased across the upgrade): their start
-- moves to the job, and the row goes (the settle or the sweep writes it again, ended).
UPDATE jobs SET leased_at = coalesce(
    (SELECT max(a.started_at) FROM attempts a WHERE a.job_id = jobs.id AND a.ended_at IS NULL),
    updated_at
) WHERE state = 'processing';
DELETE FROM attempts WHERE ended_at IS NULL
    AND job_id IN (SELECT id FROM jobs WHERE state = 'processing');
