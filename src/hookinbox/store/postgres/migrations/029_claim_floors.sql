-- The claim's floor, no longer held back by DEFAULT's share of the retired days.
--
-- A day of jobs retires with its unfinished and dead-lettered jobs moved to DEFAULT
-- (028). hookinbox_job_floor counts them, so one such job (a dead letter of an ordered
-- route holding its key, a job waiting for weeks) moved every worker's floor back to its
-- day, and their claims planned and locked every day after it until it was released.
-- Their ids are all below the first day of jobs still there, and no partition but
-- DEFAULT holds such an id: a claim names that id too (:below) and reads
-- "id >= floor OR id < below", which prunes the days between the two as the floor alone
-- did, and the floor leaves those jobs out. hookinbox_job_floor stays as it was, for
-- a worker of the version before during an upgrade.

-- The first id a claim must read from (floor) and the first id of the days of jobs
-- still there (below; '' while the first partition reaches back to the beginning):
-- hookinbox_job_floor's rule over the days still there and DEFAULT's jobs from below on
-- (ids past the last day made, if any).
CREATE OR REPLACE FUNCTION hookinbox_claim_floors(OUT floor text, OUT below text)
LANGUAGE plpgsql STABLE SET search_path FROM CURRENT AS $$
DECLARE
    part record;
    found text;
    busy boolean;
BEGIN
    floor := '';
    below := '';
    IF to_regclass('jobs_default') IS NULL THEN
        RETURN;
    END IF;
    below := hookinbox_jobs_kept_from();
    SELECT min(id) INTO found FROM jobs_default
    WHERE id >= below
      AND (state IN ('accepted', 'processing') OR (state = 'failed' AND order_hold));
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
    floor := hookinbox_day_floor(least(found, hookinbox_id_floor(now() - interval '1 hour')));
END;
$$;
