"""One catch-up run against local stand-ins of the providers' APIs, through their SDKs
(Stripe's, Svix's) or httpx (GitHub), on both stores: pagination, rate limits, an outage
in the middle, events already received, events never received."""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import orjson
import pytest

from hookinbox.app import build_receiver, build_sealer, default_metrics
from hookinbox.catch_up import CatchUpReport, run_catch_up
from hookinbox.config import Config, config_from_mapping
from hookinbox.errors import CatchUpNotConfigured, ConfigError
from hookinbox.metrics import Metrics
from hookinbox.receive.receiver import Receiver
from hookinbox.store import Store, open_store_for
from tests.support.database import raw_payload_body
from tests.support.processes import free_port
from tests.support.provider_standins import (
    NORMAL,
    GitHubDelivery,
    GitHubStandIn,
    StripeStandIn,
    SvixStandIn,
)
from tests.support.signing import SECRET, SECRET_ENV

ROUTE = [{"events": ["*"], "action": "count", "handler": "tests.support.handlers:count"}]
#: Nothing listens here: a send to it fails as a refused connection.
DEAD_URL = f"http://127.0.0.1:{free_port()}/webhooks/down"


@pytest.fixture
def stripe_api(monkeypatch: pytest.MonkeyPatch) -> Iterator[StripeStandIn]:
    with StripeStandIn() as api:
        monkeypatch.setenv("HB_STRIPE_KEY", api.api_key)
        yield api


@pytest.fixture
def github_api(monkeypatch: pytest.MonkeyPatch) -> Iterator[GitHubStandIn]:
    with GitHubStandIn() as api:
        monkeypatch.setenv("HB_GITHUB_KEY", api.api_key)
        yield api


def make_config(db_url: str, **sources: dict[str, Any]) -> Config:
    data: dict[str, Any] = {"database": db_url, "sources": {}}
    for name, catch_up in sources.items():
        scheme = {"stripe": "stripe", "github": "github"}.get(name, "standard-webhooks")
        data["sources"][name] = {
            "scheme": scheme,
            "secret_env": SECRET_ENV,
            "routes": ROUTE,
            "catch_up": catch_up,
        }
    return config_from_mapping(data)


class Waits:
    """The sleeps a run asked for (none is slept: the test's clock is the waits list)."""

    def __init__(self) -> None:
        self.seconds: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.seconds.append(seconds)


@pytest.fixture
async def waits() -> AsyncIterator[Waits]:
    yield Waits()


class Runs:
    def __init__(self, config: Config, store: Store, waits: Waits) -> None:
        self.config = config
        self.store = store
        self.metrics: Metrics = default_metrics(config)
        self.receiver: Receiver = build_receiver(config, store, metrics=self.metrics)
        self.waits = waits

    async def run(self, source: str, **kw: Any) -> CatchUpReport:
        return await run_catch_up(
            self.config, self.store, self.receiver, self.metrics, source, sleep=self.waits, **kw
        )


async def _received_stripe(receiver: Receiver, body: bytes) -> None:
    stamp = int(time.time())
    signature = hmac.new(SECRET.encode(), f"{stamp}.".encode() + body, hashlib.sha256).hexdigest()
    receipt = await receiver.receive(
        "stripe", body, {"stripe-signature": f"t={stamp},v1={signature}"}
    )
    assert receipt.status == "accepted"


async def _jobs_by_event(store: Store) -> dict[str, int]:
    found: dict[str, int] = {}
    for delivery in await store.journal.list_deliveries(limit=1000):
        full = await store.journal.get_delivery(delivery.id)
        assert full is not None
        found[delivery.event_id] = found.get(delivery.event_id, 0) + len(full.jobs)
    return found


def _metric(metrics: Metrics, source: str, result: str) -> float:
    value = metrics.registry.get_sample_value(
        "hookinbox_catch_up_events_total", {"source": source, "result": result}
    )
    return value or 0.0


