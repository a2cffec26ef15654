"""SQLite: the store gauges behind /metrics and the admin's read-only lists.

A mixin of :class:`~hookinbox.store.sqlite.SQLiteStore`. Lists are keyset-paginated on
the primary key (delivery and job ids are time-ordered), never OFFSET. Tables added by
later migrations (pause state, parked events, outbox) read as 0 until they exist.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING, Any

from hookinbox.ids import delivery_id_floor
from hookinbox.store.base import DeliveryView
from hookinbox.store.metrics_records import DeadLetter, DeliverySearch, StoreGaugeReadings
from hookinbox.store.sqlite_clock import NOW

if TYPE_CHECKING:
    from hookinbox.store.sqlite import _DatabaseThread

_QUEUE = """
SELECT source, count(*) AS depth,
       max(CASE WHEN state = 'accepted' AND next_attempt_at <= {now}
                THEN {now} - next_attempt_at ELSE 0 END) AS lag
FROM jobs WHERE state IN ('accepted', 'processing') GROUP BY source
"""

_DEAD = "SELECT source, count(*) AS n FROM jobs WHERE state = 'failed' GROUP BY source"

_PAUSED = "SELECT source, {now} - changed_at AS seconds FROM source_state WHERE paused = 1"

_PARKED = "SELECT source, count(*) AS n FROM parked_events GROUP BY source"

_UNSENT = (
    "SELECT coalesce(source, '_none') AS source, state = 'failed' AS failed, count(*) AS n"
    " FROM outbox WHERE state <> 'sent' GROUP BY 1, 2"
)

_PER_MINUTE = """
SELECT source, CAST(first_seen_at / 60 AS INTEGER) AS minute, count(*) AS n
FROM deliveries WHERE id >= :floor GROUP BY source, minute ORDER BY minute
"""

_DEAD_LETTERS = """
SELECT j.id, j.delivery_id, j.source, j.action, j.attempts, j.last_error, j.failed_at,
       d.event_id, d.event_type
FROM jobs j JOIN deliveries d ON d.id = j.delivery_id
WHERE j.state = 'failed'
  AND (:source IS NULL OR j.source = :source)
  AND (:reason IS NULL OR j.last_error = :reason)
  AND (:before IS NULL OR j.id < :before)
