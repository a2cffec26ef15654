"""The transactional outbox: notifications written in the transition's own commit, sent by
the relay with bounded retries under their stable key.

The relay leases due rows like workers lease jobs (``FOR UPDATE SKIP LOCKED`` on
PostgreSQL), each claim counting an attempt; a row whose lease ran out on its last
attempt is a dead letter (``lease_expired``), sent again only on an operator's request.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hookinbox.codes import JobCode
from hookinbox.errors import NotFound, OperationRefused
from hookinbox.store.hot_path import new_lease_token
from hookinbox.store.resource_records import ClaimedOutbox, OutboxState, OutboxView
from hookinbox.store.sql import DecodeTime, Tx, count, row, rows
from hookinbox.store.statements import load_statements

if TYPE_CHECKING:
    from hookinbox.store.driver import Driver

_SQL = load_statements("outbox")
_EXHAUSTED = _SQL["exhausted"]
_CLAIM = _SQL["claim"]
_FINISH = _SQL["finish"]
_RENEW = _SQL["renew"]
_STATE = _SQL["state"]
_REQUEUE = _SQL["requeue"]
_GET = _SQL["get"]
_LIST = _SQL["list"]


def _claim(
    worker: str, limit: int, lease_seconds: float, max_attempts: int, token: str, only: bool
) -> Tx[list[ClaimedOutbox]]:
    yield count(_EXHAUSTED, error=JobCode.LEASE_EXPIRED, max=max_attempts)
    leased = yield rows(
        _CLAIM,
        token=token,
        worker=worker,
        lease=lease_seconds,
        max=max_attempts,
        limit=limit,
        only_notices=only,
    )
    return [ClaimedOutbox.from_row(r, token) for r in leased]


def _requeue(key: str, only_failed: bool, decode_time: DecodeTime) -> Tx[OutboxView]:
    found = yield row(_STATE, key=key)
    if found is None:
        raise NotFound(f"no outbox row {key!r}")
    if only_failed and found["state"] != "failed":
        raise OperationRefused(f"outbox row is {found['state']}, not failed")
    if found["state"] == "sending":
        raise OperationRefused("outbox row is being sent right now")
    return OutboxView.from_row((yield row(_REQUEUE, key=key)), decode_time)


class Outbox:
    def __init__(self, db: Driver) -> None:
        self._db = db

    async def claim_outbox(
        self,
        worker_id: str,
        limit: int,
        lease_seconds: float,
        max_attempts: int,
        *,
        only_notices: bool = False,
    ) -> list[ClaimedOutbox]:
        """Lease due outbox rows (pending and due, or sending with an expired lease and
        attempts left); each claim counts an attempt. Rows whose lease expired on their
        last attempt are dead-lettered (``lease_expired``). ``only_notices``: only
        ``notify:*`` rows (a relay with notifiers but no outbox sender)."""
        tx = _claim(
            worker_id, limit, float(lease_seconds), max_attempts, new_lease_token(), only_notices
        )
        return await self._db.run(tx)

    async def finish_outbox(
        self,
        key: str,
        lease_token: str,
        state: OutboxState,
        *,
        error_code: str | None = None,
        delay_seconds: float = 0.0,
    ) -> bool:
        """``sent``, back to ``pending`` after ``delay_seconds``, or ``failed``; only with
        the lease token. False when the lease was lost."""
        changed = await self._db.count(
            _FINISH,
            key=key,
            token=lease_token,
            state=state,
            error=error_code,
            delay=float(delay_seconds),
        )
        return changed == 1

    async def renew_outbox_lease(self, key: str, lease_token: str, lease_seconds: float) -> bool:
        """Extend a row's lease while it is being sent; False when the lease was lost."""
        changed = await self._db.count(
            _RENEW, key=key, token=lease_token, lease=float(lease_seconds)
        )
        return changed == 1

    async def requeue_outbox(self, key: str, *, only_failed: bool) -> OutboxView:
        """Send an existing row again, due now, attempts reset (the resource is not
        touched). ``only_failed``: refuse a row that is not a dead letter. NotFound."""
        return await self._db.run(_requeue(key, only_failed, self._db.decode_time))

    async def get_outbox(self, key: str) -> OutboxView | None:
        found = await self._db.row(_GET, key=key)
        return OutboxView.from_row(found, self._db.decode_time) if found else None

    async def list_outbox(
        self,
        *,
        state: OutboxState | None = None,
        kind: str | None = None,
        limit: int = 50,
    ) -> list[OutboxView]:
        """Newest first."""
        found = await self._db.rows(_LIST, state=state, kind=kind, limit=limit)
        return [OutboxView.from_row(r, self._db.decode_time) for r in found]
