-- Jobs partitioned by UTC day of their id (docs/store.md, "Partitions"), as attempts are
-- (027): a day of jobs retires whole at the key retention (DETACH, DROP), the jobs still
-- unfinished or dead-lettered moved to DEFAULT first, so that the journal's purge no
-- longer deletes a day's jobs row by row. A job's id begins with its delivery's, so a
-- day of jobs is the same range of ids as a day of payloads and of attempts. Unlike
-- attempts, the key is the id itself: the parent keeps its primary key.
--
-- What the queue's statements do about the days: a claim names a floor (:floor, the
-- first id that can hold due work, hookinbox_job_floor below) and is planned for each
-- run, so that PostgreSQL prunes the days before it, which hold only finished jobs,
-- before it locks them; a settle names the smallest id of its batch.
--
-- parked_events pointed at jobs (id) by a foreign key: a DETACH checks that no row
-- points into the partition, and the parked jobs are among those a day keeps. The key
-- becomes part of the job delete cascade (the statement trigger that deletes attempts).
--
-- An existing store is converted in place in steps, each committed on its own, as 027
-- converted attempts: a CHECK (id < the next UTC midnight at least an hour ahead) NOT
-- VALID, its VALIDATE (a scan that blocks no writer), then one short transaction that
-- renames the table jobs_legacy, makes the partitioned parent and attaches the old table
-- as its first partition FROM (MINVALUE) TO (that midnight). Its six indexes become the
-- parent's partitions of them (none is built). It retires whole like a day, once that
-- midnight is past the key retention.

