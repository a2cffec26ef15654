"""A batch is never poisoned by one row (both stores): when the database refuses a value
of one delivery, every other delivery of the batch is reserved as if it had come alone
and only the refused one is answered StoreRejectedRow (400, a retry cannot help)."""

from __future__ import annotations

import secrets
from dataclasses import replace

import pytest

from hookinbox.errors import StoreRejectedRow
from hookinbox.store import NewDelivery, Store
from tests.store.test_contract import new_delivery

BAD_ROWS = {
    # Neither database can store a lone surrogate.
    "lone_surrogate_in_type": lambda: replace(new_delivery("bad"), event_type="\ud800"),
    # PostgreSQL refuses these; SQLite stores them.
    "nul_in_type": lambda: replace(new_delivery("bad"), event_type="a\x00b"),
    "event_id_over_the_btree_limit": lambda: new_delivery(secrets.token_hex(1500)),
}


@pytest.mark.parametrize("kind", sorted(BAD_ROWS))
async def test_one_refused_row_among_forty(store: Store, backend: str, kind: str) -> None:
    good = [new_delivery(f"evt_{n}") for n in range(40)]
    bad: NewDelivery = BAD_ROWS[kind]()
    answers = await store.journal.reserve_deliveries([*good[:20], bad, *good[20:]])
    refused = answers.pop(20)
    assert [getattr(a, "outcome", a) for a in answers] == ["accepted"] * 40
    assert [a.delivery_id for a in answers] == [item.id for item in good]  # type: ignore[union-attr]
    stored = backend == "sqlite" and kind != "lone_surrogate_in_type"
    if stored:
        assert getattr(refused, "outcome", refused) == "accepted"
    else:
        assert isinstance(refused, StoreRejectedRow)
        assert (refused.code, refused.http_status) == ("store_rejected_row", 400)
        assert "\ud800" not in refused.message and bad.event_id not in refused.message
    counts = await store.count_rows()
    assert counts["deliveries"] == counts["jobs"] == 40 + stored
    claimed = await store.queue.claim_due_jobs("w", 100, 30)
    assert len(claimed) == 40 + stored


async def test_a_refused_row_alone_and_a_repeat_of_a_good_one(store: Store, backend: str) -> None:
    (alone,) = await store.journal.reserve_deliveries([BAD_ROWS["lone_surrogate_in_type"]()])
    assert isinstance(alone, StoreRejectedRow)
    first = new_delivery("evt_again")
    await store.journal.reserve_deliveries([first])
    again = await store.journal.reserve_deliveries(
        [new_delivery("evt_again"), BAD_ROWS["lone_surrogate_in_type"](), new_delivery("evt_new")]
    )
    assert [getattr(a, "outcome", "rejected") for a in again] == [
        "duplicate",
        "rejected",
        "accepted",
    ]
    assert again[0].delivery_id == first.id  # type: ignore[union-attr]
    found = await store.journal.get_delivery("evt_again")
    assert found is not None and found.delivery_count == 2


async def test_an_inline_reservation_of_a_refused_row_is_refused_alone(store: Store) -> None:
    with pytest.raises(StoreRejectedRow):
        await store.journal.reserve_inline(BAD_ROWS["lone_surrogate_in_type"](), [])
    reservation, outcomes = await store.journal.reserve_inline(new_delivery("evt_fine"), [])
    assert (reservation.outcome, outcomes) == ("accepted", [])
    assert (await store.count_rows())["deliveries"] == 1
