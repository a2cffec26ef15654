-- Sealed values walked a page at a time (hookinbox.store.sealed_rows): counted per key,
-- and re-wrapped to the current key by `hookinbox keys rotate`; the file format:
-- hookinbox/store/statements.py. Each page is a keyset page over the table's primary key;
-- a sealed value begins with :magic (hookinbox.sealing), which plaintext never does.

-- name: payloads_page
SELECT delivery_id AS pk, body AS sealed
FROM payloads
WHERE substr(body, 1, 4) = :magic AND (delivery_id > :after OR :after IS NULL)
ORDER BY delivery_id
LIMIT :limit;

-- name: rewrap_payload
-- Only the value read: a row purged or changed meanwhile is left alone.
UPDATE payloads SET body = :sealed WHERE delivery_id = :pk AND body = :old;

-- name: rejected_page
SELECT id AS pk, body AS sealed
FROM rejected_deliveries
WHERE body IS NOT NULL AND substr(body, 1, 4) = :magic AND (id > :after OR :after IS NULL)
ORDER BY id
LIMIT :limit;

-- name: rewrap_rejected
UPDATE rejected_deliveries SET body = :sealed WHERE id = :pk AND body = :old;

-- name: snippets_page
-- With the job: PostgreSQL's attempts are partitioned by it (an update by id alone would
-- probe every day's index).
SELECT id AS pk, job_id AS job, response_snippet AS sealed
FROM attempts
WHERE response_snippet IS NOT NULL AND substr(response_snippet, 1, 5) = :prefix
  AND id > :after
ORDER BY id
LIMIT :limit;

-- name: rewrap_snippet
UPDATE attempts SET response_snippet = :sealed
WHERE job_id = :job AND id = :pk AND response_snippet = :old;
