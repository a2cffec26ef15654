"""hookinbox as a library: mounted under a prefix in the application's own Starlette app."""

from __future__ import annotations

import httpx
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Mount, Route

from hookinbox.app import Inbox
from tests.support import handlers
from tests.support.inbox import make_config, serving
from tests.support.signing import delivery
from tests.support.waiting import wait_for


async def test_an_inbox_mounted_under_a_prefix_receives_and_works(
    db_url: str, client: httpx.AsyncClient
) -> None:
    inbox = Inbox(make_config(db_url))

    async def home(request: object) -> PlainTextResponse:
        return PlainTextResponse("the application")

    app = Starlette(routes=[Route("/", home), Mount("/hooks", inbox.app)], lifespan=inbox.lifespan)
    async with serving(app) as base:
        body, headers = delivery("evt_mounted")
        answer = await client.post(f"{base}/hooks/webhooks/test", content=body, headers=headers)
        assert (answer.status_code, answer.json()["status"]) == (200, "accepted")
        assert (await client.get(f"{base}/hooks/healthz")).status_code == 200
        assert (await client.get(f"{base}/")).text == "the application"
        # Not a delivery: the prefix alone, or a deeper path, is not a source.
        assert (await client.post(f"{base}/webhooks/test", content=body)).status_code == 404
        assert (await client.post(f"{base}/hooks/webhooks/a/b", content=body)).status_code == 404

        async def handled() -> bool:
            return handlers.CALLS["evt_mounted"] == 1

        await wait_for(handled, 10, "the mounted inbox's worker to run the handler")
