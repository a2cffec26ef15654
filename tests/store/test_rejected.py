"""store.rejected on both stores: one row per (source, body), a ring per source in rows
and in bytes, the retry mark, the purge."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib

from hookinbox.ids import new_rejected_id
from hookinbox.store import NewRejected, Store


def refused(
    source: str, body: bytes, *, reason: str = "invalid_signature", keep_body: bool = True
) -> NewRejected:
    return NewRejected(
        id=new_rejected_id(),
        source=source,
        reason=reason,
        body_sha256=hashlib.sha256(body).hexdigest(),
        body=body if keep_body else None,
        body_bytes=len(body),
        headers={"x-hub-signature-256": "sha256=" + "0" * 64, "content-type": "application/json"},
    )


BIG = 1_000_000


async def test_repeats_of_one_body_are_one_row_with_the_latest_headers(store: Store) -> None:
    first = await store.rejected.keep_rejected(refused("gh", b"{}"), max_rows=10, max_bytes=BIG)
    again = refused("gh", b"{}", reason="timestamp_out_of_tolerance")
    again = dataclasses.replace(again, headers={"x-hub-signature-256": "sha256=1"})
    second = await store.rejected.keep_rejected(again, max_rows=10, max_bytes=BIG)
    other_source = await store.rejected.keep_rejected(
        refused("shop", b"{}"), max_rows=10, max_bytes=BIG
    )
    assert first == second != other_source
    (row,) = await store.rejected.list_rejected(source="gh")
    assert (row.seen, row.reason, row.headers) == (
        2,
        "timestamp_out_of_tolerance",
        {"x-hub-signature-256": "sha256=1"},
    )
    got = await store.rejected.get_rejected(row.id)
    assert got is not None and got.body == b"{}" and got.body_kept


async def test_concurrent_refusals_of_one_source_keep_the_ring_bound(store: Store) -> None:
    """Refusals arrive concurrently (each write runs after its 400): on PostgreSQL the
    writes run on separate connections, and none may leave the ring over its bound."""
    for _ in range(5):
        await asyncio.gather(
            *(
                store.rejected.keep_rejected(
                    refused("gh", f'{{"n": {n}}}'.encode()), max_rows=3, max_bytes=BIG
                )
                for n in range(12)
            )
        )
    assert len(await store.rejected.list_rejected(source="gh")) == 3


async def test_each_source_is_a_ring_bounded_in_rows(store: Store) -> None:
    for n in range(8):
        await store.rejected.keep_rejected(
            refused("gh", b'{"n":%d}' % n), max_rows=3, max_bytes=BIG
        )
        await store.rejected.keep_rejected(
            refused("other", b'{"n":%d}' % n), max_rows=5, max_bytes=BIG
        )
    kept = await store.rejected.list_rejected(source="gh")
    assert len(kept) == 3
    assert {r.body_bytes for r in kept} == {7}
    assert len(await store.rejected.list_rejected(source="other")) == 5


async def test_each_source_is_a_ring_bounded_in_bytes(store: Store) -> None:
    body = b'{"pad":"' + b"x" * 1000 + b'"}'
    for n in range(10):
        item = refused("gh", body.replace(b"x", str(n).encode(), 1))
        await store.rejected.keep_rejected(item, max_rows=100, max_bytes=4000)
    totals = await store.rejected.rejected_totals()
    (gh,) = [t for t in totals if t["source"] == "gh"]
    assert gh["stored_bytes"] <= 4000 and gh["rows"] == 3


async def test_a_body_over_the_cap_is_counted_but_not_kept(store: Store) -> None:
    rid = await store.rejected.keep_rejected(
        refused("gh", b"{}", keep_body=False), max_rows=10, max_bytes=BIG
    )
    assert rid is not None
    got = await store.rejected.get_rejected(rid)
    assert got is not None and (got.body, got.body_kept, got.body_bytes) == (None, False, 2)


async def test_a_retried_row_leaves_the_list_and_a_purge_removes_old_rows(store: Store) -> None:
    rid = await store.rejected.keep_rejected(refused("gh", b"{}"), max_rows=10, max_bytes=BIG)
    assert rid is not None
    await store.rejected.mark_rejected_retried(rid, "accepted", "dlv_1")
    assert await store.rejected.list_rejected() == []
    (settled,) = await store.rejected.list_rejected(include_settled=True)
    assert (settled.retry_outcome, settled.retry_delivery_id) == ("accepted", "dlv_1")
    assert await store.rejected.count_purgeable_rejected(3600) == 0
    assert await store.rejected.count_purgeable_rejected(0) == 1
    assert await store.rejected.purge_rejected(0, 100) == 1
    assert await store.rejected.list_rejected(include_settled=True) == []
