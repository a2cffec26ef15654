"""Why a job cannot be run again, in words an operator can act on (or None if it can)."""

from __future__ import annotations

from hookinbox.config import Config
from hookinbox.store import JobDetail, iso


def action_configured(config: Config, source: str, action: str) -> bool:
    found = config.source(source)
    return found is not None and any(route.action == action for route in found.routes)


def why_not_runnable(job: JobDetail, config: Config) -> str | None:
    """A refusal reason shared by replay and dead-letter retry. The state checks are
    repeated atomically by the store's requeue; these give the operator the why."""
    if job.state == "processing":
        return f"running now (leased until {iso(job.lease_expires_at)})"
    if job.state == "accepted":
        return "already queued: it runs when a worker is free"
    if not job.payload_retained:
        return "payload_purged: the payload was purged after retention; it cannot run again"
    if not action_configured(config, job.source, job.action):
        return f"action {job.action!r} of source {job.source!r} is no longer configured"
    return None
