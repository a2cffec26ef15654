"""The JSON API over both stores, as a client uses it: bearer tokens with scopes, the same
answers as the CLI and the admin (one ops function each), every write audited with the
token's name, and errors as ``{"error": code}`` with a 4xx."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette

from hookinbox.api import api_routes, parse_tokens
from hookinbox.app import Inbox, standard_operator_views
from hookinbox.errors import ConfigError
from hookinbox.store import Store
from tests.support.inbox import make_config
from tests.support.journal import add_delivery, settle_all

READ = "reader-token-0123456789abcdef-0123456789"
OPERATE = "operator-token-0123456789abcdef-0123456789"
TOKENS = f"ci:read:{READ}, oncall:operate:{OPERATE}"


def bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


@pytest.fixture
async def api(store: Store, db_url: str) -> AsyncIterator[httpx.AsyncClient]:
    config = make_config(db_url)
    app = Starlette(
        routes=api_routes(
            config, store, standard_operator_views(), {"HOOKINBOX_API_TOKENS": TOKENS}
        )
    )
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://ops/api/v1") as client:
        yield client


async def test_a_request_without_a_valid_token_is_401_and_a_read_token_cannot_write(
    api: httpx.AsyncClient, store: Store
) -> None:
    for headers in ({}, bearer("nope" * 8), {"authorization": READ}, bearer(READ + "x")):
        answer = await api.get("/deliveries", headers=headers)
        assert (answer.status_code, answer.json()) == (401, {"error": "unauthenticated"})
        assert answer.headers["www-authenticate"] == "Bearer"
    assert (await api.get("/deliveries", headers=bearer(READ))).status_code == 200
    paused = await api.post("/sources/test/pause", headers=bearer(READ))
    assert (paused.status_code, paused.json()) == (403, {"error": "forbidden"})
    assert await store.audit.list_operator_actions() == []
    # The document needs no token: it describes routes, never data.
    assert (await api.get("/openapi.json")).json()["openapi"] == "3.1.0"


async def test_the_document_names_each_schema_by_its_title_and_every_ref_resolves(
    api: httpx.AsyncClient,
) -> None:
    """Clients generate code from the schema names: a model class named apart from a
    namesake in the package still publishes its schema under its title."""
    document = (await api.get("/openapi.json")).json()
    schemas = document["components"]["schemas"]
    assert {"Source", "Sources", "SourceState", "Finding", "Reconciliation"} <= schemas.keys()
    assert [name for name, schema in schemas.items() if schema["title"] != name] == []
    refs = set(re.findall(r'"#/components/schemas/([^"]+)"', json.dumps(document)))
    assert refs and refs <= schemas.keys()


async def test_search_and_show_a_delivery_with_its_trace(
    api: httpx.AsyncClient, store: Store
) -> None:
    wanted = await add_delivery(store, "evt_1", event_type="Order.Paid", data={"c": "cus_1"})
    await add_delivery(store, "evt_2", event_type="invoice.paid", data={"c": "cus_2"})
    page = (
        await api.get(
            "/deliveries", params={"type": "order.*", "since": "24h"}, headers=bearer(READ)
        )
    ).json()
    assert page["count"] == 1 and page["deliveries"][0]["delivery_id"] == wanted
    by_field = await api.get(
        "/deliveries", params={"where": "data.c = cus_2"}, headers=bearer(READ)
    )
    assert [d["event_id"] for d in by_field.json()["deliveries"]] == ["evt_2"]

    shown = await api.get(f"/deliveries/{wanted}:count", headers=bearer(READ))
    assert shown.status_code == 200
    traced = shown.json()
    assert traced["journal"]["delivery_id"] == wanted
    assert [j["job_id"] for j in traced["jobs"]] == [f"{wanted}:count"]
    assert traced["receipts"]["count"] == 1

    missing = await api.get("/deliveries/evt_nope", headers=bearer(READ))
    assert (missing.status_code, missing.json()) == (404, {"error": "not_found"})
    bad = await api.get("/deliveries", params={"since": "last tuesday"}, headers=bearer(READ))
    assert (bad.status_code, bad.json()) == (400, {"error": "invalid_argument"})
    odd = await api.get("/deliveries", params={"limit": "0"}, headers=bearer(READ))
    assert (odd.status_code, odd.json()) == (400, {"error": "invalid_argument"})


async def test_an_event_id_two_sources_share_asks_for_the_source(
    api: httpx.AsyncClient, store: Store
) -> None:
    await add_delivery(store, "evt_shared", source="test")
    other = await add_delivery(store, "evt_shared", source="other")
    both = await api.get("/deliveries/evt_shared", headers=bearer(READ))
    assert both.status_code == 409
    assert both.json() == {"error": "ambiguous_id", "sources": ["other", "test"]}
    one = await api.get("/deliveries/evt_shared", params={"source": "other"}, headers=bearer(READ))
    assert one.json()["journal"]["delivery_id"] == other


async def test_dead_letters_listed_previewed_and_retried_with_the_audit_naming_the_token(
    api: httpx.AsyncClient, store: Store
) -> None:
    for n in range(3):
        await add_delivery(store, f"evt_{n}")
    failed = await settle_all(store, "failed", error="connect_error")
    listed = (
        await api.get("/dead-letters", params={"reason": "connect_error"}, headers=bearer(READ))
    ).json()
    assert listed["count"] == 3 and listed["dead_letters"][0]["review_deadline"]

    filters = {"source": "test", "reason": "connect_error", "since": "1h", "limit": 2}
    preview = await api.post("/dead-letters/retry", json=filters, headers=bearer(READ))
    assert preview.status_code == 200
    shown = preview.json()
    assert (shown["dry_run"], shown["matched"], shown["selected"]) == (True, 3, 2)
    assert [i["job_id"] for i in shown["items"]] == failed[:2]
    refused = await api.post(
        "/dead-letters/retry", json={**filters, "dry_run": False}, headers=bearer(READ)
    )
    assert refused.status_code == 403
    changed = await api.post(
        "/dead-letters/retry",
        json={**filters, "dry_run": False, "expect": 1},
        headers=bearer(OPERATE),
    )
    assert (changed.status_code, changed.json()) == (409, {"error": "refused"})
    done = await api.post(
        "/dead-letters/retry",
        json={**filters, "dry_run": False, "expect": 2},
        headers=bearer(OPERATE),
    )
    assert done.json()["requeued"] == 2
    one = await api.post(f"/dead-letters/{failed[2]}/retry", headers=bearer(OPERATE))
    assert one.json()["requeued"] == 1
    again = await api.post(f"/dead-letters/{failed[2]}/retry", headers=bearer(OPERATE))
    assert (again.status_code, again.json()) == (409, {"error": "refused"})
    audit = await store.audit.list_operator_actions()
    assert sorted(a.job_id or "" for a in audit) == sorted(failed)
    assert {(a.command, a.actor) for a in audit} == {("dlq-retry", "api:oncall")}


async def test_pause_resume_replay_and_reconcile(api: httpx.AsyncClient, store: Store) -> None:
    paused = await api.post(
        "/sources/test/pause", json={"reason": "contract change"}, headers=bearer(OPERATE)
    )
    assert paused.status_code == 200 and paused.json()["paused"] is True
    sources = (await api.get("/sources", headers=bearer(READ))).json()["sources"]
    assert [(s["source"], s["paused"], s["changed_by"]) for s in sources] == [
        ("test", True, "api:oncall")
    ]
    resumed = await api.post("/sources/test/resume", headers=bearer(OPERATE))
    assert resumed.json()["paused"] is False
    unknown = await api.post("/sources/nope/pause", headers=bearer(OPERATE))
    assert (unknown.status_code, unknown.json()) == (404, {"error": "unknown_source"})

    delivery_id = await add_delivery(store, "evt_r")
    await settle_all(store, "completed")
    replayed = await api.post(
        "/deliveries/evt_r/replay", json={"dry_run": True}, headers=bearer(OPERATE)
    )
    assert replayed.status_code == 200, replayed.text
    assert replayed.json()["delivery"]["delivery_id"] == delivery_id
    assert [j["outcome"] for j in replayed.json()["jobs"]] == ["would_run"]
    real = await api.post("/deliveries/evt_r/replay", headers=bearer(OPERATE))
    assert [j["outcome"] for j in real.json()["jobs"]] == ["queued"]
    actions = [(a.command, a.actor) for a in await store.audit.list_operator_actions()]
    assert ("replay", "api:oncall") in actions and ("pause", "api:oncall") in actions

    report = (await api.get("/reconcile", headers=bearer(READ))).json()
    assert "findings" in report and isinstance(report["clean"], bool)


async def test_bodies_and_routes_outside_the_contract_are_4xx_json(
    api: httpx.AsyncClient,
) -> None:
    cases: list[tuple[str, str, dict[str, Any]]] = [
        ("POST", "/dead-letters/retry", {"content": b"{not json"}),
        ("POST", "/dead-letters/retry", {"json": {"limit": 5, "surprise": 1}}),
        ("POST", "/dead-letters/retry", {"json": {"limit": 100000}}),
        ("POST", "/dead-letters/retry", {"json": {"dry_run": False}}),
        ("POST", "/dead-letters/retry", {"json": {"limit": 5, "since": "\x00"}}),
        ("POST", "/sources/test/pause", {"json": ["a"]}),
        ("GET", "/deliveries/dlv%00x", {}),
    ]
    for method, path, extra in cases:
        answer = await api.request(method, path, headers=bearer(OPERATE), **extra)
        assert (answer.status_code, answer.json()) == (400, {"error": "invalid_argument"}), path
    nowhere = await api.get("/nowhere", headers=bearer(READ))
    assert (nowhere.status_code, nowhere.json()) == (404, {"error": "not_found"})
    wrong = await api.delete("/sources", headers=bearer(READ))
    assert (wrong.status_code, wrong.json()) == (405, {"error": "method_not_allowed"})


def test_tokens_are_named_scoped_long_and_never_echoed() -> None:
    (ci, ops_token) = parse_tokens(f"ci:read:{READ}\nops:read+operate:{OPERATE}")
    assert ci.allows("read") and not ci.allows("operate")
    assert ops_token.allows("read") and ops_token.allows("operate")
    assert READ not in repr(ci)
    for bad in (
        "ci:read:short",
        "ci:read:" + "x" * 31,
        "ci:admin:" + READ,
        "c i:read:" + READ,
        f"a:read:{READ} a:read:{OPERATE}",
    ):
        with pytest.raises(ConfigError) as refused:
            parse_tokens(bad)
        assert READ not in str(refused.value) and OPERATE not in str(refused.value)


async def test_the_api_answers_on_the_operator_port_only(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOOKINBOX_API_TOKENS", TOKENS)
    inbox = Inbox(make_config(db_url, server={"admin_port": 9001}), run_workers=False)
    await inbox.start()
    try:
        transport = httpx.ASGITransport(app=inbox.app)
        async with httpx.AsyncClient(transport=transport) as client:
            public = await client.get("http://hooks:8000/api/v1/sources", headers=bearer(READ))
            operator = await client.get("http://ops:9001/api/v1/sources", headers=bearer(READ))
    finally:
        await inbox.stop()
    assert public.status_code == 404 and operator.status_code == 200


async def test_no_token_reaches_a_log_line_whatever_the_answer(
    api: httpx.AsyncClient, store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    wrong = "wrong-token-" + "9" * 20
    await add_delivery(store, "evt_log")
    await settle_all(store, "failed")
    for token in (wrong, READ, OPERATE):
        await api.post("/sources/test/pause", headers=bearer(token))
        await api.post(
            "/dead-letters/retry", json={"limit": 5, "dry_run": False}, headers=bearer(token)
        )
        await api.get("/deliveries/%00", headers=bearer(token))
    out = capsys.readouterr()
    logged = out.out + out.err
    assert "api_write" in logged and "api:oncall" in logged  # the name, as the actor
    for token in (wrong, READ, OPERATE):
        assert token not in logged
