-- Attempts partitioned by UTC day on the job id (docs/store.md, "Partitions"), so that the
-- journal's purge does not delete them row by row: a day of attempts retires whole at the
-- key retention, when the journal rows of its day go (DETACH, DROP), the attempts of the
-- jobs still unfinished or dead-lettered moved to DEFAULT first. Job ids begin with their
-- delivery id, so a day of jobs is the same range of ids as a day of payloads.
--
-- A partitioned table's unique index must hold its partition key, so the parent has no
-- primary key: each partition has its own index on id (ids come from one sequence, so
-- they stay unique), and attempts_job_idx (job_id, id) is the parent's. Every statement
-- naming one attempt names its job too.
--
-- An existing store is converted in place in three steps, each committed on its own, as
-- 019 converted payloads: a CHECK (job_id < the next UTC midnight at least an hour ahead)
-- NOT VALID, its VALIDATE (a scan that blocks no writer), then one short transaction that
-- renames the table attempts_legacy, makes the partitioned parent and attaches the old
-- table as its first partition FROM (MINVALUE) TO (that midnight). The old table keeps
-- its primary key as its index on id, and its attempts_job_idx becomes the parent's (no
-- index is built). It retires whole like a day, once that midnight is past the key
-- retention.

-- The partitions of a table with their bounds: lo NULL for the first (MINVALUE), both
-- NULL for the DEFAULT partition.
CREATE OR REPLACE FUNCTION hookinbox_partitions_of(parent text)
RETURNS TABLE (name text, lo text, hi text)
LANGUAGE sql STABLE SET search_path FROM CURRENT AS $$
    SELECT c.relname::text,
           substring(pg_get_expr(c.relpartbound, c.oid) FROM $r$FROM \('([^']*)'\)$r$),
           substring(pg_get_expr(c.relpartbound, c.oid) FROM $r$TO \('([^']*)'\)$r$)
    FROM pg_inherits i
    JOIN pg_class c ON c.oid = i.inhrelid
    WHERE i.inhparent = to_regclass(parent)
$$;

-- Makes the missing day partitions of ``parent`` (partitioned by ``key``) from ``first``
-- to ``last`` (UTC days); the number made. Each is created apart, finished by the
-- statements of ``finish`` (format() strings, %1$I the day's table: its key or index),
-- filled with the rows DEFAULT took for that day meanwhile, and attached (ATTACH takes no
-- lock that stops inserts; it scans DEFAULT, small, under a lock that stops its readers:
-- waited for at most ``wait``, else the day is made next time).
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
    -- One maker or retirer at a time (two purges on two hosts); the checks below are quick.
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
            EXECUTE format('CREATE TABLE %I (LIKE %I INCLUDING DEFAULTS INCLUDING STORAGE)',
                part, parent);
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

-- Retires one range partition of ``parent``: in this one transaction, DETACH it, insert
-- the rows ``keep`` selects from it back through the parent (they land in DEFAULT), DROP
-- it. ``keep`` is a format() string, %1$I the day's table, $1 and $2 its bounds, $3
-- ``held`` (ids the caller read before, under no lock): it finds the rows by the day's
-- key, never by a scan of the day. Answers (moved: the rows kept, locked_ms: how long the
-- parent was locked against writers), or NULL moved when a lock was not had within
-- ``wait`` (the transaction changed nothing; try again later), 0 and NULL when the
-- partition is gone already.
CREATE OR REPLACE FUNCTION hookinbox_retire_day_partition(parent text, part text, keep text,
    held text[], wait text, OUT moved bigint, OUT locked_ms float8)
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    part_lo text;
    part_hi text;
    locked timestamptz;
BEGIN
    moved := 0;
    SELECT coalesce(p.lo, ''), p.hi INTO part_lo, part_hi
    FROM hookinbox_partitions_of(parent) p WHERE p.name = part AND p.hi IS NOT NULL;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    PERFORM set_config('lock_timeout', wait, true);
    BEGIN
        PERFORM pg_advisory_xact_lock(hashtext('hookinbox_partitions_' || parent));
        IF to_regclass(part) IS NULL THEN  -- another purge retired it meanwhile
            RETURN;
        END IF;
        locked := clock_timestamp();
        EXECUTE format('ALTER TABLE %I DETACH PARTITION %I', parent, part);
        EXECUTE format('INSERT INTO %I ', parent) || format(keep, part)
            USING part_lo, part_hi, held;
        GET DIAGNOSTICS moved = ROW_COUNT;
        EXECUTE format('DROP TABLE %I', part);
        locked_ms := extract(epoch FROM clock_timestamp() - locked) * 1000;
    EXCEPTION WHEN lock_not_available THEN
        moved := NULL;
    END;
END;
$$;

-- 019's payload functions, over the two above (one lock per table, as the days of
-- attempts have theirs).
CREATE OR REPLACE FUNCTION hookinbox_payload_partitions_ahead(first date, last date,
    wait text DEFAULT '300ms')