ORDER BY j.id DESC LIMIT :limit
"""

_REASONS = """
SELECT source, action, coalesce(last_error, '') AS reason, count(*) AS n
FROM jobs WHERE state = 'failed' GROUP BY source, action, reason ORDER BY n DESC, reason
"""


def _has_table(conn: sqlite3.Connection, name: str) -> bool:
    row = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)
    ).fetchone()
    return row is not None


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


class SQLiteMetricsMixin:
    if TYPE_CHECKING:
        _db: _DatabaseThread

    async def read_store_gauges(self) -> StoreGaugeReadings:
        def run(conn: sqlite3.Connection) -> StoreGaugeReadings:
            queue = conn.execute(_QUEUE.format(now=NOW)).fetchall()
            dead = conn.execute(_DEAD).fetchall()
            paused: dict[str, float] = {}
            if _has_table(conn, "source_state"):
                paused = {
                    r["source"]: max(0.0, float(r["seconds"]))
                    for r in conn.execute(_PAUSED.format(now=NOW))
                }
            parked: dict[str, int] = {}
            if _has_table(conn, "parked_events"):
                parked = {r["source"]: int(r["n"]) for r in conn.execute(_PARKED)}
            unsent: dict[str, int] = {}
            failed: dict[str, int] = {}
            if _has_table(conn, "outbox"):
                for r in conn.execute(_UNSENT):
                    (failed if r["failed"] else unsent)[r["source"]] = int(r["n"])
            return StoreGaugeReadings(
                queue_depth={r["source"]: int(r["depth"]) for r in queue},
                lag_seconds={r["source"]: max(0.0, float(r["lag"] or 0)) for r in queue},
                dead_letters={r["source"]: int(r["n"]) for r in dead},
                parked=parked,
                outbox_unsent=unsent,
                outbox_failed=failed,
                paused_seconds=paused,
            )

        return await self._db.run(run)

    async def deliveries_per_minute(self, since: float) -> list[tuple[str, int, int]]:
        def run(conn: sqlite3.Connection) -> list[tuple[str, int, int]]:
            rows = conn.execute(_PER_MINUTE, {"floor": delivery_id_floor(since)}).fetchall()
            return [(r["source"], int(r["minute"]), int(r["n"])) for r in rows]

        return await self._db.run(run)

    async def search_deliveries(self, query: DeliverySearch) -> list[DeliveryView]:
        from hookinbox.store.sqlite import _DELIVERY_COLUMNS, _STATUS, _delivery

        params: dict[str, Any] = {
            "ref": query.ref,
            "source": query.source,
            "type": query.event_type,
            "status": query.status,
            "floor": delivery_id_floor(query.since) if query.since is not None else None,
            "ceiling": delivery_id_floor(query.until) if query.until is not None else None,
            "before": query.before,
            "limit": query.limit,
        }
        sql = (
            f"SELECT {_DELIVERY_COLUMNS},"
            " (SELECT group_concat(state) FROM (SELECT state FROM jobs j"
            "  WHERE j.delivery_id = d.id ORDER BY action)) AS states"
            " FROM deliveries d"
            f" WHERE {_BY_REF if query.ref is not None else '1'}"
            f" AND {_BY_STATE.get(query.status or '', '1')}"
            " AND (:source IS NULL OR d.source = :source)"
            " AND (:type IS NULL OR d.event_type = :type)"
            " AND (:floor IS NULL OR d.id >= :floor)"
            " AND (:ceiling IS NULL OR d.id < :ceiling)"
            " AND (:before IS NULL OR d.id < :before)"
            f" AND (:status IS NULL OR {_STATUS} = :status)"
            " ORDER BY d.id DESC LIMIT :limit"
        )

        def run(conn: sqlite3.Connection) -> list[DeliveryView]:
            rows = conn.execute(sql, params).fetchall()
            return [
                _delivery(r, job_states=tuple(r["states"].split(",")) if r["states"] else ())
                for r in rows
            ]

        return await self._db.run(run)

    async def list_dead_letters(
        self,
        *,
        source: str | None = None,
        reason: str | None = None,
        before: str | None = None,
        limit: int = 50,
    ) -> list[DeadLetter]:
        from hookinbox.store.sqlite import _time

        params = {"source": source, "reason": reason, "before": before, "limit": limit}

        def run(conn: sqlite3.Connection) -> list[DeadLetter]:
            return [
                DeadLetter(
                    job_id=r["id"],
                    delivery_id=r["delivery_id"],
                    source=r["source"],
                    action=r["action"],
                    event_id=r["event_id"],
                    event_type=r["event_type"],
                    attempts=r["attempts"],
                    last_error=r["last_error"],
                    failed_at=_time(r["failed_at"]),
                )
                for r in conn.execute(_DEAD_LETTERS, params).fetchall()
            ]

        return await self._db.run(run)

    async def dead_letter_reasons(self) -> list[tuple[str, str, str, int]]:
        def run(conn: sqlite3.Connection) -> list[tuple[str, str, str, int]]:
            return [
                (r["source"], r["action"], r["reason"], int(r["n"]))
                for r in conn.execute(_REASONS).fetchall()
            ]

        return await self._db.run(run)

    async def read_payload(self, delivery_id: str) -> bytes | None:
        def run(conn: sqlite3.Connection) -> bytes | None:
            row = conn.execute(
                "SELECT body FROM payloads WHERE delivery_id = ?", (delivery_id,)
            ).fetchone()
            return bytes(row["body"]) if row is not None else None

        return await self._db.run(run)
