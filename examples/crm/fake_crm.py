"""A fake CRM: the external system the handler makes a task in. It honours an
idempotency key, as a real CRM API with one does: a second POST with the same key
returns the task the first one made instead of making another.

    POST /tasks   {"title": ...}  Idempotency-Key: K  ->  201 {"id": ...}  (200 on a repeat)
    GET  /tasks?idempotency_key=K                     ->  {"tasks": [...]}  (find by key)
    GET  /tasks                                       ->  every task, and how many POSTs came
"""

from __future__ import annotations

from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route


class FakeCrm:
    def __init__(self) -> None:
        self.tasks: list[dict[str, Any]] = []
        self.create_calls = 0
        self.app = Starlette(routes=[Route("/tasks", self.tasks_endpoint, methods=["GET", "POST"])])

    async def tasks_endpoint(self, request: Request) -> JSONResponse:
        if request.method == "GET":
            key = request.query_params.get("idempotency_key")
            found = [t for t in self.tasks if key is None or t["idempotency_key"] == key]
            return JSONResponse({"tasks": found, "create_calls": self.create_calls})
        self.create_calls += 1
        key = request.headers.get("idempotency-key")
        if not key:
            return JSONResponse({"error": "idempotency_key_required"}, status_code=400)
        for task in self.tasks:
            if task["idempotency_key"] == key:
                return JSONResponse(task, status_code=200)
        data = await request.json()
        task = {"id": f"task_{len(self.tasks) + 1}", "title": data["title"], "idempotency_key": key}
        self.tasks.append(task)
        return JSONResponse(task, status_code=201)
