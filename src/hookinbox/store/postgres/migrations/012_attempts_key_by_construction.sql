-- Every attempt row is written from its job's row, held by the writing statement or
-- transaction: the settle's update, the claim's and the exhausted-lease sweep's
-- FOR UPDATE, a resource route's lease check (FOR UPDATE), or the job inserted by the
-- same transaction (store/hot_path.py, store/transitions.py). The job exists and cannot
-- go until that commits, so the foreign key's check (a query and a row lock per attempt
-- written, run inside every settle) proved nothing new (issue 11, worker throughput).
-- What the key did besides, deleting a job's attempts with the job, this trigger does
-- as the key's cascade did: one delete by attempts_job_idx per job deleted.
ALTER TABLE attempts DROP CONSTRAINT attempts_job_id_fkey;

-- The function keeps the search path the store was migrated with: a DELETE on jobs from a
-- session with another search path (an operator's psql naming the schema) still finds
-- this store's attempts, never another schema's.
CREATE FUNCTION hookinbox_delete_job_attempts() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    DELETE FROM attempts WHERE job_id = OLD.id;
    RETURN NULL;
END;
$$;

CREATE TRIGGER jobs_delete_attempts AFTER DELETE ON jobs
    FOR EACH ROW EXECUTE FUNCTION hookinbox_delete_job_attempts();
