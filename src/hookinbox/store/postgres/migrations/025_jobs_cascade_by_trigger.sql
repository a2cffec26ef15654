-- A job is inserted only by the reserve, joined to the journal rows the same statement has
-- just inserted (postgres/hot_path.sql, reserve); replays and retries update jobs, never
-- insert one. So the foreign key from jobs to deliveries checked nothing a reserve could
-- get wrong, and it cost every delivery a query and a FOR KEY SHARE lock on its own new
-- journal row (a heap write and a WAL record): PostgreSQL's CPU per received delivery was
-- 68 µs with it, 54 without (docs/performance.md, "What a delivery costs PostgreSQL").
-- What the key did besides, deleting a journal row's jobs with it (and through
-- jobs_delete_attempts their attempts), this trigger does, as 012 did for attempts and
-- 019 for payloads: one delete by jobs_delivery_idx per journal row deleted.

CREATE OR REPLACE FUNCTION hookinbox_delete_delivery_jobs() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    DELETE FROM jobs WHERE delivery_id = OLD.id COLLATE "default";
    RETURN NULL;
END;
$$;

-- Dropping the key locks jobs and deliveries against writers for an instant: waited for at
-- most 200 ms at a time (the receivers queue behind a waiting ALTER TABLE), tried again
-- every half second for a minute before the migration fails (as 019's steps).
DO $$
DECLARE
    fkey text;
BEGIN
    FOR attempt IN 1..120 LOOP
        BEGIN
            PERFORM set_config('lock_timeout', '200ms', true);
            FOR fkey IN SELECT conname FROM pg_constraint
                        WHERE conrelid = to_regclass('jobs') AND contype = 'f'
                          AND confrelid = to_regclass('deliveries') LOOP
                EXECUTE format('ALTER TABLE jobs DROP CONSTRAINT %I', fkey);
            END LOOP;
            DROP TRIGGER IF EXISTS deliveries_delete_jobs ON deliveries;
            CREATE TRIGGER deliveries_delete_jobs AFTER DELETE ON deliveries
                FOR EACH ROW EXECUTE FUNCTION hookinbox_delete_delivery_jobs();
            EXIT;
        EXCEPTION WHEN lock_not_available THEN
            IF attempt = 120 THEN
                RAISE;
            END IF;
            PERFORM pg_sleep(0.5);
        END;
    END LOOP;
END;
$$;
