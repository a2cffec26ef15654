-- The jobs table is a queue: every job is updated at its claim and at its settle, and a
-- claim walks jobs_due_idx from its oldest entry, over the dead ones too, until a vacuum
-- takes them out (measured: one worker fell from 1,732 to 674 jobs/s over four fills of
-- 15,000 jobs with no vacuum between them, and held its rate with one). PostgreSQL's
-- defaults vacuum a table once a fifth of it is dead, far too late for a queue: these
-- vacuum jobs and attempts after a few thousand dead (or new) rows, without the cost
-- delay. They act only where autovacuum runs (the default; docs/operations.md).
ALTER TABLE jobs SET (
    autovacuum_vacuum_scale_factor = 0.0,
    autovacuum_vacuum_threshold = 5000,
    autovacuum_vacuum_insert_scale_factor = 0.0,
    autovacuum_vacuum_insert_threshold = 20000,
    autovacuum_analyze_scale_factor = 0.02,
    autovacuum_vacuum_cost_delay = 0
);
ALTER TABLE attempts SET (
    autovacuum_vacuum_scale_factor = 0.0,
    autovacuum_vacuum_threshold = 10000,
    autovacuum_vacuum_insert_scale_factor = 0.0,
    autovacuum_vacuum_insert_threshold = 50000,
    autovacuum_vacuum_cost_delay = 0
);
