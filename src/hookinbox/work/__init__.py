"""Working: the worker pool (claim with a lease, run, retry with backoff, dead-letter), the
actions a route runs (a handler, a forward, a resource event) and the effects ledger."""
