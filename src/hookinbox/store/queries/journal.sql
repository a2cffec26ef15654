-- The journal (hookinbox.store.journal): reading deliveries back, listing and searching
-- them; the file format: hookinbox/store/statements.py. The reservation itself is the hot
-- path (hot_path.sql; PostgreSQL's own in postgres/hot_path.sql).

-- fragment: delivery_columns
d.id, d.source, d.event_id, d.event_type, d.body_sha256, d.first_seen_at, d.last_seen_at,
d.delivery_count, d.conflicts, d.origin,
EXISTS (SELECT 1 FROM payloads p WHERE p.delivery_id = d.id {collate:default}) AS payload_retained

-- fragment: delivery_status
-- A delivery's status from its jobs (hookinbox.store.records.delivery_status). On
-- PostgreSQL each lookup is the range of its jobs' ids in jobs_pkey, in that index's
-- collation (deliveries.id is COLLATE "C"): without it every delivery a search walks
-- costs a scan of jobs; the range also leaves one day of jobs in the plan, not every day.
CASE
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE {jobs_of:d.id}
                 AND j.state = 'failed')
        THEN 'failed'
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE {jobs_of:d.id}
                 AND j.state = 'processing')
        THEN 'processing'
    WHEN NOT EXISTS (SELECT 1 FROM jobs j WHERE {jobs_of:d.id}
                     AND j.state <> 'completed')
        THEN 'completed'
    ELSE 'accepted' END

-- fragment: search_filters
(lower(d.event_type) LIKE :type ESCAPE '\' OR :type IS NULL)
  AND (d.id >= :floor OR :floor IS NULL)
  AND (d.id < :ceiling OR :ceiling IS NULL)
  AND (d.source = :source OR :source IS NULL)
  AND ({include:delivery_status} = :status OR :status IS NULL)

-- fragment: sources
-- The journal's sources, walked over the first column of the dedup key (source,
-- event_id): one probe per source, a handful of pages however many rows the journal
-- holds. An event id alone is found through that key, a probe per source: the receive
-- path no longer writes an index on event_id by itself for these rare reads.
WITH RECURSIVE s(source) AS (
    SELECT (SELECT source FROM deliveries ORDER BY source LIMIT 1)
    UNION ALL
    SELECT (SELECT source FROM deliveries WHERE source > s.source ORDER BY source LIMIT 1)
    FROM s WHERE s.source IS NOT NULL
)
SELECT source FROM s WHERE source IS NOT NULL

-- fragment: by_ref
d.id IN (SELECT id FROM deliveries WHERE id = :ref
         UNION ALL SELECT id FROM deliveries WHERE event_id = :ref
             AND source IN ({include:sources}))

