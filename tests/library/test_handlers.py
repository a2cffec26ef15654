"""Handlers declare what they need in their signature: a typed payload, services by name.
A body that does not match the declared type is a dead letter ``payload_invalid`` at once;
a service nobody gives fails the inbox at start-up, naming the route."""

from __future__ import annotations

from typing import Any

import pytest

from hookinbox import ConfigError, Inbox
from hookinbox.testing import InboxTest
from tests.library import handlers
from tests.support.inbox import make_config


def _route(handler: str) -> list[dict[str, Any]]:
    return [{"events": ["*"], "action": "act", "handler": f"tests.library.handlers:{handler}"}]


def _invoice(event_id: str, **data: Any) -> dict[str, Any]:
    invoice = {"invoice_id": "in_1", "amount_cents": 1200, "customer": {"id": "c1", "email": "a@b"}}
    invoice.update(data)
    return {"id": event_id, "type": "invoice.paid", "data": invoice}


@pytest.fixture(autouse=True)
def _clear_seen() -> None:
    handlers.SEEN.clear()


async def test_a_typed_payload_is_validated_and_services_are_passed_by_name(db_url: str) -> None:
    ledger = handlers.Ledger()
    config = make_config(db_url, routes=_route("typed_invoice"))
    async with InboxTest(config, services={"ledger": ledger}, database=db_url) as box:
        await box.deliver("test", _invoice("evt_1"))
        await box.deliver("test", _invoice("evt_1"))  # the provider's retry
        jobs = await box.run_jobs()
    assert [(job.state, job.business_id) for job in jobs] == [("completed", "invoice:in_1")]
    (payload,) = handlers.SEEN
    assert isinstance(payload, handlers.Invoice)
    assert payload.data.customer.email == "a@b" and payload.data.amount_cents == 1200
    assert ledger.rows == {"invoice:in_1": 1}


async def test_a_payload_that_does_not_validate_is_dead_lettered_without_a_retry(
    db_url: str,
) -> None:
    config = make_config(db_url, routes=_route("typed_invoice"), worker={"max_attempts": 5})
    ledger = handlers.Ledger()
    async with InboxTest(config, services={"ledger": ledger}, database=db_url) as box:
        await box.deliver("test", _invoice("evt_bad", amount_cents="twelve", customer=None))
        (job,) = await box.run_jobs(wait=1.0)
        attempts = await box.store.queue.list_attempts(job.id)
    assert (job.state, job.last_error, job.attempts) == ("failed", "payload_invalid", 1)
    assert [a.outcome for a in attempts] == ["failed"]
    assert handlers.SEEN == [] and ledger.rows == {}


async def test_a_handler_may_refuse_a_payload_itself(sqlite_url: str) -> None:
    async with InboxTest(make_config(sqlite_url, routes=_route("refuses"))) as box:
        await box.deliver("test", {"id": "evt_r", "type": "x"})
        (job,) = await box.run_jobs()
    assert (job.state, job.last_error, job.attempts) == ("failed", "payload_invalid", 1)


async def test_a_sync_handler_gets_a_typeddict_payload_and_keyword_only_services(
    sqlite_url: str,
) -> None:
    ledger = handlers.Ledger()
    config = make_config(sqlite_url, routes=_route("sync_ping"))
    async with InboxTest(config, services={"ledger": ledger, "unused": object()}) as box:
        await box.deliver("test", {"id": "evt_p", "type": "ping", "extra": 1})
        (job,) = await box.run_jobs()
    assert job.state == "completed"
    assert handlers.SEEN == [{"id": "evt_p", "type": "ping"}]
    assert ledger.rows == {"ping:evt_p": 1}


async def test_an_unannotated_payload_is_the_dict_and_a_defaulted_parameter_may_stay_unset(
    sqlite_url: str,
) -> None:
    async with InboxTest(make_config(sqlite_url, routes=_route("raw_payload"))) as box:
        await box.deliver("test", {"id": "evt_a", "type": "t", "n": 1})
        await box.run_jobs()
    assert handlers.SEEN == [({"id": "evt_a", "type": "t", "n": 1}, "none")]


def test_a_service_nobody_gives_fails_at_start_up_naming_the_route(sqlite_url: str) -> None:
    config = make_config(sqlite_url, routes=_route("wants_missing"))
    with pytest.raises(ConfigError, match=r"sources\.test\.routes\.0\.handler: parameter 'mailer'"):
        Inbox(config, services={"db": object()})


async def test_the_config_can_name_a_services_factory_for_worker_processes(
    sqlite_url: str,
) -> None:
    config = make_config(
        sqlite_url,
        routes=_route("typed_invoice"),
        worker={"services": "tests.library.handlers:services"},
    )
    async with InboxTest(config) as box:
        await box.deliver("test", _invoice("evt_f"))
        (job,) = await box.run_jobs()
    assert job.state == "completed"


def test_a_services_factory_must_return_a_mapping(sqlite_url: str) -> None:
    config = make_config(
        sqlite_url,
        routes=_route("raw_payload"),
        worker={"services": "tests.library.handlers:not_a_mapping"},
    )
    with pytest.raises(ConfigError, match=r"worker\.services: the factory must return a mapping"):
        Inbox(config)


async def test_a_callable_object_declares_its_payload_on_call(sqlite_url: str) -> None:
    async with InboxTest(make_config(sqlite_url, routes=_route("callable_handler"))) as box:
        await box.deliver("test", {"id": "evt_c", "type": "ping", "more": True})
        (job,) = await box.run_jobs()
    assert job.state == "completed" and handlers.SEEN == [{"id": "evt_c", "type": "ping"}]
