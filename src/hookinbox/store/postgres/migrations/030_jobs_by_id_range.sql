-- A delivery's jobs found by the range of their ids, not by an index on delivery_id.
--
-- A job's id is its delivery's id, ':', its action (hookinbox.ids.job_id), so the jobs of
-- delivery X are the rows of jobs_pkey from X up to hookinbox_id_after(X) whose
-- delivery_id is X: a probe of the primary key, as cheap as one of jobs_delivery_idx for
-- the few reads that ask (the journal's statuses, retention, erasure, reconcile, the
-- cascade from deliveries). The index was written on every receive and, as a non-HOT
-- update writes every index, on both updates of every drained job (its cost:
-- docs/performance.md, "The nineteenth sitting"). SQLite keeps its index: its foreign
-- key's cascade looks jobs up by delivery_id.
--
-- An id of another shape (made by hand) ends its range at the highest character after
-- it, as hookinbox.ids.delivery_id_after does: its jobs still begin with it.
CREATE OR REPLACE FUNCTION hookinbox_id_after(delivery_id text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN delivery_id ~ '^dlv_[0-9a-f]{12}' THEN 'dlv_' || lpad(to_hex((
        'x' || lpad(substr(delivery_id, 5, 12), 16, '0'))::bit(64)::bigint + 1), 12, '0')
        ELSE delivery_id || chr(1114111) END
$$;

-- The cascade from a journal row to its jobs: each gone row's range of job ids, within
-- the statement's whole range as constants (the days of jobs it can touch, 028).
CREATE OR REPLACE FUNCTION hookinbox_delete_deliveries_jobs() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    lo text;
    hi text;
BEGIN
    SELECT min(id), hookinbox_id_after(max(id)) INTO lo, hi FROM gone;
    IF lo IS NOT NULL THEN
        EXECUTE format('DELETE FROM jobs j USING (SELECT id COLLATE "default" AS id FROM gone) g'
            ' WHERE j.id >= %L AND j.id < %L AND j.id >= g.id'
            ' AND j.id < hookinbox_id_after(g.id) AND j.delivery_id = g.id', lo, hi);
    END IF;
    RETURN NULL;
END;
$$;

SELECT hookinbox_alter_when_unlocked(ARRAY['DROP INDEX IF EXISTS jobs_delivery_idx']);
