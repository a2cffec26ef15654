"""The handler the ``hookinbox worker`` processes run: one shipment per fulfilled order."""

from __future__ import annotations

import json
import os
from typing import Any

from hookinbox import Event, JobContext


async def record_shipment(event: Event, ctx: JobContext, payload: dict[str, Any]) -> None:
    def ship(key: str) -> dict[str, Any]:
        with open(os.environ["SHIPMENTS_FILE"], "a") as fh:
            fh.write(json.dumps({"order": payload["id"], "event_id": event.event_id}) + "\n")
        return {"id": f"shipment-{payload['id']}"}

    await ctx.effect(f"shipment:{payload['id']}", ship)