RETURNS integer
LANGUAGE sql SET search_path FROM CURRENT AS $$
    SELECT hookinbox_day_partitions_ahead('payloads', 'delivery_id',
        ARRAY['ALTER TABLE %1$I ADD PRIMARY KEY (delivery_id)'], first, last, wait)
$$;

-- The payloads kept: the deliveries the caller read as held, and those of jobs unfinished
-- or failed now.
CREATE OR REPLACE FUNCTION hookinbox_retire_payload_partition(part text, held text[], wait text,
    OUT moved bigint, OUT locked_ms float8)
LANGUAGE sql SET search_path FROM CURRENT AS $$
    SELECT * FROM hookinbox_retire_day_partition('payloads', part, $q$SELECT p.* FROM (
            SELECT unnest($3) AS id
            UNION
            SELECT j.delivery_id FROM jobs j WHERE j.state = 'accepted'
                AND j.delivery_id >= $1 AND j.delivery_id < $2
            UNION
            SELECT j.delivery_id FROM jobs j WHERE j.state = 'processing'
                AND j.delivery_id >= $1 AND j.delivery_id < $2
            UNION
            SELECT j.delivery_id FROM jobs j WHERE j.state = 'failed'
                AND j.delivery_id >= $1 AND j.delivery_id < $2
        ) h JOIN %1$I p ON p.delivery_id = h.id$q$, held, wait)
$$;

-- A day of attempts made ahead: its index on id (the parent has no key) and what 011 set
-- on attempts (a partitioned parent takes no storage settings): an insert-mostly table
-- vacuumed after 50,000 inserts, not after a share of its size.
CREATE OR REPLACE FUNCTION hookinbox_attempt_day_finish() RETURNS text[]
LANGUAGE sql IMMUTABLE AS $$
    SELECT ARRAY['CREATE INDEX ON %1$I (id)',
        'ALTER TABLE %1$I SET (autovacuum_vacuum_scale_factor = 0.0, '
        'autovacuum_vacuum_threshold = 10000, autovacuum_vacuum_insert_scale_factor = 0.0, '
        'autovacuum_vacuum_insert_threshold = 50000, autovacuum_vacuum_cost_delay = 0)']
$$;

CREATE OR REPLACE FUNCTION hookinbox_attempt_partitions_ahead(first date, last date,
    wait text DEFAULT '300ms')
RETURNS integer
LANGUAGE sql SET search_path FROM CURRENT AS $$
    SELECT hookinbox_day_partitions_ahead('attempts', 'job_id', hookinbox_attempt_day_finish(),
        first, last, wait)
$$;

-- The attempts kept: those of the day's jobs unfinished or dead-lettered now, found
-- through the queue's partial indexes, then by the day's (job_id, id).
CREATE OR REPLACE FUNCTION hookinbox_retire_attempt_partition(part text, wait text,
    OUT moved bigint, OUT locked_ms float8)
LANGUAGE sql SET search_path FROM CURRENT AS $$
    SELECT * FROM hookinbox_retire_day_partition('attempts', part, $q$SELECT a.* FROM (
            SELECT j.id FROM jobs j WHERE j.state = 'accepted' AND j.id >= $1 AND j.id < $2
            UNION
            SELECT j.id FROM jobs j WHERE j.state = 'processing' AND j.id >= $1 AND j.id < $2
            UNION
            SELECT j.id FROM jobs j WHERE j.state = 'failed' AND j.id >= $1 AND j.id < $2
        ) h JOIN %1$I a ON a.job_id = h.id$q$, NULL, wait)
$$;

-- A job's attempts go with it (026's cascade, per statement), now over partitions: the
-- DELETE names the range of the deleted jobs' ids as constants, so that it is planned
-- over the days that can hold them (and DEFAULT), not over every day. It is planned
-- again for every statement (a transition table is in it): over 33 days of attempts that
-- plan cost more than the deletes a purge batch no longer makes. The same for a journal
-- row's payload, over the payloads' days.
CREATE OR REPLACE FUNCTION hookinbox_delete_jobs_attempts() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    lo text;
    hi text;
