"""What the admin page (and the API) read: dead-letter pages, the overview, and a
payload shown on purpose (the delivery search is :mod:`hookinbox.ops.search`).

The CLI's reads live beside its commands (``dlq_list``, ``trace``); these are the ones a
page needs. Lists are keyset pages (``before`` = the last id seen), never OFFSET.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from hookinbox.codes import error_code_of
from hookinbox.config import Config
from hookinbox.errors import NotFound
from hookinbox.logs import get_logger
from hookinbox.metrics import UNTALLIED, ReceiptTally
from hookinbox.ops.search import JOB_CURSOR, page_cursor
from hookinbox.store import DeadLetter, DeadLetterCriteria, DeliveryView, Store, StoreGaugeReadings

log = get_logger("hookinbox.ops")


@dataclass(frozen=True, slots=True)
class DeadLetterPage:
    dead: list[DeadLetter]
    #: ``(source, action, last error code, failed jobs)``, largest group first.
    reasons: list[tuple[str, str, str, int]]


async def dead_letter_page(
    store: Store,
    *,
    source: str | None = None,
    reason: str | None = None,
    before: str | None = None,
    limit: int = 50,
) -> DeadLetterPage:
    """Failed jobs, newest first, with the count of every (source, action, reason)."""
    dead = await store.queue.list_dead_letters(
        DeadLetterCriteria(source=source, reason=reason),
        before=page_cursor(before, JOB_CURSOR, "a job id (dlv_...:action)"),
        limit=limit,
    )
    return DeadLetterPage(dead, await store.reads.dead_letter_reasons())


async def view_payload(store: Store, ref: str, *, actor: str) -> tuple[DeliveryView, bytes | None]:
    """The delivery and its raw body while retained (None once purged). Every view is
    logged and audited by delivery id, never the body itself."""
    found = await store.journal.get_delivery(ref)
    if found is None:
        raise NotFound(f"no delivery {ref!r}")
    body = await store.journal.read_payload(found.id)
    if body is not None:
        log.warning("payload_viewed", delivery_id=found.id, source=found.source, actor=actor)
        await store.audit.record_operator_action(
            actor=actor, command="view-payload", source=found.source, delivery_id=found.id
        )
    return found, body


async def payload_already_viewed(store: Store, delivery_id: str) -> bytes | None:
    """The body again for the page a :func:`view_payload` redirected to (the admin's
    post/redirect/get): that view was audited once; showing it on the GET that follows,
    or on a reload of it, is the same view and is not audited again."""
    return await store.journal.read_payload(delivery_id)


@dataclass(frozen=True, slots=True)
class SourceOverview:
    name: str
    accepted: int
    duplicate: int
    rejected: int
    lag: float
    depth: int
    dead: int
    paused: bool


@dataclass(frozen=True, slots=True)
class Overview:
    """The last hour per source, and per minute (``{"minute", "accepted", "duplicate",
    "rejected", "failed"}``, 60 entries, oldest first; ``failed``: job attempts that
    failed), as of ``as_of`` (unix seconds)."""

    sources: list[SourceOverview]
    minutes: list[dict[str, int]] = field(default_factory=list)
    as_of: float = 0.0


#: How often a serving process adds what it counted to the store's receipt counts.
RECEIPT_FLUSH_SECONDS = 2.0


async def flush_receipts(store: Store, tally: ReceiptTally) -> None:
    """Add this process's counted answers to the store; kept for the next flush when the
    store fails (then raised)."""
    counts = tally.take()
    try:
        await store.receipts.add_receipt_counts(counts)
    except BaseException:
        tally.put_back(counts)
        raise


async def run_receipt_flush(
    store: Store, tally: ReceiptTally, stop: asyncio.Event, interval: float = RECEIPT_FLUSH_SECONDS
) -> None:
    """The background flush of ``serve``, and a last one when it stops: the overview of
    any process, and of this one after a restart, counts these answers."""
    while True:
        stopping = False
        try:
            await asyncio.wait_for(stop.wait(), interval)
            stopping = True
        except TimeoutError:
            pass
        try:
            await flush_receipts(store, tally)
        except Exception as exc:  # a bad moment of the store: the counts wait for the next
            log.warning("receipt_flush_failed", error=error_code_of(exc))
        if stopping:
            return


async def overview(
    store: Store, config: Config, tally: ReceiptTally, *, now: float | None = None
) -> Overview:
    """The last hour from the store, the same in every process and after a restart:
    accepted deliveries from the journal, duplicates and refusals from the receipt
    counts every process adds (this one's just now, the others' within
    :data:`RECEIPT_FLUSH_SECONDS`). The queue figures are read now, not from a cache."""
    now = time.time() if now is None else now
    await flush_receipts(store, tally)
    readings: StoreGaugeReadings = await store.reads.read_store_gauges()
    accepted: dict[str, int] = {}
    minutes: dict[int, dict[str, int]] = {}
    first = int(now // 60) - 59
    for source, minute, count in await store.reads.deliveries_per_minute(
        datetime.fromtimestamp(first * 60, UTC)
    ):
        accepted[source] = accepted.get(source, 0) + count
        bucket = minutes.setdefault(minute, {})
        bucket["accepted"] = bucket.get("accepted", 0) + count
    totals: dict[str, dict[str, int]] = {}
    for minute, source, outcome, count in await store.receipts.receipt_counts_since(first):
        if outcome in UNTALLIED or minute > first + 59:
            continue
        kind = "duplicate" if outcome in ("duplicate", "conflict") else "rejected"
        bucket = minutes.setdefault(minute, {})
        bucket[kind] = bucket.get(kind, 0) + count
        mine = totals.setdefault(source, {})
        mine[kind] = mine.get(kind, 0) + count
    for minute, count in await store.reads.failed_attempts_per_minute(
        datetime.fromtimestamp(first * 60, UTC)
    ):
        minutes.setdefault(minute, {})["failed"] = count
    rows = []
    for name in sorted(config.sources):
        mine = totals.get(name, {})
        rows.append(
            SourceOverview(
                name=name,
                accepted=accepted.get(name, 0),
                duplicate=mine.get("duplicate", 0),
                rejected=mine.get("rejected", 0),
                lag=readings.lag_seconds.get(name, 0.0),
                depth=readings.queue_depth.get(name, 0),
                dead=readings.dead_letters.get(name, 0),
                paused=name in readings.paused_seconds,
            )
        )
    chart: list[dict[str, Any]] = [
        {"minute": m, **minutes.get(m, {})} for m in range(first, first + 60)
    ]
    return Overview(rows, chart, as_of=now)
