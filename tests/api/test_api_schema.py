"""The served OpenAPI document, fuzzed in process through ASGI by schemathesis on both
stores: no answer is a 5xx and every answer matches the document (status, content type,
body schema; a request without a token is refused). Examples are bounded so the whole
run stays well under a minute."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.python.asgi import shutdown_lifespans

from hookinbox.api.routes import ROUTES
from hookinbox.app import Inbox
from hookinbox.store import open_store_for
from tests.api.test_api import OPERATE, TOKENS, bearer
from tests.support.inbox import make_config
from tests.support.journal import add_delivery, settle_all

#: Auth is the scenario tests' (test_api.py): schemathesis's probe without credentials
#: keeps an explicit header. And a string the document allows may still be refused with a
#: 400 for what a schema cannot say (a time that does not parse, an unknown source).
EXCLUDED = [schemathesis.checks.ignored_auth, schemathesis.checks.positive_data_acceptance]
#: Examples per operation, mode and store (every route of ROUTES, 2 modes, 2 stores).
EXAMPLES = 10


async def _seed(db_url: str) -> None:
    store = open_store_for(db_url)
    await store.open()
    try:
        for n in range(3):
            await add_delivery(store, f"evt_{n}", event_type="order.paid", data={"c": f"cus_{n}"})
        await add_delivery(store, "evt_0", source="other")
        await settle_all(store, "failed", error="connect_error")
    finally:
        await store.close()


def test_every_answer_matches_the_document_and_none_is_a_5xx(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    asyncio.run(_seed(db_url))
    monkeypatch.setenv("HOOKINBOX_API_TOKENS", TOKENS)
    inbox = Inbox(make_config(db_url), run_workers=False)
    try:
        schema = schemathesis.openapi.from_asgi("/api/v1/openapi.json", inbox.app)
        operations = [result.ok() for result in schema.get_all_operations()]
        assert len(operations) == len(ROUTES)  # every route is in the document
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            for operation in operations:

                @given(case=operation.as_strategy(generation_mode=mode))
                @settings(
                    max_examples=EXAMPLES,
                    deadline=None,
                    derandomize=True,
                    database=None,
                    suppress_health_check=list(HealthCheck),
                )
                def answers_as_documented(case: Any) -> None:
                    case.call_and_validate(headers=bearer(OPERATE), excluded_checks=EXCLUDED)

                answers_as_documented()
    finally:  # the inbox's lifespan, started by schemathesis's first request (the document)
        shutdown_lifespans()