-- A day of ids' upper end for a delivery id: the first id of its next millisecond. A
-- delivery's jobs (its id, ':', the action) sort before it in any collation.
CREATE OR REPLACE FUNCTION hookinbox_id_after(delivery_id text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT 'dlv_' || lpad(to_hex(('x' || lpad(substr(delivery_id, 5, 12), 16, '0'))::bit(64)
        ::bigint + 1), 12, '0')
$$;

-- The first id of the UTC day an id was made in ('' for an id of another shape).
CREATE OR REPLACE FUNCTION hookinbox_day_floor(id text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN id ~ '^dlv_[0-9a-f]{12}' THEN 'dlv_' || lpad(to_hex(
        ('x' || lpad(substr(id, 5, 12), 16, '0'))::bit(64)::bigint / 86400000 * 86400000),
        12, '0') ELSE '' END
$$;

-- The partitions of a day are made LIKE the parent with its CHECK constraints (a
-- partition must hold every CHECK of its parent); otherwise 027's.
CREATE OR REPLACE FUNCTION hookinbox_day_partitions_ahead(parent text, key text,
    finish text[], first date, last date, wait text)
RETURNS integer
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    day date;
    part text;
    day_lo text;
    day_hi text;
    statement text;
    made integer := 0;
BEGIN
    IF to_regclass(parent || '_default') IS NULL THEN
        RETURN 0;
    END IF;
    PERFORM pg_advisory_xact_lock(hashtext('hookinbox_partitions_' || parent));
    FOR day IN SELECT generate_series(first, last, interval '1 day')::date LOOP
        day_lo := hookinbox_id_floor(day::timestamp AT TIME ZONE 'UTC');
        day_hi := hookinbox_id_floor((day + 1)::timestamp AT TIME ZONE 'UTC');
        CONTINUE WHEN EXISTS (
            SELECT 1 FROM hookinbox_partitions_of(parent) p
            WHERE p.hi IS NOT NULL AND (p.lo IS NULL OR p.lo < day_hi) AND p.hi > day_lo);
        part := parent || '_p' || to_char(day, 'YYYYMMDD');
        PERFORM set_config('lock_timeout', wait, true);
        BEGIN
            EXECUTE format('CREATE TABLE %I (LIKE %I INCLUDING DEFAULTS INCLUDING STORAGE'
                ' INCLUDING CONSTRAINTS)', part, parent);
            FOREACH statement IN ARRAY finish LOOP
                EXECUTE format(statement, part);
            END LOOP;
            EXECUTE format('WITH moved AS (DELETE FROM %I WHERE %I >= %L AND %I < %L'
                ' RETURNING *) INSERT INTO %I SELECT * FROM moved',
                parent || '_default', key, day_lo, key, day_hi, part);
            EXECUTE format('ALTER TABLE %I ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)',
                parent, part, day_lo, day_hi);
            made := made + 1;
        EXCEPTION WHEN lock_not_available THEN
            NULL;
        END;
    END LOOP;
    RETURN made;
END;
$$;

-- A day of jobs made ahead: what 011 set on jobs (a partitioned parent takes no storage
-- settings). Its key and indexes are the parent's, made by the ATTACH.
CREATE OR REPLACE FUNCTION hookinbox_job_day_finish() RETURNS text[]
LANGUAGE sql IMMUTABLE AS $$
    SELECT ARRAY['ALTER TABLE %1$I SET (autovacuum_vacuum_scale_factor = 0.0, '
        'autovacuum_vacuum_threshold = 5000, autovacuum_vacuum_insert_scale_factor = 0.0, '
        'autovacuum_vacuum_insert_threshold = 20000, autovacuum_analyze_scale_factor = 0.02, '
        'autovacuum_vacuum_cost_delay = 0)']
$$;

CREATE OR REPLACE FUNCTION hookinbox_job_partitions_ahead(first date, last date,
    wait text DEFAULT '300ms')
RETURNS integer
LANGUAGE sql SET search_path FROM CURRENT AS $$
    SELECT hookinbox_day_partitions_ahead('jobs', 'id', hookinbox_job_day_finish(),
        first, last, wait)
$$;

-- The jobs kept: unfinished or dead-lettered now, found through the day's partial
-- indexes (their attempts were kept by the same rule, 027).
CREATE OR REPLACE FUNCTION hookinbox_retire_job_partition(part text, wait text,
    OUT moved bigint, OUT locked_ms float8)
LANGUAGE sql SET search_path FROM CURRENT AS $$
    SELECT * FROM hookinbox_retire_day_partition('jobs', part, $q$
            SELECT * FROM %1$I WHERE state = 'accepted'
            UNION ALL
            SELECT * FROM %1$I WHERE state = 'processing'
            UNION ALL
            SELECT * FROM %1$I WHERE state = 'failed'$q$, NULL, wait)
$$;

-- The first id a claim must look at, as the first id of its day (a worker's statements
-- are written again for each floor: one a day): the smallest id of a job that is due or
-- may become due (accepted, processing) or holds its order key (dead-lettered with
-- order_hold), and never later than an hour ago (a receiver's clock behind the
-- database's). The days are
-- asked oldest first, each by its partial indexes (a finished day's are empty); DEFAULT
-- (the held jobs of retired days) by its rows. A worker asks every few seconds: a job
-- made due again in an older day (a replay of a dead letter) waits for that.
CREATE OR REPLACE FUNCTION hookinbox_job_floor() RETURNS text
LANGUAGE plpgsql STABLE SET search_path FROM CURRENT AS $$
DECLARE
    part record;
    found text;
    busy boolean;
BEGIN
    IF to_regclass('jobs_default') IS NULL THEN
        RETURN '';
    END IF;
    SELECT min(id) INTO found FROM jobs_default
    WHERE state IN ('accepted', 'processing') OR (state = 'failed' AND order_hold);
    FOR part IN SELECT p.name, coalesce(p.lo, '') AS lo FROM hookinbox_partitions_of('jobs') p
                WHERE p.hi IS NOT NULL ORDER BY p.hi LOOP
        EXIT WHEN found IS NOT NULL AND part.lo >= found;
        EXECUTE format('SELECT EXISTS (SELECT 1 FROM %1$I WHERE state = %2$L)'
            ' OR EXISTS (SELECT 1 FROM %1$I WHERE state = %3$L)'
            ' OR EXISTS (SELECT 1 FROM %1$I WHERE order_key IS NOT NULL'
            ' AND state = %4$L AND order_hold)', part.name, 'accepted', 'processing', 'failed')
            INTO busy;
        IF busy THEN
            found := least(found, part.lo);
            EXIT;
        END IF;
    END LOOP;
    RETURN hookinbox_day_floor(least(found, hookinbox_id_floor(now() - interval '1 hour')));
END;
$$;

-- The first delivery id whose day of jobs is still there ('' while the first partition
-- reaches back to the beginning): the journal rows before it kept their key (seen again
-- within the key retention) and lost their jobs with their day, which reconcile must not
-- count as deliveries that got no job.
CREATE OR REPLACE FUNCTION hookinbox_jobs_kept_from() RETURNS text
LANGUAGE sql STABLE SET search_path FROM CURRENT AS $$
    SELECT coalesce(CASE WHEN bool_or(p.lo IS NULL) THEN '' ELSE min(p.lo) END, '')
    FROM hookinbox_partitions_of('jobs') p WHERE p.hi IS NOT NULL
$$;

-- A job's attempts and its parked row go with it, per statement, each DELETE naming the
-- range of the deleted jobs' ids as constants (027: planned over the days that can hold
-- them, not every day).
CREATE OR REPLACE FUNCTION hookinbox_delete_jobs_rows() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    lo text;
    hi text;
BEGIN
    SELECT min(id), max(id) INTO lo, hi FROM gone;
    IF lo IS NOT NULL THEN
        EXECUTE format('DELETE FROM attempts WHERE job_id >= %L AND job_id <= %L'
            ' AND job_id IN (SELECT id FROM gone)', lo, hi);
        DELETE FROM parked_events WHERE job_id IN (SELECT id FROM gone);
    END IF;
    RETURN NULL;
END;
$$;

-- A journal row's jobs, over the days of jobs: its id's range as constants.
CREATE OR REPLACE FUNCTION hookinbox_delete_deliveries_jobs() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    lo text;
    hi text;
BEGIN
    SELECT min(id), hookinbox_id_after(max(id)) INTO lo, hi FROM gone;
    IF lo IS NOT NULL THEN
        EXECUTE format('DELETE FROM jobs WHERE id >= %L AND id < %L'
            ' AND delivery_id IN (SELECT id COLLATE "default" FROM gone)', lo, hi);
    END IF;
    RETURN NULL;
END;
$$;

-- The payloads a day keeps (019, 027), their jobs found by the day's range of job ids
-- too: over the days of jobs, the delivery id alone prunes none.
CREATE OR REPLACE FUNCTION hookinbox_retire_payload_partition(part text, held text[], wait text,
    OUT moved bigint, OUT locked_ms float8)
LANGUAGE sql SET search_path FROM CURRENT AS $$
    SELECT * FROM hookinbox_retire_day_partition('payloads', part, $q$SELECT p.* FROM (
            SELECT unnest($3) AS id
            UNION
            SELECT j.delivery_id FROM jobs j WHERE j.state = 'accepted'
                AND j.id >= $1 AND j.id < $2 AND j.delivery_id >= $1 AND j.delivery_id < $2
            UNION
            SELECT j.delivery_id FROM jobs j WHERE j.state = 'processing'
                AND j.id >= $1 AND j.id < $2 AND j.delivery_id >= $1 AND j.delivery_id < $2
            UNION
            SELECT j.delivery_id FROM jobs j WHERE j.state = 'failed'
                AND j.id >= $1 AND j.id < $2 AND j.delivery_id >= $1 AND j.delivery_id < $2
        ) h JOIN %1$I p ON p.delivery_id = h.id$q$, held, wait)
$$;

-- The foreign key from parked_events goes; the trigger deletes a job's parked row from
-- now on (both in one subtransaction: never neither, never both).
SELECT hookinbox_alter_when_unlocked(ARRAY[
    'ALTER TABLE parked_events DROP CONSTRAINT IF EXISTS parked_events_job_id_fkey',
    'DROP TRIGGER IF EXISTS jobs_delete_attempts ON jobs',
    'DROP TRIGGER IF EXISTS jobs_delete_rows ON jobs',
    'CREATE TRIGGER jobs_delete_rows AFTER DELETE ON jobs
         REFERENCING OLD TABLE AS gone
         FOR EACH STATEMENT EXECUTE FUNCTION hookinbox_delete_jobs_rows()'
]);
DROP FUNCTION IF EXISTS hookinbox_delete_jobs_attempts();

-- Whether jobs is the table of before this migration.
CREATE OR REPLACE FUNCTION hookinbox_jobs_unpartitioned() RETURNS boolean
LANGUAGE sql STABLE SET search_path FROM CURRENT AS $$
    SELECT c.relkind = 'r' FROM pg_class c WHERE c.oid = to_regclass('jobs')
$$;

SELECT hookinbox_alter_when_unlocked(ARRAY[
    'ALTER TABLE jobs DROP CONSTRAINT IF EXISTS jobs_before_partitions',
    format('ALTER TABLE jobs ADD CONSTRAINT jobs_before_partitions '
        'CHECK (id < %L) NOT VALID', hookinbox_id_floor(
            (date_trunc('day', (now() + interval '1 hour') AT TIME ZONE 'UTC')
                + interval '1 day') AT TIME ZONE 'UTC'))
])
WHERE hookinbox_jobs_unpartitioned();

-- hookinbox: commit

DO $$
BEGIN
    IF hookinbox_jobs_unpartitioned() THEN
        ALTER TABLE jobs VALIDATE CONSTRAINT jobs_before_partitions;
    END IF;
END;
$$;

-- hookinbox: commit

-- The swap, in one subtransaction of short tries (hookinbox_alter_when_unlocked): the
-- receives and settles that write jobs wait at most 200 ms at a time for it.
CREATE OR REPLACE FUNCTION hookinbox_partition_jobs() RETURNS void
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    bound text;
    index_name text;
    statement text;
BEGIN
    IF NOT hookinbox_jobs_unpartitioned() THEN
        RETURN;
    END IF;
    SELECT substring(pg_get_constraintdef(oid) FROM $r$'([^']*)'$r$) INTO bound
    FROM pg_constraint
    WHERE conrelid = to_regclass('jobs') AND conname = 'jobs_before_partitions';
    ALTER TABLE jobs RENAME TO jobs_legacy;
    ALTER TABLE jobs_legacy RENAME CONSTRAINT jobs_pkey TO jobs_legacy_pkey;
    FOREACH index_name IN ARRAY ARRAY['delivery', 'due', 'lease', 'failed', 'order'] LOOP
        EXECUTE format('ALTER INDEX %I RENAME TO %I', 'jobs_' || index_name || '_idx',
            'jobs_legacy_' || index_name || '_idx');
    END LOOP;
    DROP TRIGGER jobs_delete_rows ON jobs_legacy;
    CREATE TABLE jobs (LIKE jobs_legacy INCLUDING DEFAULTS INCLUDING STORAGE
        INCLUDING CONSTRAINTS) PARTITION BY RANGE (id);
    ALTER TABLE jobs DROP CONSTRAINT jobs_before_partitions;
    IF EXISTS (SELECT 1 FROM jobs_legacy) THEN
        EXECUTE format('ALTER TABLE jobs ATTACH PARTITION jobs_legacy '
            'FOR VALUES FROM (MINVALUE) TO (%L)', bound);
        ALTER TABLE jobs_legacy DROP CONSTRAINT jobs_before_partitions;
    ELSE
        DROP TABLE jobs_legacy;  -- a new store: days from the first one
    END IF;
    -- Each takes the old table's index of the same definition as its partition's.
    ALTER TABLE jobs ADD PRIMARY KEY (id);
    CREATE INDEX jobs_delivery_idx ON jobs (delivery_id);
    CREATE INDEX jobs_due_idx ON jobs (next_attempt_at) WHERE state = 'accepted';
    CREATE INDEX jobs_lease_idx ON jobs (lease_expires_at) WHERE state = 'processing';
    CREATE INDEX jobs_failed_idx ON jobs (failed_at) WHERE state = 'failed';
    CREATE INDEX jobs_order_idx ON jobs (order_key, id)
        WHERE order_key IS NOT NULL AND state <> 'completed';
    CREATE TRIGGER jobs_delete_rows AFTER DELETE ON jobs REFERENCING OLD TABLE AS gone
        FOR EACH STATEMENT EXECUTE FUNCTION hookinbox_delete_jobs_rows();
    CREATE TABLE jobs_default PARTITION OF jobs DEFAULT;
    FOREACH statement IN ARRAY hookinbox_job_day_finish() LOOP
        EXECUTE format(statement, 'jobs_default');
    END LOOP;
    PERFORM hookinbox_job_partitions_ahead((now() AT TIME ZONE 'UTC')::date,
        (now() AT TIME ZONE 'UTC')::date + 3);
END;
$$;

SELECT hookinbox_alter_when_unlocked(ARRAY['SELECT hookinbox_partition_jobs()']);
DROP FUNCTION hookinbox_partition_jobs();
DROP FUNCTION hookinbox_jobs_unpartitioned();
