"""PostgreSQL: the store gauges behind /metrics and the admin's read-only lists.

A mixin of :class:`~hookinbox.store.postgres.PostgresStore`. Lists are keyset-paginated
on the primary key (delivery and job ids are time-ordered), never OFFSET. Tables added
by later migrations (pause state, parked events, outbox) read as 0 until they exist
(``to_regclass`` honours the connection's search_path).
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any

from hookinbox.ids import delivery_id_floor
from hookinbox.store.base import DeliveryView
from hookinbox.store.metrics_records import DeadLetter, DeliverySearch, StoreGaugeReadings

if TYPE_CHECKING:
    import asyncpg

_QUEUE = """
SELECT source, count(*) AS depth,
       coalesce(extract(epoch FROM now() - min(next_attempt_at)
                FILTER (WHERE state = 'accepted' AND next_attempt_at <= now())), 0) AS lag
FROM jobs WHERE state IN ('accepted', 'processing') GROUP BY source
"""

_DEAD = "SELECT source, count(*) AS n FROM jobs WHERE state = 'failed' GROUP BY source"

_PAUSED = """
SELECT source, extract(epoch FROM now() - changed_at) AS seconds
FROM source_state WHERE paused
"""

_PARKED = "SELECT source, count(*) AS n FROM parked_events GROUP BY source"

_UNSENT = """
SELECT coalesce(source, '_none') AS source, state = 'failed' AS failed, count(*) AS n
FROM outbox WHERE state <> 'sent' GROUP BY 1, 2
"""

_TABLES = "SELECT to_regclass('source_state'), to_regclass('parked_events'), to_regclass('outbox')"

_PER_MINUTE = """
SELECT source, (extract(epoch FROM date_trunc('minute', first_seen_at)) / 60)::bigint AS minute,
       count(*) AS n
FROM deliveries WHERE id >= $1 GROUP BY 1, 2 ORDER BY 2
"""

_SEARCH = """
SELECT d.id, d.source, d.event_id, d.event_type, d.body_sha256, d.first_seen_at,
       d.last_seen_at, d.delivery_count, d.conflicts,
       EXISTS (SELECT 1 FROM payloads p WHERE p.delivery_id = d.id) AS payload_retained,
       s.states
FROM deliveries d
CROSS JOIN LATERAL (
    SELECT coalesce(array_agg(j.state ORDER BY j.action), '{{}}') AS states,
           CASE WHEN bool_or(j.state = 'failed') THEN 'failed'
                WHEN bool_or(j.state = 'processing') THEN 'processing'
                WHEN coalesce(bool_and(j.state = 'completed'), true) THEN 'completed'
                ELSE 'accepted' END AS status
    FROM jobs j WHERE j.delivery_id = d.id
) s
WHERE {by_ref} AND {by_state}
  AND ($2::text IS NULL OR d.source = $2)
  AND ($3::text IS NULL OR d.event_type = $3)
  AND ($4::text IS NULL OR s.status = $4)
  AND ($5::text IS NULL OR d.id >= $5)
  AND ($6::text IS NULL OR d.id < $6)
  AND ($7::text IS NULL OR d.id < $7)
ORDER BY d.id DESC
LIMIT $8
"""

# Search filters chosen from constants (never from input), so a search by id or by a
# rare status walks an index instead of the whole journal.
_BY_REF = (
    "d.id IN (SELECT id FROM deliveries WHERE id = $1"
    " UNION ALL SELECT id FROM deliveries WHERE event_id = $1)"
)
_BY_STATE = {
    "failed": "d.id IN (SELECT delivery_id FROM jobs WHERE state = 'failed')",
    "processing": "d.id IN (SELECT delivery_id FROM jobs WHERE state = 'processing')",
}
_SEARCHES = {
    (has_ref, state): _SEARCH.format(
        by_ref=_BY_REF if has_ref else "$1::text IS NULL",
        by_state=_BY_STATE.get(state or "", "TRUE"),
    )
    for has_ref in (True, False)
    for state in (None, "failed", "processing", "accepted", "completed")
}

_DEAD_LETTERS = """
SELECT j.id, j.delivery_id, j.source, j.action, j.attempts, j.last_error, j.failed_at,
       d.event_id, d.event_type