async def test_stripe_pages_by_has_more_and_reserves_only_the_events_never_received(
    store: Store, stripe_api: StripeStandIn, waits: Waits
) -> None:
    config = make_config(
        store.url,
        stripe={"api_key_env": "HB_STRIPE_KEY", "api_base": stripe_api.url, "page_size": 5},
    )
    runs = Runs(config, store, waits)
    events = stripe_api.add(12)
    # Four reached hookinbox but Stripe never saw the answer (a timeout): still listed.
    for event in events[:4]:
        await _received_stripe(runs.receiver, event.body())

    report = await runs.run("stripe")

    assert (report.pulled, report.already_had, report.new, report.pages) == (12, 4, 8, 3)
    assert report.complete and report.failure is None
    lists = [q for method, path, q in stripe_api.requests if path == "/v1/events"]
    assert [("starting_after" in q) for q in lists] == [False, True, True]
    assert all(q["delivery_success"] == "false" and "created[gte]" in q for q in lists)
    jobs = await _jobs_by_event(store)
    assert jobs == {e.id: 1 for e in events}  # every event once, nothing queued twice
    for event in events:
        found = await store.journal.get_delivery(event.id, "stripe")
        assert found is not None
        assert found.origin == ("webhook" if event in events[:4] else "catch_up")
        assert found.delivery_count == 1  # an API listing is not a second delivery
    assert _metric(runs.metrics, "stripe", "new") == 8
    assert _metric(runs.metrics, "stripe", "already_had") == 4
    cursor = await store.catch_up.get("stripe")
    assert cursor is not None and cursor.position == max(e.created for e in events)
    assert cursor.resume_after is None

    again = await runs.run("stripe")
    assert again.new == 0 and again.complete
    assert await _jobs_by_event(store) == jobs


async def test_a_429_is_waited_out_by_its_retry_after_and_the_run_goes_on(
    store: Store, stripe_api: StripeStandIn, waits: Waits
) -> None:
    config = make_config(
        store.url, stripe={"api_key_env": "HB_STRIPE_KEY", "api_base": stripe_api.url}
    )
    stripe_api.add(3)
    stripe_api.script("list", (429, {"retry-after": "2"}, {"error": {"type": "rate_limit"}}))

    report = await Runs(config, store, waits).run("stripe")

    assert report.new == 3 and report.complete
    assert 2.0 in waits.seconds and report.waited_seconds == 2.0


async def test_a_rate_limit_asking_longer_than_max_wait_ends_the_run_with_its_code(
    store: Store, stripe_api: StripeStandIn, waits: Waits
) -> None:
    config = make_config(
        store.url,
        stripe={"api_key_env": "HB_STRIPE_KEY", "api_base": stripe_api.url, "max_wait": "30s"},
    )
    stripe_api.add(3)
    stripe_api.script("list", (429, {"retry-after": "600"}, {"error": {"type": "rate_limit"}}))

    report = await Runs(config, store, waits).run("stripe")

    assert report.failure is not None and report.failure.code == "catch_up_rate_limited"
    assert report.new == 0 and 600.0 not in waits.seconds
    assert (await store.count_rows())["deliveries"] == 0


async def test_an_outage_on_page_two_keeps_the_cursor_at_page_one_and_the_next_run_resumes(
    store: Store, stripe_api: StripeStandIn, waits: Waits
) -> None:
    config = make_config(
        store.url,
        stripe={"api_key_env": "HB_STRIPE_KEY", "api_base": stripe_api.url, "page_size": 5},
    )
    runs = Runs(config, store, waits)
    events = stripe_api.add(12)
    stripe_api.script("list", NORMAL, (500, {}, {"error": {"type": "api_error"}}))

    first = await runs.run("stripe")

    assert first.failure is not None and first.failure.code == "catch_up_failed"
    assert first.new == 5 and not first.complete and first.stopped == "catch_up_failed"
    cursor = await store.catch_up.get("stripe")
    newest_first = sorted(events, key=lambda e: e.created, reverse=True)
    assert cursor is not None and cursor.resume_after == newest_first[4].id
    assert cursor.resume_ceiling == newest_first[0].created

    second = await runs.run("stripe")

    assert second.complete and second.new == 7
    resumed = [q for _, path, q in stripe_api.requests if path == "/v1/events"][-2]
    assert resumed["starting_after"] == newest_first[4].id
    assert await _jobs_by_event(store) == {e.id: 1 for e in events}
    cursor = await store.catch_up.get("stripe")
    assert cursor is not None and cursor.position == newest_first[0].created
    assert cursor.resume_after is None


