"""A store handed a sealer, on both stores: per-source sealing, rows written before it
still read, a payload search that gives the same answers in Python as in SQL, a sealed
rejected delivery retried through the normal path, and a rotation that leaves a row
changed meanwhile alone."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from hookinbox import ops
from hookinbox.app import build_receiver
from hookinbox.receive.rejected_retry import retry_rejected_many
from hookinbox.sealing import MAGIC, Sealer
from hookinbox.store import Store, open_store_for
from tests.support.inbox import make_config, running_inbox
from tests.support.journal import add_delivery, settle_all
from tests.support.signing import SECRET, SECRET_ENV, WRONG_SECRET, delivery
from tests.support.waiting import wait_for_status

KEY1 = b"1" * 32
KEY2 = b"2" * 32
RING = f"k1:{base64.b64encode(KEY1).decode()}"


@pytest.fixture
async def sealed(db_url: str) -> AsyncIterator[Store]:
    """The same database, through a store that seals source ``test`` (not ``other``)."""
    opened = open_store_for(db_url, sealer=Sealer([("k1", KEY1)], {"test"}))
    await opened.open()
    try:
        yield opened
    finally:
        await opened.close()


async def test_only_the_sealed_sources_rows_are_sealed_and_older_rows_still_read(
    store: Store, sealed: Store
) -> None:
    before = await add_delivery(store, "evt_before", data={"n": 1})  # written in the clear
    mine = await add_delivery(sealed, "evt_mine", data={"n": 2})
    theirs = await add_delivery(sealed, "evt_theirs", source="other", data={"n": 3})
    raw = {d: await store.journal.read_payload(d) for d in (before, theirs)}
    assert all(body is not None and not body.startswith(MAGIC) for body in raw.values())
    with pytest.raises(Exception, match="not in the encryption key ring"):
        await store.journal.read_payload(mine)  # a store without the ring cannot open it
    for delivery_id, n in ((before, 1), (mine, 2), (theirs, 3)):
        body = await sealed.journal.read_payload(delivery_id)
        assert body is not None and f'"n": {n}'.encode() in body
    (counts,) = await sealed.sealed_rows.count_by_key()
    assert (counts.table, counts.key_id, counts.rows) == ("payloads", "k1", 1)


async def test_a_payload_search_in_python_answers_as_the_sql_one(
    store: Store, sealed: Store, db_url: str
) -> None:
    """The same rows searched by SQL (a store without a key ring) and by the walk that
    opens each body (a store with one), for strings, numbers, booleans and null. (7 and
    7.0 are left out: PostgreSQL's jsonb, and the walk, take them as one number; SQLite's
    SQL compares their JSON text.)"""
    config = make_config(db_url)
    values: list[object] = ["cus_1", "cus_12", 7, 0, 1, True, False, None, "true", "7"]
    for n, value in enumerate(values):
        await add_delivery(store, f"evt_{n}", data={"object": {"v": value}})
    await add_delivery(store, "evt_list", data={"object": [{"v": "cus_1"}]})
    await add_delivery(store, "evt_form", body=b"data.object.v=cus_1")
    await add_delivery(store, "evt_deep", data={"object": {"v": {"w": 1}}})
    for text in (
        "cus_1",
        '"cus_1"',
        "7",
        "0",
        "1",
        "true",
        "false",
        "null",
        '"true"',
        '"7"',
    ):
        query = ops.DeliveryQuery(payload=f"data.object.v = {text}")
        by_sql = await ops.search_deliveries(store, config, query)
        by_walk = await ops.search_deliveries(sealed, config, query)
        assert [d.id for d in by_walk.deliveries] == [d.id for d in by_sql.deliveries], text
        assert by_walk.count == by_sql.count, text
    # Pages and counts of the walk: newest first, keyset pages, every match counted.
    for n in range(5):
        await add_delivery(sealed, f"evt_page_{n}", data={"object": {"v": "paged"}})
    first = await ops.search_deliveries(
        sealed, config, ops.DeliveryQuery(payload="data.object.v = paged", limit=2)
    )
    assert first.count == 5 and len(first.deliveries) == 2 and first.next_before is not None
    rest = await ops.search_deliveries(
        sealed,
        config,
        ops.DeliveryQuery(payload="data.object.v = paged", limit=5, before=first.next_before),
    )
    assert len(rest.deliveries) == 3 and rest.count == 5
    seen = [d.event_id for d in (*first.deliveries, *rest.deliveries)]
    assert seen == [f"evt_page_{n}" for n in range(4, -1, -1)]


async def test_a_sealed_rejected_delivery_is_verified_again_on_its_original_bytes(
    db_url: str, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOOKINBOX_ENCRYPTION_KEYS", RING)
    body, headers = delivery("evt_rejected_sealed", secret=WRONG_SECRET)
    config = make_config(
        db_url,
        routes=[{"events": ["*"], "action": "count", "handler": "tests.support.handlers:count"}],
        encryption={"enabled": True},
    )
    async with running_inbox(config) as inbox:
        refused = await client.post(inbox.url(), content=body, headers=headers)
        assert refused.json() == {"error": "invalid_signature"}
        await inbox.inbox.receiver.rejected.drain()
        (kept,) = await inbox.store.rejected.list_rejected()
        counts = await inbox.store.sealed_rows.count_by_key()
        assert [(c.table, c.key_id, c.rows) for c in counts] == [("rejected_deliveries", "k1", 1)]
        monkeypatch.setenv(SECRET_ENV, f"{SECRET} {WRONG_SECRET}")
        (fixed,) = await retry_rejected_many(
            build_receiver(config, inbox.store), inbox.store, ids=[kept.id], actor="test"
        )
        assert fixed.outcome == "accepted"
        await wait_for_status(inbox.store, "evt_rejected_sealed", "completed")
        assert fixed.delivery_id is not None
        assert await inbox.store.journal.read_payload(fixed.delivery_id) == body


async def test_a_rotation_leaves_a_row_purged_between_its_read_and_its_write(
    sealed: Store, db_url: str
) -> None:
    for n in range(3):
        await add_delivery(sealed, f"evt_rot_{n}", data={"n": n})
    await settle_all(sealed, "completed")
    rotating = open_store_for(db_url, sealer=Sealer([("k2", KEY2), ("k1", KEY1)], {"test"}))
    await rotating.open()
    driver = rotating.sealed_rows._db
    original = driver.rows

    async def read_then_purge(sql: Any, **params: Any) -> Any:
        # The purge commits after the page was read, before its re-wrap does.
        found = await original(sql, **params)
        await ops.purge(sealed, make_config(db_url), payloads_only=True, older_than=0)
        return found

    try:
        driver.rows = read_then_purge  # type: ignore[method-assign]
        page = await rotating.sealed_rows.rewrap_page("payloads", after=None, limit=10)
        driver.rows = original  # type: ignore[method-assign]
        assert (page.seen, page.rewrapped, page.changed) == (3, 0, 3)
        assert (await rotating.count_rows())["payloads"] == 0  # nothing written back
        again = await rotating.sealed_rows.rewrap_page("payloads", after=None, limit=10)
        assert again.seen == 0
    finally:
        driver.rows = original  # type: ignore[method-assign]
        await rotating.close()


def test_an_inbox_given_a_store_that_would_not_seal_refuses_to_start(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hookinbox.app import Inbox, build_sealer
    from hookinbox.errors import ConfigError

    monkeypatch.setenv("HOOKINBOX_ENCRYPTION_KEYS", RING)
    config = make_config(sqlite_url, encryption={"enabled": True})
    with pytest.raises(ConfigError, match="does not seal source 'test'"):
        Inbox(config, store=open_store_for(sqlite_url), run_workers=False)
    given = open_store_for(sqlite_url, sealer=build_sealer(config))
    assert Inbox(config, store=given, run_workers=False).store is given
