"""Notices: what a notifier should be told about, read from durable facts, and written to
the outbox under a stable key so that the relay sends each one once.

The facts are already in the store: failed jobs (``failed_at``), pauses in the audit
(``operator_actions``), kept rejected deliveries (``last_seen_at``), a destination's
circuit opening (``destinations.last_opened_at``). A sweep reads them,
per minute, over a lookback, and the caller folds minutes into windows; each notice is
an outbox row keyed by its window, inserted ``ON CONFLICT DO NOTHING``: sweeping the
same facts again writes nothing, and a notifier's hourly budget is counted in the same
transaction as the inserts.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hookinbox.store.sql import Tx, count, value
from hookinbox.store.statements import load_statements

if TYPE_CHECKING:
    from hookinbox.store.driver import Driver


@dataclass(frozen=True, slots=True)
class FactGroup:
    """Facts of one (source, subject, reason) in one minute."""

    source: str
    subject: str
    reason: str
    minute: int
    count: int
    actor: str | None = None


@dataclass(frozen=True, slots=True)
class NewNotice:
    key: str
    kind: str
    source: str
    body: dict[str, Any]


_SQL = load_statements("notices")
_DEAD_LETTERS = _SQL["dead_letters"]
_PAUSES = _SQL["pauses"]
_REJECTED = _SQL["rejected"]
#: A circuit's last opening (kept when it closes again): no source, the destination as
#: the subject.
_CIRCUITS = _SQL["circuits"]
_QUERIES = {
    "dead_letter": _DEAD_LETTERS,
    "source_paused": _PAUSES,
    "rejected_delivery": _REJECTED,
    "circuit_open": _CIRCUITS,
}
_SENT_LAST_HOUR = _SQL["sent_last_hour"]
_EXISTS = _SQL["exists"]
_INSERT = _SQL["insert"]


def _write(kind: str, notices: list[NewNotice], max_per_hour: int) -> Tx[tuple[int, int]]:
    """Insert what is new within the hour's budget: ``(written, held back)``."""
    sent = int((yield value(_SENT_LAST_HOUR, kind=kind, hour=3600.0)) or 0)
    written = held = 0
    for notice in notices:
        if (yield value(_EXISTS, key=notice.key)):
            continue
        if sent + written >= max_per_hour:
            held += 1
            continue
        body = json.dumps(notice.body, separators=(",", ":"))
        written += yield count(_INSERT, key=notice.key, kind=kind, source=notice.source, body=body)
    return written, held


class Notices:
    def __init__(self, db: Driver) -> None:
        self._db = db

    async def fact_groups(
        self, kind: str, lookback_seconds: float, limit: int = 1000
    ) -> list[FactGroup]:
        """Facts of ``kind`` (``dead_letter``, ``source_paused``, ``rejected_delivery``)
        in the lookback, per (source, subject, reason, minute), oldest first."""
        sql = _QUERIES.get(kind)
        if sql is None:
            return []
        found = await self._db.rows(sql, lookback=float(lookback_seconds), limit=limit)
        return [
            FactGroup(
                source=r["source"],
                subject=r["subject"],
                reason=r["reason"],
                minute=int(r["minute"]),
                count=int(r["n"]),
                actor=r["actor"],
            )
            for r in found
        ]

    async def write_notices(
        self, kind: str, notices: list[NewNotice], max_per_hour: int
    ) -> tuple[int, int]:
        """Write the notices not yet in the outbox, at most ``max_per_hour`` of ``kind``
        (the outbox kind, ``notify:NAME``) an hour: ``(written, held back)``."""
        if not notices:
            return 0, 0
        return await self._db.run(_write(kind, notices, max_per_hour))