async def test_a_refused_key_is_catch_up_unauthorized_and_moves_nothing(
    store: Store, stripe_api: StripeStandIn, waits: Waits, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HB_STRIPE_KEY", "sk_test_somebody_else")
    config = make_config(
        store.url, stripe={"api_key_env": "HB_STRIPE_KEY", "api_base": stripe_api.url}
    )
    stripe_api.add(2)

    report = await Runs(config, store, waits).run("stripe")

    assert report.failure is not None and report.failure.code == "catch_up_unauthorized"
    assert "sk_test" not in report.failure.message
    assert await store.catch_up.get("stripe") is None


async def test_an_unset_key_or_a_source_without_catch_up_is_refused_before_any_request(
    store: Store, stripe_api: StripeStandIn, waits: Waits, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HB_STRIPE_KEY")
    config = make_config(
        store.url, stripe={"api_key_env": "HB_STRIPE_KEY", "api_base": stripe_api.url}
    )
    with pytest.raises(ConfigError, match="HB_STRIPE_KEY is not set"):
        await Runs(config, store, waits).run("stripe")
    plain = config_from_mapping(
        {
            "database": store.url,
            "sources": {"plain": {"scheme": "stripe", "secret_env": SECRET_ENV}},
        }
    )
    with pytest.raises(CatchUpNotConfigured):
        await Runs(plain, store, waits).run("plain")
    assert stripe_api.requests == []


async def test_a_dry_run_compares_with_the_journal_and_reserves_nothing(
    store: Store, stripe_api: StripeStandIn, waits: Waits
) -> None:
    config = make_config(
        store.url, stripe={"api_key_env": "HB_STRIPE_KEY", "api_base": stripe_api.url}
    )
    runs = Runs(config, store, waits)
    events = stripe_api.add(5)
    await _received_stripe(runs.receiver, events[0].body())

    report = await runs.run("stripe", dry_run=True)

    assert (report.pulled, report.already_had, report.new) == (5, 1, 4)
    assert (await store.count_rows())["deliveries"] == 1
    assert await store.catch_up.get("stripe") is None


def _github_delivered(api: GitHubStandIn, events: list[Any]) -> list[GitHubDelivery]:
    """Deliveries GitHub logged as answered 200 (hookinbox received them)."""
    made = []
    for event in events:
        api._next_id += 1
        made.append(GitHubDelivery(api._next_id, event, time.time(), 200))
    api.deliveries += made
    return made


async def _received_github(receiver: Receiver, event: Any) -> None:
    body = orjson.dumps(event.payload)
    headers = {
        "x-hub-signature-256": "sha256="
        + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest(),
        "x-github-delivery": event.guid,
        "x-github-event": event.event,
    }
    assert (await receiver.receive("github", body, headers)).status == "accepted"


async def test_github_injects_failed_deliveries_through_link_pages_and_rate_limit_headers(
    store: Store, github_api: GitHubStandIn, waits: Waits
) -> None:
    config = make_config(
        store.url,
        github={
            "api_key_env": "HB_GITHUB_KEY",
            "api_base": github_api.url,
            "hook": "repos/acme/shop/hooks/1",
            "page_size": 4,
        },
    )
    runs = Runs(config, store, waits)
    delivered = github_api.add(4)
    _github_delivered(github_api, delivered)
    for event in delivered:
        await _received_github(runs.receiver, event)
    lost = github_api.add(6)
    github_api.send(DEAD_URL, SECRET, lost)  # the receiver was down: failed to connect
    reset = int(time.time()) + 4
    github_api.script(
        "list",
        (403, {"retry-after": "3"}, {"message": "secondary rate limit"}),
        NORMAL,
        (403, {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(reset)}, {"message": "x"}),
    )

    report = await runs.run("github")

    assert report.complete and report.failure is None
    assert (report.pulled, report.new, report.delivered, report.pages) == (6, 6, 4, 3)
    assert 3.0 in waits.seconds  # the secondary limit's retry-after
    assert any(2.0 <= w <= 5.0 for w in waits.seconds if w != 3.0)  # until x-ratelimit-reset
    assert await _jobs_by_event(store) == {e.guid: 1 for e in [*delivered, *lost]}
    for event in lost:
        found = await store.journal.get_delivery(event.guid, "github")
        assert found is not None and found.origin == "catch_up" and found.event_type == "issues"
        stored = await store.journal.read_stored(found.id)
        assert stored is not None
        body, headers = stored
        assert orjson.loads(body) == event.payload
        assert "x-hub-signature-256" not in headers  # it signed other bytes
    # Nothing is fetched for a delivered event.
    shown = {path for method, path, _ in github_api.requests if path.rsplit("/", 1)[-1].isdigit()}
    assert len(shown) == 6


async def test_github_redeliver_mode_asks_github_once_for_each_failed_event(
    store: Store, github_api: GitHubStandIn, waits: Waits
) -> None:
    config = make_config(
        store.url,
        github={
            "api_key_env": "HB_GITHUB_KEY",
            "api_base": github_api.url,
            "hook": "repos/acme/shop/hooks/1",
            "github_mode": "redeliver",
        },
    )
    _github_delivered(github_api, github_api.add(2))
    lost = github_api.add(3)
    github_api.send(DEAD_URL, SECRET, lost)

    report = await Runs(config, store, waits).run("github")

    assert (report.requested, report.new, report.delivered) == (3, 0, 2)
    attempts = [path for method, path, _ in github_api.requests if method == "POST"]
    failed_ids = {d.id for d in github_api.deliveries if d.event in lost and not d.redelivery}
    assert sorted(attempts) == sorted(
        f"{GitHubStandIn.HOOK}/deliveries/{i}/attempts" for i in failed_ids
    )


async def test_svix_recover_is_asked_from_the_cursor(
    store: Store, waits: Waits, monkeypatch: pytest.MonkeyPatch
) -> None:
    with SvixStandIn() as api:
        monkeypatch.setenv("HB_SVIX_KEY", api.api_key)
        config = make_config(
            store.url,
            billing={
                "api_key_env": "HB_SVIX_KEY",
                "api_base": api.url,
                "app_id": "app_1",
                "endpoint_id": "ep_1",
                "window": "1h",
            },
        )
        runs = Runs(config, store, waits)
        started = time.time()

        report = await runs.run("billing")

        assert report.requested == 1 and report.complete and report.provider == "svix"
        assert len(api.recovered_since) == 1
        cursor = await store.catch_up.get("billing")
        assert cursor is not None and cursor.position is not None
        assert abs(cursor.position - (started - 3600)) < 5
        api.script("recover", (401, {}, {"code": "authentication", "detail": "no"}))
        refused = await runs.run("billing")
        assert refused.failure is not None and refused.failure.code == "catch_up_unauthorized"


async def test_a_github_outage_mid_run_resumes_from_the_link_cursor_without_a_second_fetch(
    store: Store, github_api: GitHubStandIn, waits: Waits
) -> None:
    config = make_config(
        store.url,
        github={
            "api_key_env": "HB_GITHUB_KEY",
            "api_base": github_api.url,
            "hook": "repos/acme/shop/hooks/1",
            "page_size": 3,
        },
    )
    runs = Runs(config, store, waits)
    lost = github_api.add(7)
    github_api.send(DEAD_URL, SECRET, lost)
    github_api.script("list", NORMAL, (502, {}, {"message": "Server Error"}))

    first = await runs.run("github")

    assert first.failure is not None and first.failure.code == "catch_up_failed"
    assert first.new == 3
    cursor = await store.catch_up.get("github")
    assert cursor is not None and cursor.resume_after is not None

    second = await runs.run("github")

    assert second.complete and second.new == 4
    assert await _jobs_by_event(store) == {e.guid: 1 for e in lost}
    fetched = [path for method, path, _ in github_api.requests if path.rsplit("/", 1)[-1].isdigit()]
    assert len(fetched) == len(set(fetched)) == 7  # no payload fetched twice


async def test_a_pulled_event_is_stored_sealed_and_redacted_like_a_webhook(
    db_url: str, stripe_api: StripeStandIn, waits: Waits, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Catch-up reserves through the receiver's step and the store's commit: a source's
    redaction and encryption hold for what it pulls, not only for what it is sent."""
    monkeypatch.setenv("HOOKINBOX_ENCRYPTION_KEYS", "k1:" + base64.b64encode(b"k" * 32).decode())
    config = config_from_mapping(
        {
            "database": db_url,
            "encryption": {"enabled": True},
            "sources": {
                "stripe": {
                    "scheme": "stripe",
                    "secret_env": SECRET_ENV,
                    "routes": ROUTE,
                    "redact": ["/data/object/id"],
                    "catch_up": {"api_key_env": "HB_STRIPE_KEY", "api_base": stripe_api.url},
                }
            },
        }
    )
    store = open_store_for(db_url, sealer=build_sealer(config))
    await store.open()
    try:
        (event,) = stripe_api.add(1)
        report = await Runs(config, store, waits).run("stripe")
        assert report.new == 1
        found = await store.journal.get_delivery(event.id, "stripe")
        assert found is not None and found.origin == "catch_up"
        raw = await raw_payload_body(db_url, found.id)
        assert raw.startswith(b"\x00hbx")  # sealed at rest
        opened = await store.journal.read_payload(found.id)
        assert opened is not None
        assert orjson.loads(opened)["data"]["object"]["id"] == "[redacted]"
        assert event.data["id"].encode() not in raw
    finally:
        await store.close()
