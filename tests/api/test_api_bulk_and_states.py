"""The API says what the CLI says, over HTTP against the inbox under uvicorn, on both
stores: a source's one-word state, and the rule of every bulk retry (a real run needs an
explicit limit; a dry run previews up to 100 without one); a bulk retry of rejected
deliveries catches up oldest first."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from hookinbox.store import Store
from tests.api.test_api import OPERATE, READ, TOKENS, bearer
from tests.support.inbox import RunningInbox, make_config, running_inbox
from tests.support.journal import add_delivery, settle_all
from tests.support.signing import WRONG_SECRET, delivery


@pytest.fixture(autouse=True)
def _tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOOKINBOX_API_TOKENS", TOKENS)


@pytest.fixture
async def served(db_url: str) -> AsyncIterator[tuple[RunningInbox, httpx.AsyncClient]]:
    """The inbox under uvicorn, no workers (a requeued job stays queued), and a client."""
    async with (
        running_inbox(make_config(db_url), run_workers=False) as inbox,
        httpx.AsyncClient() as client,
    ):
        yield inbox, client


async def test_each_source_has_the_state_word_of_the_cli_and_the_admin(
    served: tuple[RunningInbox, httpx.AsyncClient],
) -> None:
    inbox, client = served
    api_url = f"{inbox.base_url}/api/v1"
    # A pause left in the store for a source the config no longer names.
    await inbox.store.sources.set_source_paused("gone", paused=False, reason=None, actor="t")
    listed = await client.get(f"{api_url}/sources", headers=bearer(READ))
    assert listed.status_code == 200
    states = [(s["source"], s["state"], s["paused"]) for s in listed.json()["sources"]]
    assert states == [("test", "receiving", False), ("gone", "not_configured", False)]
    paused = await client.post(
        f"{api_url}/sources/test/pause", json={"reason": "v2"}, headers=bearer(OPERATE)
    )
    assert paused.status_code == 200
    listed = await client.get(f"{api_url}/sources", headers=bearer(READ))
    assert [s["state"] for s in listed.json()["sources"]] == ["paused", "not_configured"]


async def _dead_letters(store: Store, count: int) -> list[str]:
    for n in range(count):
        await add_delivery(store, f"evt_bulk_{n}")
    return await settle_all(store, "failed", error="connect_error")


async def test_a_dead_letter_retry_of_many_needs_a_limit_and_its_preview_none(
    served: tuple[RunningInbox, httpx.AsyncClient],
) -> None:
    inbox, client = served
    url = f"{inbox.base_url}/api/v1/dead-letters/retry"
    failed = await _dead_letters(inbox.store, 3)
    for body in ({}, None):
        preview = await client.post(url, json=body, headers=bearer(READ))
        assert preview.status_code == 200, preview.text
        shown = preview.json()
        assert (shown["dry_run"], shown["matched"], shown["selected"]) == (True, 3, 3)
    unbounded = await client.post(url, json={"dry_run": False}, headers=bearer(OPERATE))
    assert (unbounded.status_code, unbounded.json()) == (400, {"error": "invalid_argument"})
    assert len(await inbox.store.queue.list_dead_letters(limit=10)) == 3
    done = await client.post(url, json={"dry_run": False, "limit": 2}, headers=bearer(OPERATE))
    assert done.status_code == 200 and done.json()["requeued"] == 2
    (left,) = await inbox.store.queue.list_dead_letters(limit=10)
    assert left.id in failed


async def test_a_rejected_retry_of_many_needs_a_limit_and_takes_the_oldest_first(
    served: tuple[RunningInbox, httpx.AsyncClient],
) -> None:
    inbox, client = served
    url = f"{inbox.base_url}/api/v1/rejected/retry"
    for n in range(3):
        body, headers = delivery(f"evt_rej_{n}", secret=WRONG_SECRET)
        refused = await client.post(inbox.url(), content=body, headers=headers)
        assert refused.status_code == 400
        await inbox.inbox.receiver.rejected.drain()
    oldest_first = [r.id for r in reversed(await inbox.store.rejected.list_rejected())]
    assert len(oldest_first) == 3
    retried = await client.post(url, json={"all": True, "limit": 2}, headers=bearer(OPERATE))
    assert retried.status_code == 200, retried.text
    report = retried.json()
    assert [r["rejected_id"] for r in report["results"]] == oldest_first[:2]
    assert report["still_refused"] == 2
    for wrong in ({"all": True}, {"ids": [oldest_first[0]], "limit": 1}):
        answer = await client.post(url, json=wrong, headers=bearer(OPERATE))
        assert (answer.status_code, answer.json()) == (400, {"error": "invalid_argument"})


#: A route with one filter, pick or cursor (or a pause's reason) given empty or blank, as
#: a client sends it when the variable it fills the parameter from was never set:
#: (method, path, query or body).
EMPTY_FILTERS: list[tuple[str, str, dict[str, object]]] = [
    *[("GET", "/deliveries", {name: ""}) for name in ("ref", "source", "type", "since")],
    *[("GET", "/deliveries", {name: ""}) for name in ("until", "where", "before")],
    ("GET", "/deliveries", {"source": " "}),
    ("GET", "/deliveries/evt_bulk_0", {"source": ""}),
    ("POST", "/deliveries/evt_bulk_0/replay", {"action": ""}),
    *[("GET", "/dead-letters", {name: ""}) for name in ("source", "action", "reason")],
    *[("GET", "/dead-letters", {name: ""}) for name in ("since", "until", "before")],
    *[
        ("POST", "/dead-letters/retry", {name: "", "dry_run": False, "limit": 10})
        for name in ("source", "action", "reason", "since", "until")
    ],
    ("POST", "/dead-letters/retry", {"source": "\u00a0", "dry_run": False, "limit": 10}),
    ("GET", "/reviews", {"tenant": ""}),
    ("GET", "/reviews", {"source": ""}),
    ("GET", "/rejected", {"source": ""}),
    ("GET", "/rejected", {"before": ""}),
    ("POST", "/rejected/retry", {"all": True, "source": "", "limit": 10}),
    ("POST", "/rejected/retry", {"ids": [""]}),
    ("GET", "/outbox", {"kind": ""}),
    *[("GET", "/resources", {name: ""}) for name in ("kind", "tenant", "state", "before")],
    ("POST", "/sources/test/catch-up", {"since": ""}),
    ("POST", "/sources/test/pause", {"reason": ""}),
]


async def test_an_empty_filter_is_a_400_never_read_as_the_filter_left_out(
    served: tuple[RunningInbox, httpx.AsyncClient],
) -> None:
    """``?source=`` would list every source's rows, and ``{"source": ""}`` retry every
    source's dead letters: the CLI refuses ``--source ''`` for the same reason. (The
    admin's forms send empty fields for "any": tests/admin/test_admin_inputs.py.)"""
    inbox, client = served
    api_url = f"{inbox.base_url}/api/v1"
    await _dead_letters(inbox.store, 2)
    for method, path, given in EMPTY_FILTERS:
        if method == "GET":
            answer = await client.get(api_url + path, params=given, headers=bearer(READ))
        else:
            answer = await client.post(api_url + path, json=given, headers=bearer(OPERATE))
        assert (answer.status_code, answer.json()) == (400, {"error": "invalid_argument"}), (
            method,
            path,
            given,
        )
    assert len(await inbox.store.queue.list_dead_letters(limit=10)) == 2
    assert await inbox.store.audit.list_operator_actions() == []
    # Left out, each is no filter at all.
    listed = {path for method, path, _ in EMPTY_FILTERS if method == "GET"}
    for path in sorted(listed - {"/deliveries/evt_bulk_0"}):
        answer = await client.get(api_url + path, headers=bearer(READ))
        assert answer.status_code == 200, (path, answer.text)
