"""One reservation batch mixing every kind of item (both stores): new events, repeats of
stored ones (folded and not, same body and another), two items of one new event, and a
row the database refuses. Each is answered in item order, exactly as if it had come
alone, and the journal counts every repeat: the batch is written set-wise, not item by
item, so these are the cases its bookkeeping could get wrong."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from hookinbox.errors import StoreRejectedRow
from hookinbox.ids import job_id
from hookinbox.store import NewJob, Reservation, Store
from tests.store.test_contract import new_delivery


@pytest.mark.parametrize("with_refused", [False, True], ids=["whole", "one_refused"])
async def test_a_mixed_batch_is_answered_in_order_with_exact_counts(
    store: Store, with_refused: bool
) -> None:
    """Without a refused row the batch is written at once; with one, it goes again item by
    item (the refused row alone fails): the answers and counts are the same."""
    stored = new_delivery("old", body=b'{"v":1}')
    other = new_delivery("other", body=b'{"v":1}')
    await store.journal.reserve_deliveries([stored, other])
    before = await store.journal.get_delivery("old")
    assert before is not None
    await asyncio.sleep(0.01)  # last_seen_at must move

    fresh = new_delivery("fresh", actions=("a", "b"))
    no_jobs = new_delivery("quiet", actions=())
    capped = new_delivery("capped")
    capped = replace(capped, jobs=(NewJob(job_id(capped.id, "a"), "a", max_attempts=7),))
    again_folded = replace(new_delivery("old", body=b'{"v":1}'), seen=3)
    conflict = new_delivery("other", body=b'{"v":2}')
    twin_first = new_delivery("twin", body=b'{"t":1}')
    twin_second = new_delivery("twin", body=b'{"t":2}')
    # A lone surrogate: neither database stores it.
    third = (
        replace(new_delivery("bad"), event_type="\ud800") if with_refused else new_delivery("ok")
    )
    batch = [fresh, again_folded, third, twin_first, conflict, no_jobs, twin_second, capped]

    answers = await store.journal.reserve_deliveries(batch)

    outcomes = [a.outcome if not isinstance(a, StoreRejectedRow) else "refused" for a in answers]
    assert outcomes == [
        "accepted",
        "duplicate",
        "refused" if with_refused else "accepted",
        "accepted",
        "duplicate",
        "accepted",
        "duplicate",
        "accepted",
    ]
    fresh_a, folded_a, _, twin_a, conflict_a, quiet_a, twin_b, capped_a = answers
    for item, answer in ((fresh, fresh_a), (twin_first, twin_a), (no_jobs, quiet_a)):
        assert isinstance(answer, Reservation)
        assert (answer.delivery_id, answer.conflict) == (item.id, False)
    assert isinstance(capped_a, Reservation) and capped_a.delivery_id == capped.id
    assert folded_a == Reservation("duplicate", stored.id, False, stored.body_sha256)
    assert conflict_a == Reservation("duplicate", other.id, True, other.body_sha256)
    assert twin_b == Reservation("duplicate", twin_first.id, True, twin_first.body_sha256)

    if with_refused:
        assert isinstance(answers[2], StoreRejectedRow)
    else:
        assert answers[2] == Reservation("accepted", third.id)

    third_rows = 0 if with_refused else 1
    counts = await store.count_rows()
    # stored + other + fresh + twin + quiet + capped (+ ok)
    assert (counts["deliveries"], counts["payloads"]) == (6 + third_rows, 6 + third_rows)
    assert counts["jobs"] == 2 + 2 + 1 + 0 + 1 + third_rows

    old = await store.journal.get_delivery("old")
    assert old is not None
    assert (old.delivery_count, old.conflicts) == (4, 0)
    assert old.last_seen_at > before.last_seen_at
    assert old.first_seen_at == before.first_seen_at
    found = await store.journal.get_delivery("other")
    assert found is not None and (found.delivery_count, found.conflicts) == (2, 1)
    twin = await store.journal.get_delivery("twin")
    assert twin is not None and (twin.id, twin.delivery_count, twin.conflicts) == (
        twin_first.id,
        2,
        1,
    )
    fresh_view = await store.journal.get_delivery(fresh.id)
    assert fresh_view is not None and fresh_view.delivery_count == 1
    assert sorted(job.action for job in fresh_view.jobs) == ["a", "b"]
    capped_view = await store.journal.get_delivery(capped.id)
    assert capped_view is not None and [j.max_attempts for j in capped_view.jobs] == [7]
    assert (await store.journal.get_delivery("bad")) is None

    # Only the accepted ones carry a payload and jobs to claim.
    claimed = await store.queue.claim_due_jobs("w", 100, 30)
    assert sorted(job.delivery_id for job in claimed) == sorted(
        [stored.id, other.id, fresh.id, fresh.id, twin_first.id, capped.id]
        + [third.id] * third_rows
    )
    assert {job.delivery_id: job.body for job in claimed}[twin_first.id] == b'{"t":1}'


async def test_a_batch_of_repeats_only_writes_no_payload_and_counts_each(store: Store) -> None:
    firsts = [new_delivery(f"e{n}") for n in range(5)]
    await store.journal.reserve_deliveries(firsts)
    answers = await store.journal.reserve_deliveries([new_delivery(f"e{n}") for n in range(5)])
    assert [(a.outcome, a.delivery_id) for a in answers] == [  # type: ignore[union-attr]
        ("duplicate", first.id) for first in firsts
    ]
    counts = await store.count_rows()
    assert (counts["deliveries"], counts["payloads"], counts["jobs"]) == (5, 5, 5)
    for n in range(5):
        found = await store.journal.get_delivery(f"e{n}")
        assert found is not None and found.delivery_count == 2


async def test_stored_headers_read_back_as_they_came(store: Store) -> None:
    headers = {"content-type": "application/json", "x-name": "Zoë ✓", "webhook-id": 'a"b\\c'}
    item = replace(new_delivery("h"), headers=headers)
    inline = replace(new_delivery("h-inline"), headers=headers)
    await store.journal.reserve_deliveries([item])
    await store.journal.reserve_inline(inline, [])
    for delivery_id in (item.id, inline.id):
        found = await store.journal.read_stored(delivery_id)
        assert found == (b"{}", headers)


async def test_each_body_of_a_batch_reads_back_byte_for_byte(store: Store) -> None:
    """Bodies travel apart from the batch's rows (PostgreSQL: one bytea array, matched by
    place): each comes back as its own, whatever its bytes."""
    bodies = [b"", b"\x00\xff\x00", "Zoë ✓".encode(), bytes(range(256)) * 40, b'{"t":"\\u0000"}']
    items = [replace(new_delivery(f"b{n}"), body=body) for n, body in enumerate(bodies)]
    await store.journal.reserve_deliveries(items)
    for item, body in zip(items, bodies, strict=True):
        found = await store.journal.read_stored(item.id)
        assert found is not None and found[0] == body


async def test_one_event_in_many_bodies_in_one_batch_gets_an_answer_for_each(store: Store) -> None:
    """A provider that sends one event id with other bodies, concurrently, puts several
    deliveries of one event in a batch: each is answered (a duplicate, a conflict), and so
    is every other event of the batch, however many bodies there are."""
    first = new_delivery("same")
    await store.journal.reserve_deliveries([first])
    variants = [
        replace(new_delivery("same"), body=f'{{"n":{n}}}'.encode(), body_sha256=f"{n:064x}")
        for n in range(8)
    ]
    others = [new_delivery("other-1"), new_delivery("other-2")]
    answers = await store.journal.reserve_deliveries([*variants, *others])
    assert [(a.outcome, a.delivery_id, a.conflict) for a in answers[:8]] == [  # type: ignore[union-attr]
        ("duplicate", first.id, True)
    ] * 8
    assert [a.outcome for a in answers[8:]] == ["accepted", "accepted"]  # type: ignore[union-attr]
    found = await store.journal.get_delivery("same")
    assert found is not None and (found.delivery_count, found.conflicts) == (9, 8)
