-- Rejected transitions go to a review list (issue 12): a transition the state machine
-- refused (a late `processing` after `ready`, a tenant mismatch) is never applied, and
-- an operator looks at it and says so. Unreviewed past operations.transition_review,
-- `hookinbox reconcile` reports it.
ALTER TABLE resource_transitions ADD COLUMN reviewed_at {time};
ALTER TABLE resource_transitions ADD COLUMN reviewed_by text;
ALTER TABLE resource_transitions ADD COLUMN review_note text;
CREATE INDEX resource_transitions_review_idx ON resource_transitions (outcome, reviewed_at, id);
