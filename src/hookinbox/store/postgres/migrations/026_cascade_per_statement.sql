-- The cascades that 012, 019 and 025 made triggers (a journal row's jobs and payload, a
-- job's attempts) ran once per row deleted: a purge batch of 1,000 journal rows ran 3,000
-- single-row DELETEs, each through PL/pgSQL, and the payload's probed every day partition
-- of payloads. Per statement, each cascade is one DELETE per batch over the rows the
-- statement deleted (its transition table): PostgreSQL's CPU per purged delivery in
-- batches of 1,000 is about half (docs/performance.md, "What a purged delivery costs");
-- a DELETE of a single row costs a little more (three statements planned over a
-- transition table). The journal's rows are deleted only by the purge and by hand, so no
-- receive or claim runs these.
-- IN (SELECT ...) and not = ANY(ARRAY(...)): over a transition table PostgreSQL joins
-- by the index either way, and the join was the cheaper of the two.
-- The cascade locks the jobs it deletes in the order its join reads them; the purge
-- locks its batch's jobs in id order before it deletes (queries/retention.sql,
-- lock_batch_jobs), so that a replay of the same jobs and a purge never deadlock.

CREATE FUNCTION hookinbox_delete_deliveries_jobs() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    DELETE FROM jobs WHERE delivery_id IN (SELECT id COLLATE "default" FROM gone);
    RETURN NULL;
END;
$$;

CREATE FUNCTION hookinbox_delete_deliveries_payloads() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    DELETE FROM payloads WHERE delivery_id IN (SELECT id COLLATE "default" FROM gone);
    RETURN NULL;
END;
$$;

CREATE FUNCTION hookinbox_delete_jobs_attempts() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    DELETE FROM attempts WHERE job_id IN (SELECT id FROM gone);
    RETURN NULL;
END;
$$;

-- A change of a table that every receive writes, under that table's lock: each try waits
-- at most 200 ms for the lock (the receivers queue behind a waiting lock for that long),
-- and the tries go on every half second for a minute before the migration fails, as
-- 019's and 025's steps do. The statements run in one subtransaction: all of them or
-- none. The lock_timeout is the function's own: the rest of the migration waits as usual.
-- For the migrations after this one that need it.
CREATE OR REPLACE FUNCTION hookinbox_alter_when_unlocked(statements text[]) RETURNS void
LANGUAGE plpgsql SET lock_timeout = '200ms' AS $$
DECLARE
    statement text;
BEGIN
    FOR attempt IN 1..120 LOOP
        BEGIN
            FOREACH statement IN ARRAY statements LOOP
                EXECUTE statement;
            END LOOP;
            RETURN;
        EXCEPTION WHEN lock_not_available THEN
            IF attempt = 120 THEN
                RAISE;
            END IF;
            PERFORM pg_sleep(0.5);
        END;
    END LOOP;
END;
$$;

-- The old and the new trigger never both exist: a row is deleted with its children once.
SELECT hookinbox_alter_when_unlocked(ARRAY[
    'DROP TRIGGER IF EXISTS deliveries_delete_jobs ON deliveries',
    'CREATE TRIGGER deliveries_delete_jobs AFTER DELETE ON deliveries
         REFERENCING OLD TABLE AS gone
         FOR EACH STATEMENT EXECUTE FUNCTION hookinbox_delete_deliveries_jobs()',
    'DROP TRIGGER IF EXISTS deliveries_delete_payload ON deliveries',
    'CREATE TRIGGER deliveries_delete_payload AFTER DELETE ON deliveries
         REFERENCING OLD TABLE AS gone
         FOR EACH STATEMENT EXECUTE FUNCTION hookinbox_delete_deliveries_payloads()',
    'DROP TRIGGER IF EXISTS jobs_delete_attempts ON jobs',
    'CREATE TRIGGER jobs_delete_attempts AFTER DELETE ON jobs
         REFERENCING OLD TABLE AS gone
         FOR EACH STATEMENT EXECUTE FUNCTION hookinbox_delete_jobs_attempts()'
]);

DROP FUNCTION hookinbox_delete_delivery_jobs();
DROP FUNCTION hookinbox_delete_delivery_payload();
DROP FUNCTION hookinbox_delete_job_attempts();
