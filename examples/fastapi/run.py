"""The FastAPI example, driven over HTTP: the host app's lifespan runs the inbox, a Stripe
``invoice.paid`` marks an order paid once in the host's database (asked for by name),
and a body that does not match the handler's payload type is a dead letter at once.

    python examples/fastapi/run.py
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import socket
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import uvicorn

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

#: A demo secret for this example only; a real deployment sets its own.
DEMO_SECRET = "whsec_fastapi_example_demo"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.asynccontextmanager
async def serving(app: Any) -> AsyncIterator[str]:
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    task = asyncio.create_task(server.serve())
    async with asyncio.timeout(15):
        while not server.started:
            if task.done():
                task.result()
            await asyncio.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        async with asyncio.timeout(20):
            await task


def invoice_paid(event_id: str, invoice: dict[str, Any]) -> dict[str, Any]:
    return {"id": event_id, "object": "event", "type": "invoice.paid", "data": {"object": invoice}}


async def main(database: str | None = None, say: Callable[[str], None] = print) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="fastapi-example-") as tmp:
        os.environ.setdefault("STRIPE_WEBHOOK_SECRET", DEMO_SECRET)
        os.environ["EXAMPLE_DATABASE"] = database or f"sqlite:///{Path(tmp) / 'hookinbox.db'}"
        os.environ["SHOP_DB"] = str(Path(tmp) / "shop.db")
        import app as shop  # the FastAPI app, built from the environment set above

        from hookinbox.testing import signed_request

        source = shop.inbox.config.sources["stripe"]
        async with serving(shop.app) as base, httpx.AsyncClient(base_url=base) as client:

            async def post(event: dict[str, Any]) -> str:
                request = signed_request(source, event)
                answer = await client.post(
                    "/hooks/webhooks/stripe", content=request.body, headers=request.headers
                )
                return str(answer.json().get("status") or answer.json())

            paid = invoice_paid(
                "evt_paid_1", {"id": "in_1", "customer": "cus_7", "amount_paid": 4200}
            )
            answers = [await post(paid), await post(paid)]
            say(f"invoice.paid evt_paid_1, delivered twice: {', '.join(answers)}")
            broken = invoice_paid("evt_broken", {"id": "in_2", "amount_paid": "lots"})
            say(f"invoice.paid evt_broken (no customer, amount not a number): {await post(broken)}")

            async def settled() -> list[Any]:
                jobs = []
                for event_id in ("evt_paid_1", "evt_broken"):
                    found = await shop.inbox.store.journal.get_delivery(event_id)
                    if found is None or found.jobs[0].state not in ("completed", "failed"):
                        return []
                    jobs.append(found.jobs[0])
                return jobs

            deadline = time.monotonic() + 20
            while not (jobs := await settled()):
                if time.monotonic() > deadline:
                    raise TimeoutError("the jobs did not settle")
                await asyncio.sleep(0.05)
            orders = (await client.get("/orders")).json()
            health = (await client.get("/hooks/healthz")).status_code
        paid_job, broken_job = jobs
        say(f"  evt_paid_1: job {paid_job.state}, business id {paid_job.business_id}")
        say(
            f"  evt_broken: job {broken_job.state} ({broken_job.last_error}) after "
            f"{broken_job.attempts} attempt: a dead letter, not retried"
        )
        say(f"GET /orders (the host's own route): {json.dumps(orders)}")
        say(f"GET /hooks/healthz: {health}")
    return {
        "answers": answers,
        "paid": [paid_job.state, paid_job.business_id],
        "broken": [broken_job.state, broken_job.last_error, broken_job.attempts],
        "orders": orders,
        "health": health,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database", help="store URL (default: a temporary SQLite file)")
    parser.add_argument("--summary", help="also write what happened as JSON to this file")
    parser.add_argument("--verbose", action="store_true", help="show hookinbox's own log lines")
    args = parser.parse_args()
    from hookinbox.logs import configure_logging

    configure_logging("console", "info" if args.verbose else "error")
    summary = asyncio.run(main(args.database))
    if args.summary:
        Path(args.summary).write_text(json.dumps(summary, indent=2))
