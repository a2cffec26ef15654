"""Admin sessions ended by a logout, shared by every process on the store.

A session cookie is signed, so any process with the admin token accepts it; a logout
must therefore be a row every process reads, not a set in one process's memory. Rows
past their session's expiry are useless and go at the next logout (the table holds
only sessions that are logged out and not yet expired: a handful).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hookinbox.store.statements import load_statements

if TYPE_CHECKING:
    from hookinbox.store.driver import Driver

_SQL = load_statements("admin_sessions")
_FORGET_EXPIRED = _SQL["forget_expired"]
_REVOKE = _SQL["revoke"]
_IS_REVOKED = _SQL["is_revoked"]


class AdminSessions:
    def __init__(self, db: Driver) -> None:
        self._db = db

    async def revoke(self, session_id: str, seconds_left: float) -> None:
        """End ``session_id`` for the ``seconds_left`` its cookie would still be valid."""
        await self._db.count(_FORGET_EXPIRED)
        if seconds_left > 0:  # an expired cookie is refused anyway
            await self._db.count(_REVOKE, session_id=session_id, ttl=seconds_left)

    async def is_revoked(self, session_id: str) -> bool:
        return await self._db.row(_IS_REVOKED, session_id=session_id) is not None
