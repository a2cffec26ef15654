-- A delivery's data subject (a source's `subject` pointer), as a keyed hash: HMAC-SHA256
-- under the [privacy] key, never the value. `hookinbox erase --subject` finds a person's
-- deliveries and kept refusals by it; most rows have none, so the indexes are partial.
ALTER TABLE deliveries ADD COLUMN subject_hash text;
CREATE INDEX deliveries_subject_idx ON deliveries (subject_hash) WHERE subject_hash IS NOT NULL;
ALTER TABLE rejected_deliveries ADD COLUMN subject_hash text;
CREATE INDEX rejected_deliveries_subject_idx ON rejected_deliveries (subject_hash)
    WHERE subject_hash IS NOT NULL;
