"""The operational HTTP endpoints (health, readiness, metrics) and the one place where
errors become HTTP statuses."""
