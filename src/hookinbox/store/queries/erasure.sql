-- Erasure by data subject (hookinbox.store.erasure): what a subject's keyed hash finds,
-- and its payloads, answer snippets and kept refusals' bodies taken out in bounded
-- batches; the file format: hookinbox/store/statements.py.
--
-- The journal rows stay (ids, event ids, body hashes, the subject's keyed hash), so a
-- provider's later retry of an erased event is still a duplicate and a second erase
-- finds what a forward in flight wrote after the first.

-- fragment: subject_deliveries
d.subject_hash = :subject AND (d.source = :source OR :source IS NULL)

-- fragment: has_payload
EXISTS (SELECT 1 FROM payloads p WHERE p.delivery_id = d.id {collate:default})

-- fragment: has_snippet
EXISTS (SELECT 1 FROM jobs j JOIN attempts a ON a.job_id = j.id WHERE {jobs_of:d.id}
    AND a.response_snippet IS NOT NULL)

-- name: count_deliveries
-- The subject's deliveries, and how many of them still hold a payload.
SELECT count(*) AS deliveries, coalesce(sum(CASE WHEN {include:has_payload} THEN 1 ELSE 0
    END), 0) AS payloads
FROM deliveries d
WHERE {include:subject_deliveries};

-- name: count_snippets
-- The answer snippets of the subject's deliveries' attempts. Each delivery's jobs are
-- probed ({join_jobs_of}): joined by their delivery id, PostgreSQL would hash every job.
SELECT count(*)
FROM deliveries d
{join_jobs_of:d.id}
JOIN attempts a ON a.job_id = j.id
WHERE {include:subject_deliveries} AND a.response_snippet IS NOT NULL;

-- name: count_rejected
-- The subject's kept refusals that still hold a body.
SELECT count(*)
FROM rejected_deliveries
WHERE subject_hash = :subject AND (source = :source OR :source IS NULL) AND body IS NOT NULL;

-- name: batch
-- The next deliveries of the subject with something left to erase.
SELECT d.id
FROM deliveries d
WHERE {include:subject_deliveries} AND ({include:has_payload} OR {include:has_snippet})
ORDER BY d.id
LIMIT :limit;

-- name: drop_payloads
DELETE FROM payloads
WHERE delivery_id {in:ids};

-- name: drop_snippets
UPDATE attempts
SET response_snippet = NULL
WHERE response_snippet IS NOT NULL AND job_id IN (SELECT j.id FROM deliveries d
    {join_jobs_of:d.id} WHERE d.id {in:ids});

-- name: mark_erased
-- Shown as purged: the payload is gone for good (a job still to run fails payload_purged).
UPDATE deliveries
SET payload_purged_at = coalesce(payload_purged_at, {now})
WHERE id {in:ids};

-- name: drop_rejected_bodies
-- The next batch of the subject's kept refusals lose their body (the row, its hash and
-- headers stay: a repeat of the same refusal still folds into it).
UPDATE rejected_deliveries
SET body = NULL, stored_bytes = stored_bytes - body_bytes
WHERE id IN (SELECT id FROM rejected_deliveries WHERE subject_hash = :subject AND (source =
    :source OR :source IS NULL) AND body IS NOT NULL LIMIT :limit);
