"""The receiver: raw body -> verified event -> reserved delivery and its jobs.

Each request verifies, parses and hashes on its own, then hands its row to the
:class:`~hookinbox.receive.batcher.ReservationBatcher` and awaits its answer. Nothing
reaches the store before the edge (:mod:`hookinbox.verify.edge`, docs/edge.md) has
checked the body (as the verifier parses it), the id, the type and the kept headers,
once the signature holds.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from hookinbox.config import Config, Route, Source, store_kind
from hookinbox.errors import SourcePaused, UnknownSource, VerificationError
from hookinbox.ids import delivery_id_seconds, job_id, new_delivery_id
from hookinbox.logs import get_logger
from hookinbox.metrics import Metrics
from hookinbox.payload import string_at
from hookinbox.receive.batcher import ReservationBatcher
from hookinbox.receive.rejected_keeper import RejectedKeeper
from hookinbox.redaction import Redaction, keyed_hash, payload_bytes, without_signatures
from hookinbox.resources.service import ResourceRoutes, log_outcome
from hookinbox.routing import check_filters, filtered, order_key_of
from hookinbox.store import InlineApply, NewDelivery, NewJob, Reservation, Store
from hookinbox.tracing import TRACEPARENT, Tracing
from hookinbox.verify import edge
from hookinbox.verify.base import VerifiedEvent, Verifier, read_body
from hookinbox.verify.bodies import body_format
from hookinbox.verify.registry import build_verifier, credential_headers, signature_headers
from hookinbox.verify.twilio import EMPTY_TWIML

log = get_logger("hookinbox.ingest")


@dataclass(frozen=True, slots=True)
class PresetAnswer:
    """A source's own answer to an accepted or duplicate delivery (``[sources.NAME.answer]``,
    or the scheme's: empty TwiML for Twilio), rendered once at start-up."""

    status: int
    body: bytes
    content_type: bytes


def preset_answer(source: Source) -> PresetAnswer | None:
    answer = source.answer
    if answer is None:
        if source.scheme == "twilio":
            return PresetAnswer(200, EMPTY_TWIML, b"text/xml")
        return None
    if answer.text is not None:
        content_type = answer.content_type or "text/plain; charset=utf-8"
        return PresetAnswer(answer.status, answer.text.encode(), content_type.encode())
    return PresetAnswer(answer.status, orjson.dumps(answer.json_body), b"application/json")


@dataclass(slots=True)
class Receipt:
    """What the HTTP layer answers with. Made per delivery, so not frozen (see
    :class:`~hookinbox.store.records.NewDelivery`)."""

    status: str  # "accepted" | "duplicate" | "challenge"
    delivery_id: str | None = None
    conflict: bool = False
    event_id: str | None = None
    challenge: dict[str, Any] | None = None
    #: The source's own answer body, instead of ``as_json()``.
    preset: PresetAnswer | None = None

    def as_json(self) -> dict[str, Any]:
        if self.challenge is not None:
            return self.challenge
        answer: dict[str, Any] = {"status": self.status, "delivery_id": self.delivery_id}
        if self.conflict:
            answer["conflict"] = True
        return answer


