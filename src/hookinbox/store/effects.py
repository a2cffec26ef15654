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
from hookinbox.store.sql import DecodeTime, Sql, Tx, count, row, rows

if TYPE_CHECKING:
    from hookinbox.store.driver import Driver

_COLUMNS = "key, state, job_id, result, created_at, recorded_at"
_GET = Sql(f"SELECT {_COLUMNS} FROM effects WHERE key = :key")
_START = Sql(
    "INSERT INTO effects (key, job_id, state, created_at) VALUES (:key, :job_id, 'started', {now})"
    " ON CONFLICT (key) DO NOTHING"
)
_HELD = Sql(
    "SELECT 1 FROM jobs WHERE id = :id AND state = 'processing' AND lease_expires_at > {now}"
)
_RECORD = Sql(
    "INSERT INTO effects (key, job_id, state, result, created_at, recorded_at)"
    " VALUES (:key, NULL, 'recorded', :result, {now}, {now})"
    " ON CONFLICT (key) DO UPDATE SET state = 'recorded', result = excluded.result,"
    " recorded_at = excluded.recorded_at WHERE effects.state = 'started'"
)
_RELEASE = Sql("DELETE FROM effects WHERE key = :key AND job_id = :job_id AND state = 'started'")
_OF_JOBS = Sql(f"SELECT {_COLUMNS} FROM effects WHERE job_id {{in:ids}} ORDER BY created_at, key")
_SET_ASIDE = Sql(
    "INSERT INTO effects_superseded"
    f" ({_COLUMNS}, superseded_at, superseded_by)"
    f" SELECT {_COLUMNS}, {{now}}, :actor FROM effects WHERE job_id {{in:ids}}"
)
_DROP = Sql("DELETE FROM effects WHERE job_id {in:ids} RETURNING key")


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
