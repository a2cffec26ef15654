-- The audit statements (hookinbox.store.audit); the format: hookinbox/store/statements.py.

-- name: audit
INSERT INTO operator_actions (at, actor, command, source, delivery_id, job_id, detail)
VALUES ({now}, :actor, :command, :source, :delivery_id, :job_id, :detail);

-- name: list
SELECT at, actor, command, source, delivery_id, job_id, detail
FROM operator_actions
WHERE (delivery_id = :delivery_id OR :delivery_id IS NULL)
ORDER BY id
LIMIT :limit;