FROM jobs j JOIN deliveries d ON d.id = j.delivery_id
WHERE j.state = 'failed'
  AND ($1::text IS NULL OR j.source = $1)
  AND ($2::text IS NULL OR j.last_error = $2)
  AND ($3::text IS NULL OR j.id < $3)
ORDER BY j.id DESC LIMIT $4
"""

_REASONS = """
SELECT source, action, coalesce(last_error, '') AS reason, count(*) AS n
FROM jobs WHERE state = 'failed' GROUP BY 1, 2, 3 ORDER BY n DESC, reason
"""


class PostgresMetricsMixin:
    if TYPE_CHECKING:

        def _conn(self) -> AbstractAsyncContextManager[asyncpg.Connection]: ...

    async def read_store_gauges(self) -> StoreGaugeReadings:
        async with self._conn() as conn:
            queue = await conn.fetch(_QUEUE)
            dead = await conn.fetch(_DEAD)
            has_pause, has_parked, has_outbox = await conn.fetchrow(_TABLES)
            paused: dict[str, float] = {}
            if has_pause is not None:
                paused = {
                    r["source"]: max(0.0, float(r["seconds"])) for r in await conn.fetch(_PAUSED)
                }
            parked: dict[str, int] = {}
            if has_parked is not None:
                parked = {r["source"]: int(r["n"]) for r in await conn.fetch(_PARKED)}
            unsent: dict[str, int] = {}
            failed: dict[str, int] = {}
            if has_outbox is not None:
                for r in await conn.fetch(_UNSENT):
                    (failed if r["failed"] else unsent)[r["source"]] = int(r["n"])
        return StoreGaugeReadings(
            queue_depth={r["source"]: int(r["depth"]) for r in queue},
            lag_seconds={r["source"]: max(0.0, float(r["lag"])) for r in queue},
            dead_letters={r["source"]: int(r["n"]) for r in dead},
            parked=parked,
            outbox_unsent=unsent,
            outbox_failed=failed,
            paused_seconds=paused,
        )

    async def deliveries_per_minute(self, since: float) -> list[tuple[str, int, int]]:
        async with self._conn() as conn:
            rows = await conn.fetch(_PER_MINUTE, delivery_id_floor(since))
        return [(r["source"], int(r["minute"]), int(r["n"])) for r in rows]

    async def search_deliveries(self, query: DeliverySearch) -> list[DeliveryView]:
        from hookinbox.store.postgres import _delivery

        args: list[Any] = [
            query.ref,
            query.source,
            query.event_type,
            query.status,
            delivery_id_floor(query.since) if query.since is not None else None,
            delivery_id_floor(query.until) if query.until is not None else None,
            query.before,
            query.limit,
        ]
        async with self._conn() as conn:
            rows = await conn.fetch(_SEARCHES[(query.ref is not None, query.status)], *args)
        return [_delivery(r, job_states=tuple(r["states"])) for r in rows]

    async def list_dead_letters(
        self,
        *,
        source: str | None = None,
        reason: str | None = None,
        before: str | None = None,
        limit: int = 50,
    ) -> list[DeadLetter]:
        async with self._conn() as conn:
            rows = await conn.fetch(_DEAD_LETTERS, source, reason, before, limit)
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
                failed_at=r["failed_at"],
            )
            for r in rows
        ]

    async def dead_letter_reasons(self) -> list[tuple[str, str, str, int]]:
        async with self._conn() as conn:
            rows = await conn.fetch(_REASONS)
        return [(r["source"], r["action"], r["reason"], int(r["n"])) for r in rows]

    async def read_payload(self, delivery_id: str) -> bytes | None:
        async with self._conn() as conn:
            body = await conn.fetchval(
                "SELECT body FROM payloads WHERE delivery_id = $1", delivery_id
            )
        return bytes(body) if body is not None else None


__all__ = ["PostgresMetricsMixin"]
