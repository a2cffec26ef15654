-- A tracked resource is bound to the sources that may move it: `sources` is their sorted,
-- comma-separated names (source names hold no comma), set when the resource is created
-- or, if it was created without, by the first event applied to it. NULL: not bound yet
-- (every resource created before this migration); its next applied event binds it.
ALTER TABLE resources ADD COLUMN sources text;

-- Who sent an event line of the transition log, and the tenant its review belongs to:
-- the sender's (its route's pinned tenant, or what it claimed), never the tenant of a
-- resource it was refused. Lines written before this migration: the source from the
-- journal where the delivery is still there; the tenant only for a refusal that was
-- not a mismatch (its sender was the resource's own), so an old mismatch is in no
-- tenant's list rather than in the owner's.
ALTER TABLE resource_transitions ADD COLUMN source text;
ALTER TABLE resource_transitions ADD COLUMN tenant text;
UPDATE resource_transitions
SET source = (SELECT d.source FROM deliveries d WHERE d.id = resource_transitions.delivery_id)
WHERE outcome = 'rejected' AND delivery_id IS NOT NULL;
UPDATE resource_transitions
SET tenant = (SELECT r.tenant FROM resources r WHERE r.id = resource_transitions.resource_id)
WHERE outcome = 'rejected'
  AND (reason IS NULL OR reason NOT IN ('tenant_mismatch', 'owner_mismatch'));
