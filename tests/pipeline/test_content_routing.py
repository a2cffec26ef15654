"""Content routing through the real receiver, on both stores: a route's filter decides, at
reserve time, whether its job exists; trace says which route took or skipped the event."""

from __future__ import annotations

import json

import httpx

from hookinbox import ops
from hookinbox.app import standard_operator_views
from tests.support import handlers
from tests.support.inbox import make_config, running_inbox
from tests.support.signing import signed
from tests.support.waiting import wait_for_status

ROUTES = [
    {
        "events": ["invoice.*"],
        "action": "live",
        "handler": "tests.support.handlers:count",
        "filter": [{"pointer": "/livemode", "equals": True}],
    },
    {
        "events": ["invoice.*"],
        "action": "connect",
        "handler": "tests.support.handlers:record",
        "filter": [
            {"pointer": "/account", "in": ["acct_1", "acct_2"]},
            {"header": "content-type", "glob": "application/json*"},
        ],
    },
    {"events": ["*"], "action": "all", "handler": "tests.support.handlers:count"},
]

VIEWS = standard_operator_views()


def event(event_id: str, **fields: object) -> bytes:
    return json.dumps({"id": event_id, "type": "invoice.paid", **fields}).encode()


async def test_filters_decide_which_jobs_a_delivery_gets_and_trace_says_why(
    db_url: str, client: httpx.AsyncClient
) -> None:
    config = make_config(db_url, routes=ROUTES)
    cases = {
        "evt_live_connect": event("evt_live_connect", livemode=True, account="acct_2"),
        "evt_test_mode": event("evt_test_mode", livemode=False, account="acct_9"),
        "evt_one_is_not_true": event("evt_one_is_not_true", livemode=1),
    }
    async with running_inbox(config) as inbox:
        for event_id, body in cases.items():
            sent_body, headers = signed(body, event_id=event_id)
            answer = await client.post(inbox.url(), content=sent_body, headers=headers)
            assert answer.json()["status"] == "accepted"
            await wait_for_status(inbox.store, event_id, "completed")
        jobs = {
            event_id: sorted(
                j.action for j in (await inbox.store.journal.get_delivery(event_id)).jobs
            )  # type: ignore[union-attr]
            for event_id in cases
        }
        assert jobs == {
            "evt_live_connect": ["all", "connect", "live"],
            "evt_test_mode": ["all"],
            "evt_one_is_not_true": ["all"],
        }
        report = await ops.trace(inbox.store, config, "evt_test_mode", layers=VIEWS.trace_layers)
        routes = report.as_json()["deliveries"][0]["routes"]
    assert routes == [
        {
            "action": "live",
            "events_match": True,
            "filter": "failed: /livemode equals True",
            "job": False,
        },
        {
            "action": "connect",
            "events_match": True,
            "filter": "failed: /account in ['acct_1', 'acct_2']",
            "job": False,
        },
        {"action": "all", "events_match": True, "filter": "no filter", "job": True},
    ]
    assert handlers.PAYLOADS["evt_live_connect"]["account"] == "acct_2"
