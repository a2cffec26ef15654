"""The journal: reserving deliveries (batched, or inline with their resource events) and
reading them back.

One row per (source, event id), kept for the whole key retention; a repeat is counted on
the first row, never stored again. Lists are keyset pages over the time-ordered delivery
id, newest first, never OFFSET.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

from hookinbox.errors import StoreRejectedRow
from hookinbox.ids import delivery_id_floor
from hookinbox.store.decisions import TransitionRules
from hookinbox.store.hot_path import reserve_one
from hookinbox.store.records import (
    DeliverySearch,
    DeliveryStatus,
    DeliveryView,
    JobView,
    NewDelivery,
    Reservation,
)
from hookinbox.store.resource_records import ParkPolicy, ResourceEvent, ResourceOutcome
from hookinbox.store.sql import WAKE, DecodeTime, Sql, Tx, row, rows
from hookinbox.store.transitions import apply_or_park

if TYPE_CHECKING:
    from hookinbox.store.driver import Driver

_DELIVERY = (
    "d.id, d.source, d.event_id, d.event_type, d.body_sha256, d.first_seen_at, d.last_seen_at,"
    " d.delivery_count, d.conflicts,"
    " EXISTS (SELECT 1 FROM payloads p WHERE p.delivery_id = d.id) AS payload_retained"
)
#: A delivery's status from its jobs (see :func:`hookinbox.store.records.delivery_status`).
_STATUS = """CASE
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id AND j.state = 'failed')
        THEN 'failed'
    WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id AND j.state = 'processing')
        THEN 'processing'
    WHEN NOT EXISTS (SELECT 1 FROM jobs j WHERE j.delivery_id = d.id AND j.state <> 'completed')
        THEN 'completed'
    ELSE 'accepted' END"""

_GET = Sql(
    f"SELECT {_DELIVERY} FROM deliveries d"
    " WHERE d.id = :ref OR (d.event_id = :ref AND (d.source = :source OR :source IS NULL))"
    " ORDER BY (d.id = :ref) DESC, d.first_seen_at DESC LIMIT 1"
)
_JOBS_OF = Sql(
    "SELECT id, action, state, attempts, max_attempts, last_error, next_attempt_at,"
    " lease_expires_at, business_id, created_at, updated_at"
    " FROM jobs WHERE delivery_id = :id ORDER BY action"
)
_PAGE = (
    " AND (d.source = :source OR :source IS NULL)"
    " AND (d.id < :before OR :before IS NULL)"
    f" AND ({_STATUS} = :status OR :status IS NULL)"
    " ORDER BY d.id DESC LIMIT :limit"
)
_LISTED = f"SELECT {_DELIVERY}, {{job_states}} AS states FROM deliveries d"
_LIST = Sql(_LISTED + " WHERE TRUE" + _PAGE)

# Search filters chosen from constants (never from input), so a search by id or by a
# rare status walks an index instead of the whole journal.
_BY_REF = (
    "d.id IN (SELECT id FROM deliveries WHERE id = :ref"
    " UNION ALL SELECT id FROM deliveries WHERE event_id = :ref)"
)
_BY_STATE = {
    "failed": "d.id IN (SELECT delivery_id FROM jobs WHERE state = 'failed')",
    "processing": "d.id IN (SELECT delivery_id FROM jobs WHERE state = 'processing')",
}
#: Retained payloads of the window (the payloads' primary key bounds the walk) whose JSON
#: value at ``:payload_path`` is ``:payload_value`` ({payload_is}: dialect.py).
_BY_PAYLOAD = (
    "d.id IN (SELECT p.delivery_id FROM payloads p WHERE p.delivery_id >= :floor"
    " AND (p.delivery_id < :ceiling OR :ceiling IS NULL) AND {payload_is:p})"
)
_FILTERS = (
    " AND (lower(d.event_type) LIKE :type ESCAPE '\\' OR :type IS NULL)"
    " AND (d.id >= :floor OR :floor IS NULL)"
    " AND (d.id < :ceiling OR :ceiling IS NULL)"
    " AND (d.source = :source OR :source IS NULL)"
    f" AND ({_STATUS} = :status OR :status IS NULL)"
)
_SearchKey = tuple[bool, str, bool]


def _where(key: _SearchKey) -> str:
    by_ref, state, by_payload = key
    return (
        f" WHERE {_BY_REF if by_ref else 'TRUE'} AND {_BY_STATE.get(state, 'TRUE')}"
        f" AND {_BY_PAYLOAD if by_payload else 'TRUE'}" + _FILTERS
    )


_SEARCH_KEYS: list[_SearchKey] = [
    (by_ref, state, by_payload)
    for by_ref in (True, False)
    for state in ("", "failed", "processing", "accepted", "completed")
    for by_payload in (True, False)
]
_SEARCHES = {
    key: Sql(
        _LISTED + _where(key) + " AND (d.id < :before OR :before IS NULL)"
        " ORDER BY d.id DESC LIMIT :limit"
    )
    for key in _SEARCH_KEYS
}
#: How many match, counted up to ``:cap`` (a count never walks more than that).
_SEARCH_COUNTS = {
    key: Sql(f"SELECT count(*) FROM (SELECT 1 FROM deliveries d{_where(key)} LIMIT :cap) AS c")
    for key in _SEARCH_KEYS
}
_BY_EVENT = Sql(
    "SELECT id FROM deliveries WHERE event_id = :event_id AND (source = :source OR :source IS NULL)"
    " ORDER BY first_seen_at, id"
)
_PAYLOAD = Sql("SELECT body FROM payloads WHERE delivery_id = :id")
_STORED = Sql("SELECT body, headers FROM payloads WHERE delivery_id = :id")

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


def _reserve_inline(
    item: NewDelivery, applies: Sequence[InlineApply], decode_time: DecodeTime
) -> Tx[tuple[Reservation, list[ResourceOutcome]]]:
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


def _search_key(query: DeliverySearch) -> _SearchKey:
    return (query.ref is not None, query.status or "", query.payload is not None)


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


class Journal:
    def __init__(self, db: Driver) -> None:
        self._db = db

    async def reserve_deliveries(
        self, items: Sequence[NewDelivery]
    ) -> list[Reservation | StoreRejectedRow]:
        """Reserve every item in ONE commit: journal row, payload and jobs for the first
        delivery of an event id, last-seen/count for a repeat. Answers in item order; an
        item whose values the database refuses is answered StoreRejectedRow, alone.
        Raises StoreUnavailable (and writes nothing) when the commit fails."""
        return await self._db.reserve_deliveries(items)

    async def reserve_inline(
        self, item: NewDelivery, applies: Sequence[InlineApply]
    ) -> tuple[Reservation, list[ResourceOutcome]]:
        """``reserve_deliveries`` for one delivery, plus each of ``applies`` (one per
        inline resource job of the delivery) in the SAME commit: so a 2xx means the
        transition is durable. A duplicate applies nothing. StoreRejectedRow when the
        database refuses one of the delivery's values."""
        try:
            return await self._db.run(_reserve_inline(item, applies, self._db.decode_time))
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
            _SEARCHES[_search_key(query)], **_search_params(query), limit=query.limit
        )
        return [DeliveryView.listed(r, self._db.decode_time) for r in found]

    async def count_deliveries(self, query: DeliverySearch, *, cap: int) -> int:
        """How many deliveries match (ignoring ``before``), counted up to ``cap``."""
        params = {**_search_params(query), "cap": cap}
        del params["before"]
        return int(await self._db.value(_SEARCH_COUNTS[_search_key(query)], **params))

    async def read_stored(self, delivery_id: str) -> tuple[bytes, dict[str, str]] | None:
        """The raw body and the kept headers while retained (trace re-evaluates route
        filters on them), else None."""
        found = await self._db.row(_STORED, id=delivery_id)
        if found is None:
            return None
        return bytes(found["body"]), json.loads(found["headers"]) if found["headers"] else {}

    async def read_payload(self, delivery_id: str) -> bytes | None:
        """The raw body while it is retained, else None (for the admin's explicit view)."""
        body = await self._db.value(_PAYLOAD, id=delivery_id)
        return bytes(body) if body is not None else None
