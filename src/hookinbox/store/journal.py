"""The journal: reserving deliveries (batched, or inline with their resource events) and
reading them back.

One row per (source, event id), kept for the whole key retention; a repeat is counted on
the first row, never stored again. Lists are keyset pages over the time-ordered delivery
id, newest first, never OFFSET.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from hookinbox import sealing
from hookinbox.errors import StoreRejectedRow
from hookinbox.ids import delivery_id_floor
from hookinbox.sealing import Sealer
from hookinbox.store.decisions import TransitionRules
from hookinbox.store.hot_path import HotPath, reserve_one
from hookinbox.store.records import (
    DeliverySearch,
    DeliveryStatus,
    DeliveryView,
    JobView,
    NewDelivery,
    Reservation,
)
from hookinbox.store.resource_records import ParkPolicy, ResourceEvent, ResourceOutcome
from hookinbox.store.sql import WAKE, DecodeTime, Tx, row, rows
from hookinbox.store.statements import load_statements
from hookinbox.store.transitions import apply_or_park

if TYPE_CHECKING:
    from hookinbox.store.driver import Driver

_SQL = load_statements("journal")
_GET = _SQL["get"]
_JOBS_OF = _SQL["jobs_of"]
_LIST = _SQL["list"]
_BY_EVENT = _SQL["by_event"]
_PAYLOAD = _SQL["payload"]
_STORED = _SQL["stored"]
_PAYLOAD_WALK = _SQL["payload_walk"]
#: Payloads read per statement of a payload filter walked in Python.
_WALK_PAGE = 500


def _search_name(query: DeliverySearch) -> str:
    """The search statement for the filters ``query`` uses (journal.sql): by reference, by
    a rare status (failed, processing: the others are common, so the status filter alone
    serves), by payload."""
    name = "search"
    if query.ref is not None:
        name += "_by_ref"
    if query.status in ("failed", "processing"):
        name += f"_{query.status}"
    if query.payload is not None:
        name += "_by_payload"
    return name


#: What ``reserve_inline`` is asked to apply: one per inline resource job of the delivery.
InlineApply = tuple[ResourceEvent, TransitionRules, ParkPolicy]


def _delivery(ref: str, source: str | None, decode_time: DecodeTime) -> Tx[DeliveryView | None]:
    found = yield row(_GET, ref=ref, source=source)
    if found is None:
        return None
    jobs = yield rows(_JOBS_OF, id=found["id"])
    views = tuple(JobView.from_row(job, decode_time) for job in jobs)
    return DeliveryView.from_row(found, decode_time, jobs=views)


def _by_event(event_id: str, source: str | None, decode_time: DecodeTime) -> Tx[list[DeliveryView]]:
    found = []
    for each in (yield rows(_BY_EVENT, event_id=event_id, source=source)):
        view = yield from _delivery(each["id"], None, decode_time)
        if view is not None:
            found.append(view)
    return found


def reserve_and_apply(
    item: NewDelivery, applies: Sequence[InlineApply], decode_time: DecodeTime
) -> Tx[tuple[Reservation, list[ResourceOutcome]]]:
    """One delivery reserved as the hot path reserves it, and its inline resource events
    applied in the same transaction (the inline reservation, and a catch-up page)."""
    reservation = yield from reserve_one(item)
    if reservation.outcome == "duplicate":
        return reservation, []
    outcomes = []
    for event, rules, policy in applies:
        outcome = yield from apply_or_park(
            event.job_id, item.source, event, rules, policy, decode_time, leased=False
        )
        outcomes.append(outcome)
    yield WAKE
    return reservation, outcomes


def _search_params(query: DeliverySearch) -> dict[str, object]:
    since, until, payload = query.since, query.until, query.payload
    params: dict[str, object] = {
        "ref": query.ref,
        "source": query.source,
        "type": query.type_pattern,
        "status": query.status,
        "floor": delivery_id_floor(since.timestamp()) if since is not None else None,
        "ceiling": delivery_id_floor(until.timestamp()) if until is not None else None,
        "before": query.before,
    }
    if payload is not None:
        if since is None:
            raise ValueError("a payload match needs a time window (since)")
        params.update(
            payload_path=payload.path, payload_value=payload.value_json, needle=payload.needle
        )
    return params


def sealed_delivery(sealer: Sealer, item: NewDelivery) -> NewDelivery:
    """The item with its body sealed for its delivery, when its source is sealed: every
    path that reserves (a webhook's batch, an inline commit, a catch-up page) stores it so."""
    if not sealer.seals(item.source):
        return item
    return replace(item, body=sealer.seal_always(item.body, sealing.payload_aad(item.id)))


class Journal:
    def __init__(self, db: Driver, hot_path: HotPath, sealer: Sealer) -> None:
        self._db = db
        self._hot = hot_path
        self._sealer = sealer

    def _sealed(self, item: NewDelivery) -> NewDelivery:
        return sealed_delivery(self._sealer, item)

    async def reserve_deliveries(
        self, items: Sequence[NewDelivery]
    ) -> list[Reservation | StoreRejectedRow]:
        """Reserve every item in ONE commit: journal row, payload and jobs for the first
        delivery of an event id, last-seen/count for a repeat. Answers in item order; an
        item whose values the database refuses is answered StoreRejectedRow, alone.
        Raises StoreUnavailable (and writes nothing) when the commit fails.

        A batch is never poisoned by one row: when the database refuses a value, the rows
        go again one by one, the refused row is answered :class:`StoreRejectedRow` and
        every other as if it had come alone. Only a database that cannot commit at all
        fails the batch."""
        if self._sealer.seals_any:
            items = [self._sealed(item) for item in items]
        try:
            return list(await self._hot.reserve_batch(items))
        except Exception as exc:
            if not self._db.rejects_row(exc):
                raise
        return [await self._reserve_alone(item) for item in items]

    async def _reserve_alone(self, item: NewDelivery) -> Reservation | StoreRejectedRow:
        try:
            (answer,) = await self._hot.reserve_batch([item])
        except Exception as exc:
            refused = self._db.rejected(exc)
            if refused is None:
                raise
            return refused
        return answer

    async def reserve_inline(
        self, item: NewDelivery, applies: Sequence[InlineApply]
    ) -> tuple[Reservation, list[ResourceOutcome]]:
        """``reserve_deliveries`` for one delivery, plus each of ``applies`` (one per
        inline resource job of the delivery) in the SAME commit: so a 2xx means the
        transition is durable. A duplicate applies nothing. StoreRejectedRow when the
        database refuses one of the delivery's values."""
        item = self._sealed(item)
        try:
            return await self._db.run(reserve_and_apply(item, applies, self._db.decode_time))
        except Exception as exc:
            refused = self._db.rejected(exc)
            if refused is None:
                raise
            raise refused from exc

    async def get_delivery(self, ref: str, source: str | None = None) -> DeliveryView | None:
        """A delivery with its jobs, by internal id or by event id (newest first if the
        event id exists in several sources and none is given)."""
        return await self._db.run(_delivery(ref, source, self._db.decode_time), atomic=False)

    async def find_deliveries_by_event(
        self, event_id: str, source: str | None = None
    ) -> list[DeliveryView]:
        """Every delivery (with its jobs) of an event id, in every source unless given."""
        return await self._db.run(_by_event(event_id, source, self._db.decode_time), atomic=False)

    async def list_deliveries(
        self,
        *,
        status: DeliveryStatus | None = None,
        source: str | None = None,
        limit: int = 50,
        before: str | None = None,
    ) -> list[DeliveryView]:
        """Newest first, keyset-paginated by delivery id (``before`` = last id seen)."""
        found = await self._db.rows(_LIST, source=source, before=before, status=status, limit=limit)
        return [DeliveryView.listed(r, self._db.decode_time) for r in found]

    async def search_deliveries(self, query: DeliverySearch) -> list[DeliveryView]:
        """A keyset page of the journal, newest first (never OFFSET)."""
        found = await self._db.rows(
            _SQL[_search_name(query)], **_search_params(query), limit=query.limit
        )
        return [DeliveryView.listed(r, self._db.decode_time) for r in found]

    async def count_deliveries(self, query: DeliverySearch, *, cap: int) -> int:
        """How many deliveries match (ignoring ``before``), counted up to ``cap``."""
        params = {**_search_params(query), "cap": cap}
        del params["before"]
        return int(await self._db.value(_SQL["count_" + _search_name(query)], **params))

    async def search_page(
        self, query: DeliverySearch, *, cap: int
    ) -> tuple[list[DeliveryView], int]:
        """:meth:`search_deliveries` and :meth:`count_deliveries` together. With a payload
        filter while a key ring is configured (a body may be sealed, and SQL cannot see
        into one), the window's retained payloads are walked newest first and each body
        is opened and matched here: once for the page and the count. Otherwise the page
        and the count run at once (on PostgreSQL, two connections: each reads the whole
        window for a payload filter, so a search takes the longer of the two, not both)."""
        if query.payload is None or not self._sealer.has_keys:
            return await asyncio.gather(
                self.search_deliveries(query), self.count_deliveries(query, cap=cap)
            )
        return await self._walk_payloads(query, cap)

    async def _walk_payloads(
        self, query: DeliverySearch, cap: int
    ) -> tuple[list[DeliveryView], int]:
        match = query.payload
        assert match is not None
        params = _search_params(query)
        for name in ("payload_path", "payload_value", "needle"):
            params.pop(name)
        page: list[DeliveryView] = []
        total = 0
        cursor: str | None = None  # the count starts from the top; the page at ``before``
        while True:
            params["before"] = cursor
            found = await self._db.rows(_PAYLOAD_WALK, **params, limit=_WALK_PAGE)
            for each in found:
                body = self._sealer.open(bytes(each["body"]), sealing.payload_aad(each["id"]))
                if not match.matches(body):
                    continue
                total += 1
                if len(page) < query.limit and (query.before is None or each["id"] < query.before):
                    page.append(DeliveryView.listed(each, self._db.decode_time))
                if total >= cap and len(page) >= query.limit:
                    return page, total
            if len(found) < _WALK_PAGE:
                return page, min(total, cap)
            cursor = found[-1]["id"]

    async def read_stored(self, delivery_id: str) -> tuple[bytes, dict[str, str]] | None:
        """The raw body and the kept headers while retained (trace re-evaluates route
        filters on them), else None."""
        found = await self._db.row(_STORED, id=delivery_id)
        if found is None:
            return None
        body = self._sealer.open(bytes(found["body"]), sealing.payload_aad(delivery_id))
        return body, json.loads(found["headers"]) if found["headers"] else {}

    async def read_payload(self, delivery_id: str) -> bytes | None:
        """The raw body while it is retained, else None (for the admin's explicit view);
        a sealed one opened (KeyUnavailable when it cannot be)."""
        body = await self._db.value(_PAYLOAD, id=delivery_id)
        if body is None:
            return None
        return self._sealer.open(bytes(body), sealing.payload_aad(delivery_id))
