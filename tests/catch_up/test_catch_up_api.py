"""``POST /api/v1/sources/{name}/catch-up`` over HTTP, on both stores: a dry run with the
read scope, a real run with operate only, the provider's refusal as its code, and the
counts in ``/metrics``; and the scheduled mode beside the workers."""

from __future__ import annotations

import httpx
import pytest

from hookinbox.config import config_from_mapping
from tests.api.test_api import OPERATE, READ, TOKENS, bearer
from tests.support import handlers
from tests.support.inbox import running_inbox
from tests.support.provider_standins import StripeStandIn
from tests.support.signing import SECRET_ENV
from tests.support.waiting import wait_for


@pytest.fixture(autouse=True)
def _tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOOKINBOX_API_TOKENS", TOKENS)


async def test_the_api_runs_catch_up_for_a_source_and_reports_its_counts(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with StripeStandIn() as stripe_api:
        monkeypatch.setenv("HB_STRIPE_KEY", stripe_api.api_key)
        route = {"events": ["*"], "action": "count", "handler": "tests.support.handlers:count"}
        config = config_from_mapping(
            {
                "database": db_url,
                "sources": {
                    "stripe": {
                        "scheme": "stripe",
                        "secret_env": SECRET_ENV,
                        "routes": [route],
                        "catch_up": {"api_key_env": "HB_STRIPE_KEY", "api_base": stripe_api.url},
                    },
                    "plain": {"scheme": "standard-webhooks", "secret_env": SECRET_ENV},
                },
            }
        )
        events = stripe_api.add(3)
        async with (
            running_inbox(config, run_workers=False) as inbox,
            httpx.AsyncClient(timeout=30) as client,
        ):
            url = f"{inbox.base_url}/api/v1/sources/stripe/catch-up"
            preview = await client.post(url, headers=bearer(READ))
            assert preview.status_code == 200
            assert (preview.json()["dry_run"], preview.json()["new"]) == (True, 3)
            refused = await client.post(url, json={"dry_run": False}, headers=bearer(READ))
            assert (refused.status_code, refused.json()) == (403, {"error": "forbidden"})

            ran = await client.post(url, json={"dry_run": False}, headers=bearer(OPERATE))

            assert ran.status_code == 200
            report = ran.json()
            assert (report["pulled"], report["new"], report["complete"]) == (3, 3, True)
            found = await inbox.store.journal.get_delivery(events[0].id, "stripe")
            assert found is not None and found.origin == "catch_up"
            shown = await client.get(
                f"{inbox.base_url}/api/v1/deliveries/{events[0].id}", headers=bearer(READ)
            )
            assert shown.json()["journal"]["origin"] == "catch_up"
            metrics = (await client.get(f"{inbox.base_url}/metrics")).text
            assert 'hookinbox_catch_up_events_total{result="new",source="stripe"} 3.0' in metrics

            none = await client.post(
                f"{inbox.base_url}/api/v1/sources/plain/catch-up", headers=bearer(OPERATE)
            )
            assert (none.status_code, none.json()) == (409, {"error": "catch_up_not_configured"})
            monkeypatch.setenv("HB_STRIPE_KEY", "sk_test_not_this_one")
            failed = await client.post(url, json={"dry_run": False}, headers=bearer(OPERATE))
            assert (failed.status_code, failed.json()) == (502, {"error": "catch_up_unauthorized"})


async def test_the_workers_run_catch_up_every_so_often_when_the_source_says_so(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with StripeStandIn() as stripe_api:
        monkeypatch.setenv("HB_STRIPE_KEY", stripe_api.api_key)
        route = {"events": ["*"], "action": "count", "handler": "tests.support.handlers:count"}
        catch_up = {"api_key_env": "HB_STRIPE_KEY", "api_base": stripe_api.url, "every": "10s"}
        config = config_from_mapping(
            {
                "database": db_url,
                "worker": {"poll_interval_seconds": 0.2},
                "sources": {
                    "stripe": {
                        "scheme": "stripe",
                        "secret_env": SECRET_ENV,
                        "routes": [route],
                        "catch_up": catch_up,
                    }
                },
            }
        )
        events = stripe_api.add(3)
        async with running_inbox(config) as inbox:

            async def handled() -> bool:
                return all(handlers.CALLS[e.id] == 1 for e in events)

            await wait_for(handled, 20, "the scheduled catch-up's events handled")
            found = await inbox.store.journal.get_delivery(events[2].id, "stripe")
            assert found is not None and found.origin == "catch_up"
        assert stripe_api.requests  # asked by the schedule, not by the test
