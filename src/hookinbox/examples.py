"""Example handlers for the quickstart and the benchmarks."""

from __future__ import annotations

from typing import Any

from hookinbox.logs import get_logger
from hookinbox.work.actions import Event
from hookinbox.work.effects import JobContext

log = get_logger("hookinbox.examples")


async def create_crm_task(event: Event, ctx: JobContext) -> None:
    """Pretend to create a CRM task, once per event, under the key event id + action."""

    def create(key: str) -> dict[str, Any]:
        # A real handler calls the CRM here, passing ``key`` as its idempotency key.
        return {"id": f"task-{event.event_id}"}

    await ctx.effect(f"crm-task:{event.event_id}", create)
    log.info("crm_task_created", event_id=event.event_id, business_id=ctx.business_id)


async def noop(event: Event, ctx: JobContext) -> None:
    """Does nothing; for benchmarks."""


async def log_event(event: Event, ctx: JobContext) -> None:
    """Log that the event was handled: ids and type only, never the payload."""
    log.info("event_handled", source=event.source, event_id=event.event_id, type=event.type)