-- fragment: payload_matches
-- Retained payloads of the window (the payloads' primary key bounds the walk) whose JSON
-- value at :payload_path is :payload_value ({payload_is}: hookinbox/store/dialect.py).
-- The ids found carry deliveries_pkey's collation, so each match is one index lookup, not
-- a walk of the journal (docs/performance.md, "Cost growth").
SELECT p.delivery_id {collate:C} FROM payloads p WHERE p.delivery_id >= :floor
         AND (p.delivery_id < :ceiling OR :ceiling IS NULL) AND {payload_is:p}

-- fragment: by_payload
-- For a count, which may stop at :cap matches.
d.id IN ({include:payload_matches})

-- fragment: by_payload_found
-- For a page, newest first: the matches found whole first ({in_found}), then looked up
-- one by one. As a join, the planner, expecting hundreds of matches where a search for
-- one value finds a few, walked the window's journal backward against them.
d.id {in_found}{include:payload_matches}{end_in_found}

-- name: get
SELECT {include:delivery_columns}
FROM deliveries d
WHERE d.id IN (SELECT id FROM deliveries WHERE id = :ref
               UNION ALL SELECT id FROM deliveries WHERE event_id = :ref
                   AND source IN ({include:sources}) AND (source = :source OR :source IS NULL))
ORDER BY (d.id = :ref) DESC, d.first_seen_at DESC
LIMIT 1;

-- name: jobs_of
SELECT id, action, state, attempts, max_attempts, last_error, next_attempt_at,
       lease_expires_at, business_id, created_at, updated_at
FROM jobs j
WHERE {jobs_of::id}
ORDER BY action;

-- name: list
SELECT {include:delivery_columns}, {job_states} AS states
FROM deliveries d
WHERE (d.source = :source OR :source IS NULL)
  AND (d.id < :before OR :before IS NULL)
  AND ({include:delivery_status} = :status OR :status IS NULL)
ORDER BY d.id DESC
LIMIT :limit;

-- name: by_event
SELECT id
FROM deliveries
WHERE event_id = :event_id AND source IN ({include:sources})
  AND (source = :source OR :source IS NULL)
ORDER BY first_seen_at, id;

-- name: payload
SELECT body FROM payloads WHERE delivery_id = :id;

-- name: stored
SELECT body, headers FROM payloads WHERE delivery_id = :id;

-- The searches: one statement per choice of filters (by reference, by a rare status, by
-- payload), so a search by id or by a rare status walks an index instead of the journal;
-- count_* counts up to :cap what the search of the same name finds.

-- name: search_by_ref_by_payload
SELECT {include:delivery_columns}, {job_states} AS states
FROM deliveries d
WHERE {include:by_ref}
  AND {include:by_payload_found}
  AND {include:search_filters}
  AND (d.id < :before OR :before IS NULL)
ORDER BY d.id DESC
LIMIT :limit;

-- name: count_search_by_ref_by_payload
SELECT count(*) FROM (
    SELECT 1 FROM deliveries d
    WHERE {include:by_ref}
      AND {include:by_payload}
      AND {include:search_filters}
    LIMIT :cap
) AS c;

-- name: search_by_ref
SELECT {include:delivery_columns}, {job_states} AS states
FROM deliveries d
WHERE {include:by_ref}
  AND {include:search_filters}
  AND (d.id < :before OR :before IS NULL)
ORDER BY d.id DESC
LIMIT :limit;

-- name: count_search_by_ref
SELECT count(*) FROM (
    SELECT 1 FROM deliveries d
    WHERE {include:by_ref}
      AND {include:search_filters}
    LIMIT :cap
) AS c;

-- name: search_by_ref_failed_by_payload
SELECT {include:delivery_columns}, {job_states} AS states
FROM deliveries d
WHERE {include:by_ref}
  AND d.id IN (SELECT delivery_id FROM jobs WHERE state = 'failed')
  AND {include:by_payload_found}
  AND {include:search_filters}
  AND (d.id < :before OR :before IS NULL)
ORDER BY d.id DESC
LIMIT :limit;

-- name: count_search_by_ref_failed_by_payload
SELECT count(*) FROM (
    SELECT 1 FROM deliveries d
    WHERE {include:by_ref}
      AND d.id IN (SELECT delivery_id FROM jobs WHERE state = 'failed')
      AND {include:by_payload}
      AND {include:search_filters}
    LIMIT :cap
) AS c;

-- name: search_by_ref_failed
SELECT {include:delivery_columns}, {job_states} AS states
FROM deliveries d
WHERE {include:by_ref}
  AND d.id IN (SELECT delivery_id FROM jobs WHERE state = 'failed')
  AND {include:search_filters}
  AND (d.id < :before OR :before IS NULL)
ORDER BY d.id DESC
LIMIT :limit;

-- name: count_search_by_ref_failed
SELECT count(*) FROM (
    SELECT 1 FROM deliveries d
    WHERE {include:by_ref}
      AND d.id IN (SELECT delivery_id FROM jobs WHERE state = 'failed')
      AND {include:search_filters}
    LIMIT :cap
) AS c;

-- name: search_by_ref_processing_by_payload
SELECT {include:delivery_columns}, {job_states} AS states
FROM deliveries d
WHERE {include:by_ref}
  AND d.id IN (SELECT delivery_id FROM jobs WHERE state = 'processing')
  AND {include:by_payload_found}
  AND {include:search_filters}
  AND (d.id < :before OR :before IS NULL)
ORDER BY d.id DESC
LIMIT :limit;

-- name: count_search_by_ref_processing_by_payload
SELECT count(*) FROM (
    SELECT 1 FROM deliveries d
    WHERE {include:by_ref}
      AND d.id IN (SELECT delivery_id FROM jobs WHERE state = 'processing')
      AND {include:by_payload}
      AND {include:search_filters}
    LIMIT :cap
) AS c;

-- name: search_by_ref_processing
SELECT {include:delivery_columns}, {job_states} AS states
FROM deliveries d
WHERE {include:by_ref}
  AND d.id IN (SELECT delivery_id FROM jobs WHERE state = 'processing')
  AND {include:search_filters}
  AND (d.id < :before OR :before IS NULL)
ORDER BY d.id DESC
LIMIT :limit;

-- name: count_search_by_ref_processing
SELECT count(*) FROM (
    SELECT 1 FROM deliveries d
    WHERE {include:by_ref}
      AND d.id IN (SELECT delivery_id FROM jobs WHERE state = 'processing')
      AND {include:search_filters}
    LIMIT :cap
) AS c;

-- name: search_by_payload
SELECT {include:delivery_columns}, {job_states} AS states
FROM deliveries d
WHERE {include:by_payload_found}
  AND {include:search_filters}
  AND (d.id < :before OR :before IS NULL)
ORDER BY d.id DESC
LIMIT :limit;

-- name: count_search_by_payload
SELECT count(*) FROM (
    SELECT 1 FROM deliveries d
    WHERE {include:by_payload}
      AND {include:search_filters}
    LIMIT :cap
) AS c;

-- name: search
SELECT {include:delivery_columns}, {job_states} AS states
FROM deliveries d
WHERE {include:search_filters}
  AND (d.id < :before OR :before IS NULL)
ORDER BY d.id DESC
LIMIT :limit;

-- name: count_search
SELECT count(*) FROM (
    SELECT 1 FROM deliveries d
    WHERE {include:search_filters}
    LIMIT :cap
) AS c;

-- name: search_failed_by_payload
SELECT {include:delivery_columns}, {job_states} AS states
FROM deliveries d
WHERE d.id IN (SELECT delivery_id FROM jobs WHERE state = 'failed')
  AND {include:by_payload_found}
  AND {include:search_filters}
  AND (d.id < :before OR :before IS NULL)
ORDER BY d.id DESC
LIMIT :limit;

-- name: count_search_failed_by_payload
SELECT count(*) FROM (
    SELECT 1 FROM deliveries d
    WHERE d.id IN (SELECT delivery_id FROM jobs WHERE state = 'failed')
      AND {include:by_payload}
      AND {include:search_filters}
    LIMIT :cap
) AS c;

-- name: search_failed
SELECT {include:delivery_columns}, {job_states} AS states
FROM deliveries d
WHERE d.id IN (SELECT delivery_id FROM jobs WHERE state = 'failed')
  AND {include:search_filters}
  AND (d.id < :before OR :before IS NULL)
ORDER BY d.id DESC
LIMIT :limit;

-- name: count_search_failed
SELECT count(*) FROM (
    SELECT 1 FROM deliveries d
    WHERE d.id IN (SELECT delivery_id FROM jobs WHERE state = 'failed')
      AND {include:search_filters}
    LIMIT :cap
) AS c;

-- name: search_processing_by_payload
SELECT {include:delivery_columns}, {job_states} AS states
FROM deliveries d
WHERE d.id IN (SELECT delivery_id FROM jobs WHERE state = 'processing')
  AND {include:by_payload_found}
  AND {include:search_filters}
  AND (d.id < :before OR :before IS NULL)
ORDER BY d.id DESC
LIMIT :limit;

-- name: count_search_processing_by_payload
SELECT count(*) FROM (
    SELECT 1 FROM deliveries d
    WHERE d.id IN (SELECT delivery_id FROM jobs WHERE state = 'processing')
      AND {include:by_payload}
      AND {include:search_filters}
    LIMIT :cap
) AS c;

-- name: search_processing
SELECT {include:delivery_columns}, {job_states} AS states
FROM deliveries d
WHERE d.id IN (SELECT delivery_id FROM jobs WHERE state = 'processing')
  AND {include:search_filters}
  AND (d.id < :before OR :before IS NULL)
ORDER BY d.id DESC
LIMIT :limit;

-- name: count_search_processing
SELECT count(*) FROM (
    SELECT 1 FROM deliveries d
    WHERE d.id IN (SELECT delivery_id FROM jobs WHERE state = 'processing')
      AND {include:search_filters}
    LIMIT :cap
) AS c;

-- name: payload_walk
-- A payload filter when bodies may be sealed: the window's retained payloads, newest
-- first, with every other filter; hookinbox.store.journal opens each body and matches it
-- in Python (SQL cannot see into a sealed body). Its cost: every retained payload of the
-- window is read and opened once per search.
SELECT {include:delivery_columns}, {job_states} AS states, p.body AS body
FROM payloads p JOIN deliveries d ON d.id = p.delivery_id
WHERE p.delivery_id >= :floor AND (p.delivery_id < :ceiling OR :ceiling IS NULL)
  AND (p.delivery_id < :before OR :before IS NULL)
  AND (d.id = :ref OR d.event_id = :ref OR :ref IS NULL)
  AND {include:search_filters}
ORDER BY p.delivery_id DESC
LIMIT :limit;
