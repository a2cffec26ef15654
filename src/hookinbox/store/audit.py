"""The operator audit: who ran which command on what (ids and short codes, never a payload).

Operator commands that change state write their audit line in their own transaction
(requeue, pause); :meth:`Audit.record_operator_action` is for the rest.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hookinbox.store.operator_records import OperatorAction
from hookinbox.store.statements import load_statements

if TYPE_CHECKING:
    from hookinbox.store.driver import Driver

_SQL = load_statements("audit")
AUDIT = _SQL["audit"]
_LIST = _SQL["list"]


class Audit:
    def __init__(self, db: Driver) -> None:
        self._db = db

    async def record_operator_action(
        self,
        *,
        actor: str,
        command: str,
        source: str | None = None,
        delivery_id: str | None = None,
        job_id: str | None = None,
        detail: str | None = None,
    ) -> None:
        await self._db.count(
            AUDIT,
            actor=actor,
            command=command,
            source=source,
            delivery_id=delivery_id,
            job_id=job_id,
            detail=detail,
        )

    async def list_operator_actions(
        self, *, delivery_id: str | None = None, limit: int = 100
    ) -> list[OperatorAction]:
        """The audit, oldest first (of one delivery and its jobs when given)."""
        found = await self._db.rows(_LIST, delivery_id=delivery_id, limit=limit)
        return [OperatorAction.from_row(r, self._db.decode_time) for r in found]
