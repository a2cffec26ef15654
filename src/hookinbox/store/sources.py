"""Source pause state: a paused source answers 503 (the provider keeps retrying, nothing
is lost) until resumed; every receiver process re-reads it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hookinbox.store.audit import AUDIT
from hookinbox.store.operator_records import SourceState
from hookinbox.store.sql import DecodeTime, Tx, count, row
from hookinbox.store.statements import load_statements

if TYPE_CHECKING:
    from hookinbox.store.driver import Driver

_SQL = load_statements("sources")
_SET = _SQL["set"]
_LIST = _SQL["list"]


def _set_paused(
    source: str, paused: bool, reason: str | None, actor: str, decode_time: DecodeTime
) -> Tx[SourceState]:
    state = yield row(_SET, source=source, paused=paused, reason=reason, actor=actor)
    yield count(
        AUDIT,
        actor=actor,
        command="pause" if paused else "resume",
        source=source,
        delivery_id=None,
        job_id=None,
        detail=None,
    )
    return SourceState.from_row(state, decode_time)


class SourceStates:
    def __init__(self, db: Driver) -> None:
        self._db = db

    async def list_source_states(self) -> list[SourceState]:
        """Every source an operator ever paused or resumed."""
        return [SourceState.from_row(r, self._db.decode_time) for r in await self._db.rows(_LIST)]

    async def set_source_paused(
        self, source: str, *, paused: bool, reason: str | None, actor: str
    ) -> SourceState:
        """Pause or resume a source (and audit it); every receiver sees it on refresh."""
        return await self._db.run(_set_paused(source, paused, reason, actor, self._db.decode_time))
