"""The handler of ``response.completed``: one CRM task per event, whatever happens.

It declares the payload it expects (a pydantic model: a body that does not match is a
dead letter ``payload_invalid``, not retried) and asks for the CRM client by name; the
workers get it from ``services()``, named in the config as ``[worker] services``.
"""

from __future__ import annotations

import os
from typing import Any

import httpx
from pydantic import BaseModel

from hookinbox import Event, JobContext

#: Set in the environment of a worker that should die right after the CRM call, before
#: the ledger records it: the crash this example recovers from.
CRASH_AFTER_CREATE = "CRM_EXAMPLE_CRASH_AFTER_CREATE"


class ResponseData(BaseModel):
    id: str


class ResponseCompleted(BaseModel):
    """OpenAI's ``response.completed`` event (the fields this handler reads)."""

    id: str
    type: str
    data: ResponseData


class CrmClient:
    def __init__(self, base_url: str) -> None:
        self.base_url = base_url

    async def create_task(self, title: str, idempotency_key: str) -> dict[str, Any]:
        async with httpx.AsyncClient(base_url=self.base_url, timeout=10) as client:
            answer = await client.post(
                "/tasks", json={"title": title}, headers={"Idempotency-Key": idempotency_key}
            )
            answer.raise_for_status()
            return dict(answer.json())

    async def find_task(self, idempotency_key: str) -> dict[str, Any] | None:
        async with httpx.AsyncClient(base_url=self.base_url, timeout=10) as client:
            answer = await client.get("/tasks", params={"idempotency_key": idempotency_key})
            answer.raise_for_status()
            tasks = answer.json()["tasks"]
            return dict(tasks[0]) if tasks else None


def services() -> dict[str, Any]:
    """``[worker] services``: what handlers ask for by name, built in each worker process."""
    return {"crm": CrmClient(os.environ["CRM_URL"])}


async def create_crm_task(
    event: Event, ctx: JobContext, payload: ResponseCompleted, crm: CrmClient
) -> None:
    async def create(key: str) -> dict[str, Any]:
        task = await crm.create_task(f"Follow up on {payload.data.id}", idempotency_key=key)
        if os.environ.get(CRASH_AFTER_CREATE):
            os._exit(70)  # the task exists in the CRM; the ledger never hears of it
        return {"id": task["id"]}

    async def find(key: str) -> dict[str, Any] | None:
        task = await crm.find_task(key)
        return {"id": task["id"]} if task else None

    # The business key: this event + this action. It is also the CRM's idempotency key.
    await ctx.effect(f"crm-task:{event.event_id}", create, find)
