"""The effects ledger: one row per stable business key, so an external effect is made once.

A handler starts a key before making its effect and records the small JSON result
after; a retry after a crash finds the record (or the handler's ``find`` looks the result
up by the key) instead of making a copy. ``replay --force-effects`` sets the rows of its
jobs aside (``effects_superseded``) so the next run makes their effects again.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from hookinbox.store.records import EffectRecord, EffectStart
from hookinbox.store.sql import DecodeTime, Tx, count, row, rows
from hookinbox.store.statements import load_statements

if TYPE_CHECKING:
    from hookinbox.store.driver import Driver

_SQL = load_statements("effects")
_GET = _SQL["get"]
_START = _SQL["start"]
_HELD = _SQL["held"]
_RECORD = _SQL["record"]
_RELEASE = _SQL["release"]
_OF_JOBS = _SQL["of_jobs"]
_SET_ASIDE = _SQL["set_aside"]
_DROP = _SQL["drop"]


def _start(key: str, job_id: str, decode_time: DecodeTime) -> Tx[EffectStart]:
    created = (yield count(_START, key=key, job_id=job_id)) == 1
    record = EffectRecord.from_row((yield row(_GET, key=key)), decode_time)
    live = False
    if not created and record.state == "started" and record.job_id != job_id:
        live = (yield row(_HELD, id=record.job_id)) is not None
    return EffectStart(record, created, live)


def _record(key: str, result: Any, decode_time: DecodeTime) -> Tx[EffectRecord]:
    yield count(_RECORD, key=key, result=json.dumps(result))
    return EffectRecord.from_row((yield row(_GET, key=key)), decode_time)


def _supersede(job_ids: Sequence[str], actor: str) -> Tx[list[str]]:
    yield count(_SET_ASIDE, ids=list(job_ids), actor=actor)
    gone = yield rows(_DROP, ids=list(job_ids))
    return sorted(each["key"] for each in gone)


class Effects:
    def __init__(self, db: Driver) -> None:
        self._db = db

    async def get_effect(self, key: str) -> EffectRecord | None:
        found = await self._db.row(_GET, key=key)
        return EffectRecord.from_row(found, self._db.decode_time) if found else None

    async def start_effect(self, key: str, job_id: str) -> EffectStart:
        """Record that ``job_id`` is about to make the effect under ``key``, unless the key
        is already known; say how the record stands now and who holds it."""
        return await self._db.run(_start(key, job_id, self._db.decode_time), atomic=False)

    async def record_effect(self, key: str, result: Any) -> EffectRecord:
        """Store the effect's small JSON result; the first recorded result wins."""
        return await self._db.run(_record(key, result, self._db.decode_time), atomic=False)

    async def release_effect(self, key: str, job_id: str) -> bool:
        """Forget ``key`` when ``job_id`` started it and it is not recorded: the effect
        certainly did not begin (a forward that never connected). Whether it was."""
        return bool(await self._db.count(_RELEASE, key=key, job_id=job_id))

    async def list_effects(self, job_ids: Sequence[str]) -> list[EffectRecord]:
        """Ledger rows started by these jobs, oldest first."""
        found = await self._db.rows(_OF_JOBS, ids=list(job_ids))
        return [EffectRecord.from_row(r, self._db.decode_time) for r in found]

    async def supersede_effects(self, job_ids: Sequence[str], *, actor: str) -> list[str]:
        """Move the ledger rows made by these jobs to ``effects_superseded`` so the next run
        makes their effects again (``replay --force-effects``); return their keys."""
        return await self._db.run(_supersede(job_ids, actor))
