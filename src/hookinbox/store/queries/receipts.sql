-- Webhook answers counted per minute, source and outcome (hookinbox.store.receipts); the
-- file format: hookinbox/store/statements.py.

-- name: add
INSERT INTO receipt_counts (minute, source, outcome, answers)
VALUES (:minute, :source, :outcome, :answers)
ON CONFLICT (minute, source, outcome)
DO UPDATE SET answers = receipt_counts.answers + excluded.answers;

-- name: forget
DELETE FROM receipt_counts WHERE minute < :oldest;

-- name: since
SELECT minute, source, outcome, answers
FROM receipt_counts
WHERE minute >= :first
ORDER BY minute, source, outcome;
