"""The receiver: raw body -> verified event -> reserved delivery and its jobs.

Each request verifies, parses and hashes on its own, then hands its row to the
:class:`ReservationBatcher` and awaits its answer. The batcher writes everything waiting
as one commit (the store's ``reserve_deliveries``), so a burst of N requests costs one
round trip instead of N. No request is answered before the commit that holds its row; a
failed commit fails every request of its batch, and the provider retries.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from hookinbox.config import Config, Route, store_kind
from hookinbox.errors import HookinboxError, SourcePaused, StoreUnavailable, UnknownSource
from hookinbox.ids import job_id, new_delivery_id
from hookinbox.logs import get_logger
from hookinbox.metrics import Metrics
from hookinbox.resources import ResourceRoutes, log_outcome
from hookinbox.store import NewDelivery, NewJob, Reservation, Store
from hookinbox.verify.base import Verifier
from hookinbox.verify.registry import build_verifier

log = get_logger("hookinbox.ingest")

#: Headers a forward passes on: the content type and the provider's own headers. Never
#: Authorization or cookies.
_KEPT_HEADER_PREFIXES = (
    "webhook-",
    "svix-",
    "stripe-",
    "x-github-",
    "x-hub-signature",
    "x-shopify-",
    "shopify-",
    "x-slack-",
)


@dataclass(frozen=True, slots=True)
class Receipt:
    """What the HTTP layer answers with."""

    status: str  # "accepted" | "duplicate" | "challenge"
    delivery_id: str | None = None
    conflict: bool = False
    event_id: str | None = None
    challenge: dict[str, Any] | None = None

    def as_json(self) -> dict[str, Any]:
        if self.challenge is not None:
            return self.challenge
        answer: dict[str, Any] = {"status": self.status, "delivery_id": self.delivery_id}
        if self.conflict:
            answer["conflict"] = True
        return answer


class ReservationBatcher:
    """Group concurrent reservations into few commits; repeats inside a batch are folded.

    A flush takes everything waiting (up to ``max_batch``) after one turn of the event
    loop, so the requests that became ready together commit together. Up to
    ``max_in_flight`` flushes run at once: while one batch is on its way to the store,
    the next one gathers, and request parsing overlaps with the database round trip.
    """

    def __init__(
        self,
        store: Store,
        *,
        max_batch: int = 256,
        wait_seconds: float = 0.0,
        max_in_flight: int = 4,
    ):
        self._store = store
        self._max_batch = max_batch
        self._wait = wait_seconds
        self._max_in_flight = max_in_flight
        self._pending: list[tuple[NewDelivery, asyncio.Future[Reservation]]] = []
        self._in_flight = 0
        self._scheduled = False
        self._tasks: set[asyncio.Task[None]] = set()
        self._keys_in_flight: set[tuple[str, str]] = set()

    async def reserve(self, item: NewDelivery) -> Reservation:
        future: asyncio.Future[Reservation] = asyncio.get_running_loop().create_future()
        self._pending.append((item, future))
        self._schedule()
        return await future

    def _schedule(self) -> None:
        if self._scheduled or self._in_flight >= self._max_in_flight or not self._pending:
            return
        self._scheduled = True
        loop = asyncio.get_running_loop()
        if self._wait > 0:
            loop.call_later(self._wait, self._start_flush)
        else:
            loop.call_soon(self._start_flush)

    def _start_flush(self) -> None:
        self._scheduled = False
        if not self._pending or self._in_flight >= self._max_in_flight:
            return
        # An event already on its way to the store waits for that batch: two batches
        # touching the same journal row would only queue on its lock (or deadlock).
        batch: list[tuple[NewDelivery, asyncio.Future[Reservation]]] = []
        held: list[tuple[NewDelivery, asyncio.Future[Reservation]]] = []
        keys: set[tuple[str, str]] = set()
        for entry in self._pending:
            key = (entry[0].source, entry[0].event_id)
            if len(batch) >= self._max_batch or key in self._keys_in_flight:
                held.append(entry)
            else:
                batch.append(entry)
                keys.add(key)
        self._pending = held
        if not batch:
            return
        self._keys_in_flight |= keys
        self._in_flight += 1
        task = asyncio.get_running_loop().create_task(self._flush(batch))
        self._tasks.add(task)
        task.add_done_callback(lambda done: self._flush_done(done, keys))
        self._schedule()

    def _flush_done(self, task: asyncio.Task[None], keys: set[tuple[str, str]]) -> None:
        self._tasks.discard(task)
        self._keys_in_flight -= keys
        self._in_flight -= 1
        self._schedule()

    async def _flush(self, batch: list[tuple[NewDelivery, asyncio.Future[Reservation]]]) -> None:
        leaders: dict[tuple[str, str, str], NewDelivery] = {}
        followers: dict[tuple[str, str, str], int] = {}
        for item, _ in batch:
            key = (item.source, item.event_id, item.body_sha256)
            if key in leaders:
                followers[key] = followers.get(key, 0) + 1
            else:
                leaders[key] = item
        # Sorted by key: concurrent receivers then take journal row locks in one order.
        unique = [
            _with_seen(item, 1 + followers.get(key, 0)) if key in followers else item
            for key, item in sorted(leaders.items())
        ]
        try:
            answers = await self._store.reserve_deliveries(unique)
        except HookinboxError as exc:
            failure = exc if isinstance(exc, StoreUnavailable) else StoreUnavailable()
            for _, future in batch:
                if not future.done():
                    future.set_exception(failure)
            log.error("reserve_failed", batch=len(batch), error=exc.code)
            return
        except BaseException as exc:
            for _, future in batch:
                if not future.done():
                    future.set_exception(StoreUnavailable())
            if isinstance(exc, asyncio.CancelledError):
                raise
            # No traceback: its frames' locals hold this batch's bodies and headers.
            log.error("reserve_crashed", batch=len(batch), error=type(exc).__name__)
            return
        by_key = {
            (item.source, item.event_id, item.body_sha256): answer
            for item, answer in zip(unique, answers, strict=True)
        }
        for item, future in batch:
            answer = by_key[(item.source, item.event_id, item.body_sha256)]
            if item.id != answer.delivery_id and answer.outcome == "accepted":
                # A repeat folded into this batch's first delivery of the same event.
                answer = Reservation("duplicate", answer.delivery_id, False, item.body_sha256)
            if not future.done():
                future.set_result(answer)


def _with_seen(item: NewDelivery, seen: int) -> NewDelivery:
    return NewDelivery(
        id=item.id,
        source=item.source,
        event_id=item.event_id,
        event_type=item.event_type,
        body_sha256=item.body_sha256,
        body=item.body,
        headers=item.headers,
        jobs=item.jobs,
        max_attempts=item.max_attempts,
        seen=seen,
    )


def kept_headers(headers: Mapping[str, str]) -> dict[str, str]:
    kept = {k: v for k, v in headers.items() if k.startswith(_KEPT_HEADER_PREFIXES)}
    if "content-type" in headers:
        kept["content-type"] = headers["content-type"]
    return kept


class Receiver:
    """Authenticate, identify and reserve one delivery of one source."""

    def __init__(
        self,
        config: Config,
        store: Store,
        *,
        clock: Callable[[], float] = time.time,
        paused: Callable[[str], bool] = lambda source: False,
        metrics: Metrics | None = None,
    ) -> None:
        self._config = config
        self.metrics = metrics or Metrics(config.sources)
        self._clock = clock
        self._paused = paused
        self._verifiers: dict[str, Verifier] = {
            name: build_verifier(name, source) for name, source in config.sources.items()
        }
        self._store = store
        self._resources = ResourceRoutes(config)
        self._routes_cache: dict[tuple[str, str], list[Route]] = {}
        self.batcher = ReservationBatcher(
            store,
            max_batch=config.server.batch_max,
            wait_seconds=config.server.batch_wait_ms / 1000,
            max_in_flight=config.server.batch_in_flight
            or (1 if store_kind(config.database) == "sqlite" else 4),
        )

    async def _reserve(self, item: NewDelivery, payload: Mapping[str, Any]) -> Reservation:
        """Routes marked ``inline`` apply their resource event in the reservation's own
        commit, so the 2xx means the transition is durable; all else goes through the
        batcher."""
        applies = self._resources.inline_applies(item, payload)
        if not applies:
            return await self.batcher.reserve(item)
        reservation, outcomes = await self._store.reserve_inline(item, applies)
        for outcome in outcomes:
            log_outcome(outcome, delivery_id=item.id, source=item.source, inline=True)
        return reservation

    def _routes_for(self, source_name: str, event_type: str) -> list[Route]:
        """Glob matching once per (source, type): signed types are few, and this is the
        hot path. Bounded, so a provider inventing types cannot grow it without limit."""
        key = (source_name, event_type)
        routes = self._routes_cache.get(key)
        if routes is None:
            source = self._config.sources[source_name]
            routes = source.routes_for(event_type)
            if len(self._routes_cache) < 10_000:
                self._routes_cache[key] = routes
        return routes

    def max_body_bytes(self, source_name: str) -> int:
        source = self._config.source(source_name)
        if source is None:
            raise UnknownSource()
        return source.max_body_bytes

    async def receive(self, source_name: str, body: bytes, headers: Mapping[str, str]) -> Receipt:
        """``headers`` must have lower-case names. Raises a HookinboxError to refuse."""
        source = self._config.source(source_name)
        if source is None:
            raise UnknownSource()
        if self._paused(source_name):
            raise SourcePaused()
        event = self._verifiers[source_name].verify(body, headers, now=self._clock())
        if event.challenge_response is not None:
            return Receipt("challenge", challenge=event.challenge_response)
        delivery_id = new_delivery_id()
        body_sha256 = hashlib.sha256(body).hexdigest()
        routes = self._routes_for(source_name, event.event_type)
        reservation = await self._reserve(
            NewDelivery(
                id=delivery_id,
                source=source_name,
                event_id=event.event_id,
                event_type=event.event_type,
                body_sha256=body_sha256,
                body=body,
                headers=kept_headers(headers),
                jobs=tuple(NewJob(job_id(delivery_id, r.action), r.action) for r in routes),
                max_attempts=self._config.worker.max_attempts,
            ),
            event.payload,
        )
        if reservation.conflict:
            log.warning(
                "event_id_conflict",
                source=source_name,
                event_id=event.event_id,
                delivery_id=reservation.delivery_id,
                first_body_sha256=reservation.first_body_sha256,
                body_sha256=body_sha256,
            )
        log.info(
            "receipt",
            source=source_name,
            event_id=event.event_id,
            type=event.event_type,
            delivery_id=reservation.delivery_id,
            outcome=reservation.outcome,
            body_sha256=body_sha256,
            jobs=len(routes) if reservation.outcome == "accepted" else 0,
        )
        return Receipt(
            reservation.outcome,
            reservation.delivery_id,
            conflict=reservation.conflict,
            event_id=event.event_id,
        )
