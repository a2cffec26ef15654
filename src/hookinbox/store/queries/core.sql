-- The core statements (hookinbox.store.core); the format: hookinbox/store/statements.py.

-- name: count_rows
SELECT (SELECT count(*) FROM deliveries) AS deliveries, (SELECT count(*) FROM jobs) AS jobs,
    (SELECT count(*) FROM payloads) AS payloads, (SELECT count(*) FROM effects) AS effects,
    (SELECT count(*) FROM attempts) AS attempts;
