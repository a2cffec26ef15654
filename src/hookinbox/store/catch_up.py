"""Catch-up's cursor per source, and a page of pulled events reserved in ONE commit with it.

A page goes through the same reservation as a webhook (:func:`reserve_and_apply`: the
journal row, payload and jobs, inline resource events), so an event the journal already
holds is a duplicate and nothing is queued twice. Event ids the journal already holds
are left alone (not counted as a second delivery: the API is not the provider
delivering again). The rows a page reserves are marked ``origin = 'catch_up'`` and the
cursor moves in the same transaction: it never says more was pulled than was committed.
The cursor moves only from the version the run read (compare-and-set), under a lock per
source, so two runs at once cannot both move it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING

from hookinbox.store.journal import InlineApply, reserve_and_apply, sealed_delivery
from hookinbox.store.records import NewDelivery, Record, Reservation
from hookinbox.store.resource_records import ResourceOutcome
from hookinbox.store.sql import WAKE, DecodeTime, Tx, count, row, rows, value
from hookinbox.store.statements import load_statements

if TYPE_CHECKING:
    from hookinbox.sealing import Sealer
    from hookinbox.store.driver import Driver

_SQL = load_statements("catch_up")
_LOCK = _SQL["lock"]
_GET = _SQL["get"]
_LIST = _SQL["list"]
_KNOWN = _SQL["known"]
_MARK_ORIGIN = _SQL["mark_origin"]
_SAVE = _SQL["save"]

#: The origin of a journal row pulled from a provider's API.
CATCH_UP_ORIGIN = "catch_up"


@dataclass(frozen=True, slots=True)
class CatchUpCursor(Record):
    """How far catch-up has pulled one source (times are the provider's unix seconds)."""

    source: str
    #: Everything at or after this is still to be looked at; None before the first run.
    position: int | None
    #: The provider's page token after the last committed page of an interrupted run.
    resume_after: str | None
    #: The newest time that interrupted run saw: the position once it completes.
    resume_ceiling: int | None
    version: int
    updated_at: datetime
    #: The last run's report (JSON text: counts and codes, never a payload).
    last_report: str | None


@dataclass(frozen=True, slots=True)
class CursorMove:
    """Where the cursor goes when a page commits."""

    position: int | None
    resume_after: str | None
    resume_ceiling: int | None
    report: str | None


@dataclass(frozen=True, slots=True)
class PageEntry:
    """One pulled event as the receiver built it: its delivery and its inline applies."""

    delivery: NewDelivery
    applies: Sequence[InlineApply] = ()


@dataclass(frozen=True, slots=True)
class PageCommit:
    """What a page's commit did: per entry (in the order given) a reservation, or None for
    an event the journal already held; whether the cursor moved (False: another run had
    moved it since this one read it, so this one wrote no cursor) and its new version."""

    reservations: tuple[Reservation | None, ...]
    outcomes: tuple[tuple[str, ResourceOutcome], ...]
    cursor_moved: bool
    version: int


def _commit_page(
    source: str,
    entries: Sequence[PageEntry],
    expected_version: int,
    move: CursorMove | None,
    decode_time: DecodeTime,
) -> Tx[PageCommit]:
    yield row(_LOCK, lock_key=f"catch_up:{source}")
    current = yield row(_GET, source=source)
    version = int(current["version"]) if current is not None else 0
    ids = [entry.delivery.event_id for entry in entries]
    known = {r["event_id"] for r in (yield rows(_KNOWN, source=source, ids=ids))} if ids else set()
    answers: dict[str, Reservation | None] = {}
    outcomes: list[tuple[str, ResourceOutcome]] = []
    accepted: list[str] = []
    # In event-id order: two runs at once take the journal's row locks in one order.
    for entry in sorted(entries, key=lambda e: e.delivery.event_id):
        item = entry.delivery
        if item.event_id in known or item.event_id in answers:
            answers.setdefault(item.event_id, None)
            continue
        reservation, applied = yield from reserve_and_apply(item, entry.applies, decode_time)
        answers[item.event_id] = reservation
        outcomes += [(item.id, outcome) for outcome in applied]
        if reservation.outcome == "accepted":
            accepted.append(item.id)
    if accepted:
        yield count(_MARK_ORIGIN, origin=CATCH_UP_ORIGIN, ids=accepted)
        yield WAKE
    moved = False
    if move is not None and version == expected_version:
        saved = yield value(
            _SAVE,
            source=source,
            position=move.position,
            resume_after=move.resume_after,
            resume_ceiling=move.resume_ceiling,
            report=move.report,
            version=version,
        )
        if saved is not None:
            moved, version = True, int(saved)
    return PageCommit(
        reservations=tuple(answers[entry.delivery.event_id] for entry in entries),
        outcomes=tuple(outcomes),
        cursor_moved=moved,
        version=version,
    )


class CatchUpCursors:
    def __init__(self, db: Driver, sealer: Sealer) -> None:
        self._db = db
        #: A pulled payload is sealed at rest like a webhook's (``[encryption]``).
        self._sealer = sealer

    async def get(self, source: str) -> CatchUpCursor | None:
        found = await self._db.row(_GET, source=source)
        return CatchUpCursor.from_row(found, self._db.decode_time) if found else None

    async def list(self) -> list[CatchUpCursor]:
        return [CatchUpCursor.from_row(r, self._db.decode_time) for r in await self._db.rows(_LIST)]

    async def known_events(self, source: str, event_ids: Sequence[str]) -> set[str]:
        """Which of ``event_ids`` the journal holds for ``source`` (a dry run's answer)."""
        if not event_ids:
            return set()
        return {r["event_id"] for r in await self._db.rows(_KNOWN, source=source, ids=event_ids)}

    async def commit_page(
        self,
        source: str,
        entries: Sequence[PageEntry],
        *,
        expected_version: int,
        move: CursorMove | None,
    ) -> PageCommit:
        """Reserve a page of pulled events and move the cursor, in one commit. Raises
        StoreUnavailable (nothing written) when the commit fails."""
        if self._sealer.seals_any:
            entries = [
                replace(entry, delivery=sealed_delivery(self._sealer, entry.delivery))
                for entry in entries
            ]
        return await self._db.run(
            _commit_page(source, entries, expected_version, move, self._db.decode_time)
        )
