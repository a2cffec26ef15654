"""The one delivery search (CLI, admin and API call it) over both stores: what an operator
pastes or types finds what they meant, and a payload filter stays bounded."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from hookinbox import ops
from hookinbox.errors import AmbiguousId, InvalidArgument, NotFound
from hookinbox.store import Store
from tests.support.inbox import make_config
from tests.support.journal import add_delivery, settle_all

ACTOR = "test:search"


async def _types(store: Store, db_url: str, **query: object) -> list[str]:
    page = await ops.search_deliveries(store, make_config(db_url), ops.DeliveryQuery(**query))  # type: ignore[arg-type]
    return sorted(d.event_type for d in page.deliveries)


async def test_a_type_is_a_prefix_or_a_glob_of_the_config_syntax_in_any_case(
    store: Store, db_url: str
) -> None:
    for n, event_type in enumerate(
        ("order.created", "Order.Paid", "invoice.paid", "payment_intent.succeeded", "orders")
    ):
        await add_delivery(store, f"evt_{n}", event_type=event_type)
    assert await _types(store, db_url, type="order.") == ["Order.Paid", "order.created"]
    assert await _types(store, db_url, type="ORDER.*") == ["Order.Paid", "order.created"]
    assert await _types(store, db_url, type="order") == ["Order.Paid", "order.created", "orders"]
    assert await _types(store, db_url, type="*.paid") == ["Order.Paid", "invoice.paid"]
    assert await _types(store, db_url, type="order.?aid") == ["Order.Paid"]
    assert await _types(store, db_url, type="payment_intent*") == ["payment_intent.succeeded"]
    # LIKE's own wildcards are literal characters in a search.
    assert await _types(store, db_url, type="payment%") == []
    assert await _types(store, db_url, type="paymentXintent") == []
    assert await _types(store, db_url, type="  invoice.paid ") == ["invoice.paid"]
    with pytest.raises(InvalidArgument, match="brackets"):
        await _types(store, db_url, type="order.[cp]*")


async def test_an_id_pasted_with_spaces_or_as_a_job_id_finds_its_delivery(
    store: Store, db_url: str
) -> None:
    config = make_config(db_url)
    delivery_id = await add_delivery(store, "evt_pasted")
    await add_delivery(store, "evt_other")
    for typed in (
        " evt_pasted\n",
        f"\t{delivery_id} ",
        f"{delivery_id}:count",
        f" {delivery_id}:x ",
    ):
        page = await ops.search_deliveries(store, config, ops.DeliveryQuery(ref=typed))
        assert [d.id for d in page.deliveries] == [delivery_id], typed
        assert page.count == 1
    found = await ops.find_delivery(store, f" {delivery_id}:count ")
    assert found.event_id == "evt_pasted"


async def test_relative_times_count_and_pages(store: Store, db_url: str) -> None:
    config = make_config(db_url)
    ids = [await add_delivery(store, f"evt_{n}") for n in range(5)]
    page = await ops.search_deliveries(store, config, ops.DeliveryQuery(since="24h", limit=2))
    assert [d.id for d in page.deliveries] == ids[:-3:-1]
    assert page.count == 5 and not page.count_capped and page.next_before == ids[-2]
    rest = await ops.search_deliveries(
        store, config, ops.DeliveryQuery(since="24h", limit=2, before=page.next_before)
    )
    assert [d.id for d in rest.deliveries] == [ids[2], ids[1]] and rest.count == 5
    future = await ops.search_deliveries(store, config, ops.DeliveryQuery(until="1h"))
    assert future.deliveries == [] and future.count == 0
    for bad in ("last tuesday", "9" * 50, "10000-01-01T00:00", "1e400"):
        with pytest.raises(InvalidArgument):
            await ops.search_deliveries(store, config, ops.DeliveryQuery(since=bad))
    assert ops.parse_when("1700000000") == datetime.fromtimestamp(1700000000, UTC)
    assert ops.parse_when("999999d") == datetime.fromtimestamp(0, UTC)


async def test_a_payload_field_filter_reads_retained_json_payloads_in_a_bounded_window(
    store: Store, db_url: str
) -> None:
    config = make_config(db_url)
    wanted = await add_delivery(store, "evt_a", data={"object": {"customer": "cus_123", "n": 7}})
    await add_delivery(store, "evt_b", data={"object": {"customer": "cus_999"}})
    await add_delivery(store, "evt_c", data={"object": [{"customer": "cus_123"}]})
    await add_delivery(store, "evt_d", data={"object": {"customer": "cus_1234"}})
    await add_delivery(store, "evt_form", body=b"customer=cus_123&data.object.customer=cus_123")
    await add_delivery(store, "evt_broken", body=b'{"data": {"object": {"customer": "cus_123"')

    async def where(text: str, **more: str) -> list[str]:
        query = ops.DeliveryQuery(payload=text, **more)  # type: ignore[arg-type]
        return [d.id for d in (await ops.search_deliveries(store, config, query)).deliveries]

    assert await where("data.object.customer = cus_123") == [wanted]
    assert await where('data.object.customer="cus_123"') == [wanted]
    assert await where("data.object.n = 7") == [wanted]
    assert await where("data.object.n = 8") == []
    assert await where("data.object.customer = cus_123", since="1h", until="0s") == [wanted]
    # The default window is the last 24 hours; a wider one than 7 days is refused.
    long_ago = (datetime.now(UTC) - timedelta(days=30)).isoformat()
    with pytest.raises(InvalidArgument, match="7 days"):
        await where("data.object.customer = cus_123", since=long_ago)
    for bad in ("customer", "data..x = 1", "a b = 1", "x = {}", "x = [1]", "x = 1" + "0" * 300):
        with pytest.raises(InvalidArgument):
            await where(bad)

    # Only while the payload is retained.
    await settle_all(store, "completed")
    await ops.purge(store, config, payloads_only=True, older_than=0)
    assert await where("data.object.customer = cus_123") == []


async def test_an_event_id_two_sources_share_is_never_settled_by_picking_one(
    store: Store, db_url: str
) -> None:
    first = await add_delivery(store, "evt_shared", source="test")
    second = await add_delivery(store, "evt_shared", source="other")
    with pytest.raises(AmbiguousId) as refused:
        await ops.find_delivery(store, "evt_shared")
    assert refused.value.sources == ("other", "test") and refused.value.http_status == 409
    assert (await ops.find_delivery(store, "evt_shared", "test")).id == first
    assert (await ops.find_delivery(store, " evt_shared ", "other")).id == second
    assert (await ops.find_delivery(store, second)).source == "other"
    with pytest.raises(NotFound):
        await ops.find_delivery(store, "evt_shared", "nope")
    page = await ops.search_deliveries(
        store, make_config(db_url), ops.DeliveryQuery(ref="evt_shared")
    )
    assert {d.source for d in page.deliveries} == {"test", "other"}


async def test_a_source_typed_in_another_case_is_the_configured_one(
    store: Store, db_url: str
) -> None:
    await add_delivery(store, "evt_1")
    page = await ops.search_deliveries(
        store, make_config(db_url), ops.DeliveryQuery(source=" TEST ")
    )
    assert page.count == 1 and page.search.source == "test"


async def test_a_replay_of_an_event_id_two_sources_share_names_the_source(
    store: Store, db_url: str
) -> None:
    config = make_config(db_url)
    mine = await add_delivery(store, "evt_twice", source="test")
    await add_delivery(store, "evt_twice", source="other")
    await settle_all(store, "completed")
    with pytest.raises(AmbiguousId):
        await ops.replay(store, config, "evt_twice", actor=ACTOR, dry_run=True, wait_seconds=0)
    report = await ops.replay(
        store, config, "evt_twice", source="test", actor=ACTOR, dry_run=True, wait_seconds=0
    )
    assert report.delivery.id == mine
