-- A duplicate updates its journal row (last_seen_at, delivery_count; no indexed column
-- since 020), which PostgreSQL can do in place (a HOT update: no new index entry) only when
-- the row's page has room for the new version. Journal pages are filled by inserts in id
-- order and never again; 15% kept free lets a page take its duplicates' updates in place.
-- Pages written from now on; existing ones keep their fill until rewritten.
ALTER TABLE deliveries SET (fillfactor = 85);