class Receiver:
    """Authenticate, identify and reserve one delivery of one source. Its metrics and
    tracing are the inbox's (:func:`hookinbox.app.build_receiver`)."""

    def __init__(
        self,
        config: Config,
        store: Store,
        *,
        metrics: Metrics,
        tracing: Tracing,
        clock: Callable[[], float] = time.time,
        paused: Callable[[str], bool] = lambda source: False,
    ) -> None:
        self._config = config
        #: Spans of receipts and reservations (a no-op unless ``[otel] enabled``).
        self.tracing = tracing
        if self.tracing.enabled:
            self.receive = self._traced_receive  # type: ignore[method-assign]
        self.metrics = metrics
        self._clock = clock
        self._paused = paused
        self._verifiers: dict[str, Verifier] = {
            name: build_verifier(name, source) for name, source in config.sources.items()
        }
        self._answers = {name: preset_answer(source) for name, source in config.sources.items()}
        #: Every source's credential headers and the standard ones: dropped from every
        #: delivery, whichever source receives it, before anything is stored.
        self._credentials = credential_headers(config.sources)
        #: An ``hmac`` source's signature headers: kept and forwarded like a provider's.
        self._signature_headers = {
            name: found
            for name, source in config.sources.items()
            if (found := signature_headers(source))
        }
        self._store = store
        #: The key of redaction and subject hashes, when a source hashes anything (read
        #: now: a missing key stops the start, never a delivery).
        self._hash_key = config.privacy.hash_key() if config.needs_hash_key else None
        #: Sources that redact (theirs or a route's rules) or name a subject: only their
        #: deliveries pay for it.
        self._private = {
            name
            for name, source in config.sources.items()
            if source.redact or source.subject or any(r.redact for r in source.routes)
        }
        self._redactions: dict[tuple[str, tuple[str, ...]], Redaction] = {}
        #: Refusals for a signature or a timestamp, kept (bounded) for a retry.
        self.rejected = RejectedKeeper(config, store, self.metrics, hash_key=self._hash_key)
        self._resources = ResourceRoutes(config)
        check_filters(config, edge.is_kept_header)
        #: Sources with a route that has a filter: only their deliveries are filtered.
        self._filters = {
            name for name, source in config.sources.items() if any(r.filter for r in source.routes)
        }
        self._routes_cache: dict[tuple[str, str], list[Route]] = {}
        #: Sources with an ordered route: only their jobs get a key.
        self._ordered = {
            name
            for name, source in config.sources.items()
            if any(r.order_key for r in source.routes)
        }
        self.batcher = ReservationBatcher(
            store,
            max_batch=config.server.batch_max,
            wait_seconds=config.server.batch_wait_ms / 1000,
            max_in_flight=config.server.batch_in_flight
            or (1 if store_kind(config.database) == "sqlite" else 4),
            overlap_after=config.server.batch_overlap_ms / 1000,
            ordered=bool(self._ordered),
            metrics=metrics,
        )

    def _delivery(
        self, source_name: str, event: VerifiedEvent, body: bytes, headers: Mapping[str, str]
    ) -> NewDelivery:
        """The journal row, payload and jobs of an authenticated event: its id and type
        checked by the edge (docs/edge.md), its kept headers, one job per matching route
        (and filter). A webhook and a catch-up take this same step."""
        # The edge, once the signature holds and before any store work (docs/edge.md).
        edge.check_event(event)
        kept = edge.kept_headers(
            headers, self._signature_headers.get(source_name, frozenset()), self._credentials
        )
        if self.tracing.enabled:
            # The receive span's context crosses the queue with the delivery: the worker
            # continues this trace (hookinbox.tracing).
            parent = self.tracing.traceparent()
            if parent:
                kept[TRACEPARENT] = parent
        delivery_id = new_delivery_id()
        routes = self._routes_for(source_name, event.event_type)
        if source_name in self._filters and routes:
            routes = filtered(routes, event.payload, kept)
        stored, subject_hash = body, None
        if source_name in self._private:
            # After the signature (verified over the original bytes) and the filters, once,
            # before the reservation; the journal's hash stays the original body's.
            stored, kept, subject_hash = self._privacy(
                self._config.sources[source_name], source_name, routes, event.payload, body, kept
            )
        return NewDelivery(
            id=delivery_id,
            source=source_name,
            event_id=event.event_id,
            event_type=event.event_type,
            body_sha256=hashlib.sha256(body).hexdigest(),
            body=stored,
            headers=kept,
            jobs=(
                self._ordered_jobs(source_name, delivery_id, routes, event.payload, headers)
                if source_name in self._ordered
                else tuple(
                    NewJob(job_id(delivery_id, r.action), r.action, r.attempts(self._config.worker))
                    for r in routes
                )
            ),
            max_attempts=self._config.worker.max_attempts,
            subject_hash=subject_hash,
        )

    def pulled(
        self,
        source_name: str,
        body: bytes,
        headers: Mapping[str, str],
        *,
        event_id: str,
        event_type: str,
    ) -> tuple[NewDelivery, list[InlineApply]]:
        """An event pulled from the provider's API (catch-up), as the receiver would
        reserve it: no signature to check (the API answer is authenticated by TLS and
        the API key), but the same body reading, edge checks, kept headers, routes and
        filters as a webhook, and the inline resource events its routes apply. The
        caller reserves it (:meth:`hookinbox.store.catch_up.CatchUpCursors.commit_page`).
        Raises the refusal a webhook of this body would get (``malformed_json``,
        ``invalid_event_id`` ...)."""
        source = self._config.source(source_name)
        if source is None:
            raise UnknownSource()
        payload = read_body(body, headers, body_format(source))
        event = VerifiedEvent(event_id=event_id, event_type=event_type, payload=payload)
        item = self._delivery(source_name, event, body, headers)
        applies = self._resources.inline_applies(item, payload)
        return item, list(applies)

    async def _reserve(self, item: NewDelivery, payload: Mapping[str, Any]) -> Reservation:
        """Routes marked ``inline`` apply their resource event in the reservation's own
        commit, so the 2xx means the transition is durable (in its ordered turn, if the
        delivery has an ordered job too); all else goes through the batcher."""
        applies = self._resources.inline_applies(item, payload)
        if not applies:
            return await self.batcher.reserve(item)
        reservation, outcomes = await self.batcher.reserve_in_turn(
            item, lambda: self._store.journal.reserve_inline(item, applies)
        )
        for outcome in outcomes:
            log_outcome(outcome, self.metrics, delivery_id=item.id, source=item.source, inline=True)
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

    def _redaction(self, source: Source, source_name: str, routes: list[Route]) -> Redaction:
        """The union of the source's rules and its matched routes' (storage is per
        delivery), built once per set of routes; bounded like the routes' cache."""
        key = (source_name, tuple(r.action for r in routes))
        found = self._redactions.get(key)
        if found is None:
            rules = [(p, source.redact_hash) for p in source.redact]
            rules += [(p, r.redact_hash) for r in routes for p in r.redact]
            found = Redaction(rules, self._hash_key)
            if len(self._redactions) < 10_000:
                self._redactions[key] = found
        return found

    def _privacy(
        self,
        source: Source,
        source_name: str,
        routes: list[Route],
        payload: Mapping[str, Any],
        body: bytes,
        kept: dict[str, str],
    ) -> tuple[bytes, dict[str, str], str | None]:
        """The body to store (redacted, when a rule named a field present), its headers
        (no provider signature then, and ``x-hookinbox-redacted``) and the subject's
        keyed hash (never the value)."""
        subject_hash = None
        if source.subject is not None and self._hash_key is not None:
            subject = string_at(payload, source.subject)
            if subject is not None:
                subject_hash = keyed_hash(self._hash_key, subject)
        redaction = self._redaction(source, source_name, routes)
        if redaction:
            redacted = redaction.apply(payload)
            if redacted is not None:
                own = source.hmac.header if source.scheme == "hmac" and source.hmac else None
                also = frozenset({own.lower()}) if own else frozenset()
                return payload_bytes(redacted), without_signatures(kept, also), subject_hash
        return body, kept, subject_hash

    async def _traced_receive(
        self,
        source_name: str,
        body: bytes,
        headers: Mapping[str, str],
        *,
        now: float | None = None,
        keep_rejected: bool = True,
    ) -> Receipt:
        """:meth:`receive` inside a ``hookinbox.receive`` span."""
        with self.tracing.receive(source_name, headers) as span:
            receipt = await Receiver.receive(
                self, source_name, body, headers, now=now, keep_rejected=keep_rejected
            )
            if receipt.delivery_id:
                span.set("hookinbox.delivery_id", receipt.delivery_id)
            span.set("hookinbox.outcome", receipt.status)
            return receipt

    def _ordered_jobs(
        self,
        source_name: str,
        delivery_id: str,
        routes: list[Route],
        payload: Mapping[str, Any],
        headers: Mapping[str, str],
    ) -> tuple[NewJob, ...]:
        """The jobs of a source with an ordered route, each with its key (computed once,
        here, and stored with the job: the claim only compares it)."""
        return tuple(
            NewJob(
                job_id(delivery_id, r.action),
                r.action,
                r.attempts(self._config.worker),
                order_key_of(source_name, r, payload, headers),
                r.on_dead_letter == "hold",
            )
            for r in routes
        )

    def _check_order_grace(self, item: NewDelivery) -> None:
        """An ordered job is claimed once its id is ``order_grace_seconds`` old, on the
        promise that every earlier reservation has committed by then. One that committed
        later than that may have let a later job of its key run first: the operator is
        told, since nothing else could show it (docs/concepts/ordering.md)."""
        grace = self._config.worker.order_grace_seconds
        if grace <= 0 or not any(job.order_key for job in item.jobs):
            return
        late = time.time() - delivery_id_seconds(item.id)
        if late > grace:
            log.warning(
                "ordered_reservation_late",
                source=item.source,
                delivery_id=item.id,
                seconds=round(late, 3),
                order_grace_seconds=grace,
            )
            self.metrics.ordered_reservation_late(item.source)

    def max_body_bytes(self, source_name: str) -> int:
        source = self._config.source(source_name)
        if source is None:
            raise UnknownSource()
        return source.max_body_bytes

    async def receive(
        self,
        source_name: str,
        body: bytes,
        headers: Mapping[str, str],
        *,
        now: float | None = None,
        keep_rejected: bool = True,
    ) -> Receipt:
        """``headers`` must have lower-case names. Raises a HookinboxError to refuse.

        ``now``: the time to check signed timestamps against (a rejected delivery's retry
        passes the time it was received). ``keep_rejected``: keep a copy of a refusal for
        its signature or timestamp (a retry does not keep a second one). With tracing on,
        :meth:`_traced_receive` stands in for this method (set in ``__init__``), so the
        hot path pays nothing for tracing when it is off."""
        source = self._config.source(source_name)
        if source is None:
            raise UnknownSource()
        if self._paused(source_name):
            raise SourcePaused()
        try:
            event = self._verifiers[source_name].verify(
                body, headers, now=self._clock() if now is None else now
            )
        except VerificationError as exc:
            if keep_rejected:
                self.rejected.offer(source_name, exc.code, body, headers)
            raise
        if event.challenge_response is not None:
            return Receipt("challenge", challenge=event.challenge_response)
        item = self._delivery(source_name, event, body, headers)
        body_sha256 = item.body_sha256
        routes = item.jobs
        if self.tracing.enabled:
            with self.tracing.reserve(source_name):
                reservation = await self._reserve(item, event.payload)
        else:
            reservation = await self._reserve(item, event.payload)
        if reservation.outcome == "accepted" and source_name in self._ordered:
            self._check_order_grace(item)
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
        # Positional (status, delivery id, conflict, event id, challenge, preset): keywords
        # cost a dict per delivery.
        return Receipt(
            reservation.outcome,
            reservation.delivery_id,
            reservation.conflict,
            event.event_id,
            None,
            self._answers[source_name],
        )