BEGIN
    SELECT min(id), max(id) INTO lo, hi FROM gone;
    IF lo IS NOT NULL THEN
        EXECUTE format('DELETE FROM attempts WHERE job_id >= %L AND job_id <= %L'
            ' AND job_id IN (SELECT id FROM gone)', lo, hi);
    END IF;
    RETURN NULL;
END;
$$;

CREATE OR REPLACE FUNCTION hookinbox_delete_deliveries_payloads() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    lo text;
    hi text;
BEGIN
    SELECT min(id), max(id) INTO lo, hi FROM gone;
    IF lo IS NOT NULL THEN
        EXECUTE format('DELETE FROM payloads WHERE delivery_id >= %L AND delivery_id <= %L'
            ' AND delivery_id IN (SELECT id COLLATE "default" FROM gone)', lo, hi);
    END IF;
    RETURN NULL;
END;
$$;

-- Whether attempts is the table of before this migration (a step run again after the swap
-- has nothing to do).
CREATE OR REPLACE FUNCTION hookinbox_attempts_unpartitioned() RETURNS boolean
LANGUAGE sql STABLE SET search_path FROM CURRENT AS $$
    SELECT c.relkind = 'r' FROM pg_class c WHERE c.oid = to_regclass('attempts')
$$;

SELECT hookinbox_alter_when_unlocked(ARRAY[
    'ALTER TABLE attempts DROP CONSTRAINT IF EXISTS attempts_before_partitions',
    format('ALTER TABLE attempts ADD CONSTRAINT attempts_before_partitions '
        'CHECK (job_id < %L) NOT VALID', hookinbox_id_floor(
            (date_trunc('day', (now() + interval '1 hour') AT TIME ZONE 'UTC')
                + interval '1 day') AT TIME ZONE 'UTC'))
])
WHERE hookinbox_attempts_unpartitioned();

-- hookinbox: commit

DO $$
BEGIN
    IF hookinbox_attempts_unpartitioned() THEN
        ALTER TABLE attempts VALIDATE CONSTRAINT attempts_before_partitions;
    END IF;
END;
$$;

-- hookinbox: commit

-- The swap, in one subtransaction of short tries (hookinbox_alter_when_unlocked): the
-- settles that write attempts wait at most 200 ms at a time for it.
CREATE OR REPLACE FUNCTION hookinbox_partition_attempts() RETURNS void
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    bound text;
    statement text;
BEGIN
    IF NOT hookinbox_attempts_unpartitioned() THEN
        RETURN;
    END IF;
    SELECT substring(pg_get_constraintdef(oid) FROM $r$'([^']*)'$r$) INTO bound
    FROM pg_constraint
    WHERE conrelid = to_regclass('attempts') AND conname = 'attempts_before_partitions';
    ALTER TABLE attempts RENAME TO attempts_legacy;
    ALTER TABLE attempts_legacy RENAME CONSTRAINT attempts_pkey TO attempts_legacy_pkey;
    ALTER INDEX attempts_job_idx RENAME TO attempts_legacy_job_idx;
    CREATE TABLE attempts (LIKE attempts_legacy INCLUDING DEFAULTS INCLUDING STORAGE)
        PARTITION BY RANGE (job_id);
    -- The ids' sequence belongs to the parent: the old table is dropped when it retires.
    ALTER SEQUENCE attempts_id_seq OWNED BY attempts.id;
    IF EXISTS (SELECT 1 FROM attempts_legacy) THEN
        EXECUTE format('ALTER TABLE attempts ATTACH PARTITION attempts_legacy '
            'FOR VALUES FROM (MINVALUE) TO (%L)', bound);
        ALTER TABLE attempts_legacy DROP CONSTRAINT attempts_before_partitions;
    ELSE
        DROP TABLE attempts_legacy;  -- a new store: days from the first one
    END IF;
    -- Takes the old table's index of the same columns as its partition's: nothing built.
    CREATE INDEX attempts_job_idx ON attempts (job_id, id);
    CREATE TABLE attempts_default PARTITION OF attempts DEFAULT;
    FOREACH statement IN ARRAY hookinbox_attempt_day_finish() LOOP
        EXECUTE format(statement, 'attempts_default');
    END LOOP;
    PERFORM hookinbox_attempt_partitions_ahead((now() AT TIME ZONE 'UTC')::date,
        (now() AT TIME ZONE 'UTC')::date + 3);
END;
$$;

SELECT hookinbox_alter_when_unlocked(ARRAY['SELECT hookinbox_partition_attempts()']);
DROP FUNCTION hookinbox_partition_attempts();
DROP FUNCTION hookinbox_attempts_unpartitioned();
