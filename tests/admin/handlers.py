"""A handler that fails until the test "fixes" it (in-process state)."""

from __future__ import annotations

from hookinbox.work.actions import Event
from hookinbox.work.effects import JobContext

FIXED: set[str] = set()


class CrmDown(Exception):
    code = "crm_down"


async def flaky(event: Event, ctx: JobContext) -> str:
    if event.event_id not in FIXED and "*" not in FIXED:
        raise CrmDown(f"CRM refused {event.payload}")
    return f"crm-{event.event_id}"
