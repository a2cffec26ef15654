-- The core statements (hookinbox.store.core); the format: hookinbox/store/statements.py.

-- name: count_rows
SELECT (SELECT count(*) FROM deliveries) AS deliveries, (SELECT count(*) FROM jobs) AS jobs,
    (SELECT count(*) FROM payloads) AS payloads, (SELECT count(*) FROM effects) AS effects,
    (SELECT count(*) FROM attempts) AS attempts;

-- name: store_clock
-- The store's clock now, to set this host's against: time-ordered ids come from the
-- host's clock, leases and due times from the store's.
SELECT {now} AS now;

-- name: schema_version
-- The highest migration applied: a store migrated by a newer hookinbox than the one
-- asking is past what it knows.
SELECT max(version) AS version FROM schema_migrations;
