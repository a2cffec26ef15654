-- No statement reads completed jobs by their completion time (retention asks of each
-- payload's own jobs, through jobs_delivery_idx), yet every settle of a completed job
-- wrote an entry into jobs_completed_idx: one index write of the six a drained job made
-- in `jobs` (docs/performance.md, "A drained job's writes").
DROP INDEX IF EXISTS jobs_completed_idx;
