"""The answer counts every serving process adds (the admin overview's duplicates and
refusals), on both stores: flushes add up per (minute, source, outcome), a failed flush
keeps its counts for the next, and minutes past the kept window are dropped."""

from __future__ import annotations

import pytest

from hookinbox.errors import StoreUnavailable
from hookinbox.metrics import ReceiptTally
from hookinbox.ops.reads import flush_receipts
from hookinbox.store import Store, open_store_for
from hookinbox.store.receipts import KEEP_MINUTES


async def test_flushes_of_two_processes_add_up(store: Store) -> None:
    one, two = ReceiptTally(), ReceiptTally()
    minute = 29_000_000
    for tally, outcomes in ((one, ["duplicate", "duplicate", "accepted"]), (two, ["duplicate"])):
        for outcome in outcomes:
            tally.add("test", outcome, now=minute * 60 + 5)
        tally.add("test", "invalid_signature", now=(minute + 1) * 60)
    await flush_receipts(store, one)
    await flush_receipts(store, two)
    await flush_receipts(store, one)  # nothing new: adds nothing
    assert await store.receipts.receipt_counts_since(minute) == [
        (minute, "test", "duplicate", 3),
        (minute + 1, "test", "invalid_signature", 2),
    ]
    late = ReceiptTally()
    late.add("test", "duplicate", now=(minute + KEEP_MINUTES + 1) * 60)
    await flush_receipts(store, late)
    assert [m for m, *_ in await store.receipts.receipt_counts_since(0)] == [
        minute + 1,
        minute + KEEP_MINUTES + 1,
    ]


async def test_a_failed_flush_keeps_its_counts_for_the_next(db_url: str) -> None:
    store = open_store_for(db_url)
    tally = ReceiptTally()
    tally.add("test", "duplicate", now=60)
    with pytest.raises(StoreUnavailable):
        await flush_receipts(store, tally)  # never opened
    await store.open()
    try:
        await flush_receipts(store, tally)
        assert await store.receipts.receipt_counts_since(0) == [(1, "test", "duplicate", 1)]
    finally:
        await store.close()
