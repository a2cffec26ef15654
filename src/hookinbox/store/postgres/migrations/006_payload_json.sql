-- A retained payload as jsonb for the payload filter of a delivery search, or NULL when
-- the body is not JSON (a form body, bytes jsonb refuses): a search never fails on one
-- row. Only searches call it, on the rows of a bounded window that hold the searched
-- bytes; nothing on the receive path does (an index over it would parse every body on
-- insert, and its exception block costs a subtransaction per row). Not PARALLEL SAFE:
-- a subtransaction cannot start in a parallel scan, which a large window would choose.
CREATE FUNCTION hookinbox_payload_json(body bytea) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE COST 1000 AS $$
BEGIN
    RETURN convert_from(body, 'UTF8')::jsonb;
EXCEPTION WHEN others THEN
    RETURN NULL;
END;
$$;
