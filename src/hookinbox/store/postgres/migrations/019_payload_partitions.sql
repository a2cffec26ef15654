-- Payloads partitioned by UTC day on the delivery id (docs/store.md, "Partitions"), so
-- retention drops a day's payloads whole (DETACH, DROP) instead of deleting them row by row
-- (one million deletes took 258 s under load). Delivery ids begin with their millisecond
-- in hex, so a day is a range of ids and the primary key stays global: a late redelivery
-- still finds its payload's key in one index.
--
-- An existing store is converted in place, in three steps, each committed on its own
-- (PostgresDriver.migrate), so receiving never waits on a scan of the old table:
--   1. a CHECK (delivery_id < the next UTC midnight at least an hour ahead) NOT VALID (an
--      instant under a short lock), with the functions the store's maintenance calls;
--   2. VALIDATE it: a scan that does not block writers;
--   3. in one short transaction, the old table renamed payloads_legacy, the partitioned
--      parent made, the old table attached as its first partition FROM (MINVALUE) TO
--      (that midnight): the validated check proves the range, so the attach scans nothing
--      (an empty old table, a new store's, is dropped instead).
-- The old table then retires whole like a day once its rows are past the retention.
-- Steps 1 and 3 take locks that stop writers, for an instant each: they wait for them at
-- most 200 ms at a time (writers queue behind a waiting ALTER TABLE), and try again
-- every half second for a minute before the migration fails. Steps 1 and 2 may run again
-- (a migration stopped half-way starts over).
--
-- The foreign key to deliveries goes: a detached partition keeping it would take locks on
-- deliveries to drop it (the journal, on every receive). A payload is written in the
-- receive's own transaction with its journal row, so the key's check proved nothing new;
-- its cascade is kept by a trigger (as 012 did for attempts).

-- The smallest delivery id made at or after a time (hookinbox.ids.delivery_id_floor).
CREATE OR REPLACE FUNCTION hookinbox_id_floor(at timestamptz) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT 'dlv_' || lpad(to_hex(floor(extract(epoch FROM at) * 1000)::bigint), 12, '0')
$$;

-- The partitions of payloads with their bounds: lo NULL for the first (MINVALUE), both
-- NULL for the DEFAULT partition (the held payloads of retired days).
CREATE OR REPLACE FUNCTION hookinbox_payload_partitions()
RETURNS TABLE (name text, lo text, hi text)
LANGUAGE sql STABLE SET search_path FROM CURRENT AS $$
    SELECT c.relname::text,
           substring(pg_get_expr(c.relpartbound, c.oid) FROM $r$FROM \('([^']*)'\)$r$),
           substring(pg_get_expr(c.relpartbound, c.oid) FROM $r$TO \('([^']*)'\)$r$)
    FROM pg_inherits i
    JOIN pg_class c ON c.oid = i.inhrelid
    WHERE i.inhparent = to_regclass('payloads')
$$;

-- Makes the missing day partitions from ``first`` to ``last`` (UTC days); the number
-- made. Each is created apart and attached (ATTACH takes no lock that stops inserts); the
-- payloads the DEFAULT partition took for that day meanwhile move into it first.
CREATE OR REPLACE FUNCTION hookinbox_payload_partitions_ahead(first date, last date,
    wait text DEFAULT '300ms')
RETURNS integer
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    day date;
    part text;
    day_lo text;
    day_hi text;
    made integer := 0;
BEGIN
    IF to_regclass('payloads_default') IS NULL THEN
        RETURN 0;
    END IF;
    -- One maker or retirer at a time (two purges on two hosts); the checks below are quick.
    PERFORM pg_advisory_xact_lock(hashtext('hookinbox_payload_partitions'));
    FOR day IN SELECT generate_series(first, last, interval '1 day')::date LOOP
        day_lo := hookinbox_id_floor(day::timestamp AT TIME ZONE 'UTC');
        day_hi := hookinbox_id_floor((day + 1)::timestamp AT TIME ZONE 'UTC');
        CONTINUE WHEN EXISTS (
            SELECT 1 FROM hookinbox_payload_partitions() p
            WHERE p.hi IS NOT NULL AND (p.lo IS NULL OR p.lo < day_hi) AND p.hi > day_lo);
        part := 'payloads_p' || to_char(day, 'YYYYMMDD');
        -- The attach scans DEFAULT (small) under a lock that stops its readers (a claim's
        -- plan locks every partition): waited for at most ``wait``, else the day is made
        -- next time (today's deliveries land in DEFAULT meanwhile).
        PERFORM set_config('lock_timeout', wait, true);
        BEGIN
            EXECUTE format('CREATE TABLE %I (LIKE payloads INCLUDING DEFAULTS '
                'INCLUDING STORAGE)', part);
            EXECUTE format('ALTER TABLE %I ADD PRIMARY KEY (delivery_id)', part);
            EXECUTE format('WITH moved AS (DELETE FROM payloads_default WHERE delivery_id >= %L'
                ' AND delivery_id < %L RETURNING *) INSERT INTO %I SELECT * FROM moved',
                day_lo, day_hi, part);
            EXECUTE format('ALTER TABLE payloads ATTACH PARTITION %I '
                'FOR VALUES FROM (%L) TO (%L)', part, day_lo, day_hi);
            made := made + 1;
        EXCEPTION WHEN lock_not_available THEN
            NULL;
        END;
    END LOOP;
    RETURN made;
END;
$$;

-- The rows of one partition (a count: a scan of it, under no lock that stops a writer).
CREATE OR REPLACE FUNCTION hookinbox_partition_rows(part text) RETURNS bigint
LANGUAGE plpgsql STABLE SET search_path FROM CURRENT AS $$
DECLARE
    found bigint;
BEGIN
    IF to_regclass(part) IS NULL THEN
        RETURN 0;
    END IF;
    EXECUTE format('SELECT count(*) FROM %I', part) INTO found;
    RETURN found;
END;
$$;

-- Retires one range partition: in this one transaction, DETACH it, insert its ``held``
-- payloads (and those of jobs unfinished or failed now) back through the parent (they
-- land in DEFAULT), DROP it. Answers (moved: the payloads copied back, locked_ms: how
-- long payloads was locked against writers), or NULL moved when a lock was not had
-- within ``wait`` (the transaction changed nothing; try again later), 0 and NULL when
-- the partition is gone already.
CREATE OR REPLACE FUNCTION hookinbox_retire_payload_partition(part text, held text[], wait text,
    OUT moved bigint, OUT locked_ms float8)
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    part_lo text;
    part_hi text;
    locked timestamptz;
BEGIN
    moved := 0;
    SELECT coalesce(p.lo, ''), p.hi INTO part_lo, part_hi
    FROM hookinbox_payload_partitions() p WHERE p.name = part AND p.hi IS NOT NULL;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    PERFORM set_config('lock_timeout', wait, true);
    BEGIN
        -- One maker or retirer at a time (two purges on two hosts).
        PERFORM pg_advisory_xact_lock(hashtext('hookinbox_payload_partitions'));
        IF to_regclass(part) IS NULL THEN  -- another purge retired it meanwhile
            RETURN;
        END IF;
        locked := clock_timestamp();
        EXECUTE format('ALTER TABLE payloads DETACH PARTITION %I', part);
        -- By the partition's key, one probe per held delivery: never a scan of the day.
        EXECUTE format($q$INSERT INTO payloads SELECT p.* FROM (
                SELECT unnest($1) AS id
                UNION
                SELECT j.delivery_id FROM jobs j WHERE j.state = 'accepted'
                    AND j.delivery_id >= $2 AND j.delivery_id < $3
                UNION
                SELECT j.delivery_id FROM jobs j WHERE j.state = 'processing'
                    AND j.delivery_id >= $2 AND j.delivery_id < $3
                UNION
                SELECT j.delivery_id FROM jobs j WHERE j.state = 'failed'
                    AND j.delivery_id >= $2 AND j.delivery_id < $3
            ) h JOIN %I p ON p.delivery_id = h.id$q$, part)
            USING held, part_lo, part_hi;
        GET DIAGNOSTICS moved = ROW_COUNT;
        EXECUTE format('DROP TABLE %I', part);
        locked_ms := extract(epoch FROM clock_timestamp() - locked) * 1000;
    EXCEPTION WHEN lock_not_available THEN
        moved := NULL;
    END;
END;
$$;

-- A journal row deleted takes its payload with it (what the foreign key's cascade did).
CREATE OR REPLACE FUNCTION hookinbox_delete_delivery_payload() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    DELETE FROM payloads WHERE delivery_id = OLD.id COLLATE "default";
    RETURN NULL;
END;
$$;

DO $$
DECLARE
    bound text;
BEGIN
    IF (SELECT c.relkind FROM pg_class c WHERE c.oid = to_regclass('payloads')) = 'p' THEN
        RETURN;
    END IF;
    -- Day ranges are ranges of ids only if the column's collation orders the ids' lowercase
    -- hex digits as bytes do (every libc and ICU collation does, barring numeric ordering).
    IF NOT ('dlv_09' < 'dlv_0a' AND 'dlv_0f' < 'dlv_10' AND 'dlv_9f' < 'dlv_a0'
            AND 'dlv_0a' < 'dlv_0a0' AND 'dlv_0a' < 'dlv_0a:x' AND 'dlv_fe' < 'dlv_ff') THEN
        RAISE EXCEPTION 'the database collation does not order delivery ids as bytes';
    END IF;
    bound := hookinbox_id_floor(
        (date_trunc('day', (now() + interval '1 hour') AT TIME ZONE 'UTC') + interval '1 day')
        AT TIME ZONE 'UTC');
    -- A lock that stops writers, for an instant: waited for at most 200 ms at a time (the
    -- receivers queue behind a waiting ALTER), tried again every half second, a minute long.
    FOR attempt IN 1..120 LOOP
        BEGIN
            PERFORM set_config('lock_timeout', '200ms', true);
            ALTER TABLE payloads DROP CONSTRAINT IF EXISTS payloads_before_partitions;
            EXECUTE format('ALTER TABLE payloads ADD CONSTRAINT payloads_before_partitions '
                'CHECK (delivery_id < %L) NOT VALID', bound);
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

-- hookinbox: commit

DO $$
BEGIN
    IF (SELECT c.relkind FROM pg_class c WHERE c.oid = to_regclass('payloads')) = 'r' THEN
        ALTER TABLE payloads VALIDATE CONSTRAINT payloads_before_partitions;
    END IF;
END;
$$;

-- hookinbox: commit

DO $$
DECLARE
    bound text;
    fkey text;
BEGIN
    IF (SELECT c.relkind FROM pg_class c WHERE c.oid = to_regclass('payloads')) = 'p' THEN
        RETURN;
    END IF;
    SELECT substring(pg_get_constraintdef(oid) FROM $r$'([^']*)'$r$) INTO bound
    FROM pg_constraint
    WHERE conrelid = to_regclass('payloads') AND conname = 'payloads_before_partitions';
    -- The swap locks payloads and deliveries against writers for its few statements: each
    -- try waits at most 200 ms for them, as step 1.
    FOR attempt IN 1..120 LOOP
        BEGIN
            PERFORM set_config('lock_timeout', '200ms', true);
            FOR fkey IN SELECT conname FROM pg_constraint
                        WHERE conrelid = to_regclass('payloads') AND contype = 'f' LOOP
                EXECUTE format('ALTER TABLE payloads DROP CONSTRAINT %I', fkey);
            END LOOP;
            ALTER TABLE payloads RENAME TO payloads_legacy;
            ALTER TABLE payloads_legacy RENAME CONSTRAINT payloads_pkey TO payloads_legacy_pkey;
            CREATE TABLE payloads (
                LIKE payloads_legacy INCLUDING DEFAULTS INCLUDING STORAGE,
                PRIMARY KEY (delivery_id)
            ) PARTITION BY RANGE (delivery_id);
            IF EXISTS (SELECT 1 FROM payloads_legacy) THEN
                EXECUTE format('ALTER TABLE payloads ATTACH PARTITION payloads_legacy '
                    'FOR VALUES FROM (MINVALUE) TO (%L)', bound);
                ALTER TABLE payloads_legacy DROP CONSTRAINT payloads_before_partitions;
            ELSE
                DROP TABLE payloads_legacy;  -- a new store: days from the first one
            END IF;
            CREATE TABLE payloads_default PARTITION OF payloads DEFAULT;
            PERFORM hookinbox_payload_partitions_ahead((now() AT TIME ZONE 'UTC')::date,
                (now() AT TIME ZONE 'UTC')::date + 3);
            CREATE TRIGGER deliveries_delete_payload AFTER DELETE ON deliveries
                FOR EACH ROW EXECUTE FUNCTION hookinbox_delete_delivery_payload();
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
