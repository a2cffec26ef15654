"""Trace one event id through every layer: receipts, journal, jobs, attempts, effects,
operator actions, and the layers the caller adds (tracked resources add their transitions
and outbox rows; see :class:`hookinbox.ops.views.OperatorViews`).

Answers "where did the second copy appear?": the receipts say how many HTTP deliveries
came (first, last, count), the journal that they are one event, each job its attempts
with trigger (delivery, retry, replay, dlq-retry) and error code, the ledger which
effects exist under which key.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from hookinbox.config import Config
from hookinbox.errors import HookinboxError, NotFound
from hookinbox.routing import explain
from hookinbox.store import (
    AttemptView,
    DeliveryView,
    EffectRecord,
    JobView,
    OperatorAction,
    Store,
    WaitingBehind,
    iso,
)
from hookinbox.verify.bodies import body_format

#: ``layer(store, delivery) -> rows``: extra rows of a delivery shown under the layer's name.
TraceLayer = Callable[[Store, DeliveryView], Awaitable[list[dict[str, Any]]]]


@dataclass(frozen=True, slots=True)
class TracedJob:
    job: JobView
    attempts: list[AttemptView]
    #: An ordered job held by an earlier job of its key: that job (the key's head).
    waiting_behind: WaitingBehind | None = None

    def as_json(self) -> dict[str, Any]:
        behind = self.waiting_behind
        return {
            **self.job.as_json(),
            "attempt_history": [a.as_json() for a in self.attempts],
            "waiting_behind": behind.as_json() if behind is not None else None,
        }


@dataclass(frozen=True, slots=True)
class DeliveryTrace:
    delivery: DeliveryView
    jobs: list[TracedJob]
    effects: list[EffectRecord]
    operator_actions: list[OperatorAction]
    layers: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    #: Each route of the source: events matched, its filter's verdict, its job present.
    routes: list[dict[str, Any]] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        journal = {k: v for k, v in self.delivery.as_json().items() if k != "jobs"}
        return {
            "receipts": {
                "first_seen_at": journal["first_seen_at"],
                "last_seen_at": journal["last_seen_at"],
                "count": journal["delivery_count"],
                "conflicts": journal["conflicts"],
            },
            "journal": journal,
            "jobs": [job.as_json() for job in self.jobs],
            "effects": [_effect_json(effect) for effect in self.effects],
            "operator_actions": [action.as_json() for action in self.operator_actions],
            "routes": self.routes,
            **self.layers,
        }


@dataclass(frozen=True, slots=True)
class TraceReport:
    event_id: str
    source: str | None
    deliveries: list[DeliveryTrace]

    def as_json(self) -> dict[str, Any]:
        return {
            "event_id": self.event_id,
            "source": self.source,
            "deliveries": [d.as_json() for d in self.deliveries],
        }


async def trace(
    store: Store,
    config: Config,
    event_id: str,
    *,
    layers: Mapping[str, TraceLayer],
    source: str | None = None,
) -> TraceReport:
    """Every delivery of ``event_id`` (in each source, unless ``source`` is given); an
    internal delivery id works too. Each of ``layers`` adds its rows under its name;
    required, so no caller drops the inbox's layers by leaving them out."""
    deliveries = await store.journal.find_deliveries_by_event(event_id, source)
    if not deliveries and event_id.startswith("dlv_"):
        found = await store.journal.get_delivery(event_id)
        deliveries = [found] if found is not None and source in (None, found.source) else []
    if not deliveries:
        where = f" in source {source!r}" if source else ""
        raise NotFound(f"no delivery of event id {event_id!r}{where}")
    traced = []
    for delivery in deliveries:
        jobs = [
            TracedJob(
                job,
                await store.queue.list_attempts(job.id),
                await store.queue.waiting_behind(job.id) if _may_wait(job) else None,
            )
            for job in delivery.jobs
        ]
        effects = await store.effects.list_effects([job.id for job in delivery.jobs])
        actions = await store.audit.list_operator_actions(delivery_id=delivery.id)
        extra = {name: await layer(store, delivery) for name, layer in layers.items()}
        routes = await _routes(store, config, delivery)
        traced.append(DeliveryTrace(delivery, jobs, effects, actions, extra, routes))
    return TraceReport(event_id, source, traced)


def _may_wait(job: JobView) -> bool:
    """Only a job that is not running can be waiting behind its key (a dead letter of a
    held key may have been retried behind another)."""
    return job.state in ("accepted", "failed")


def _effect_json(effect: EffectRecord) -> dict[str, Any]:
    return {
        "key": effect.key,
        "state": effect.state,
        "job_id": effect.job_id,
        "result": effect.result,
        "created_at": iso(effect.created_at),
        "recorded_at": iso(effect.recorded_at),
    }


async def _routes(store: Store, config: Config, delivery: DeliveryView) -> list[dict[str, Any]]:
    """Which routes took the event and why (filters evaluated on the stored body)."""
    source = config.source(delivery.source)
    if source is None:
        return []
    stored = await store.journal.read_stored(delivery.id)
    payload: dict[str, Any] | None = None
    headers: dict[str, str] = {}
    if stored is not None:
        body, headers = stored
        try:
            payload = body_format(source).parse(body, headers.get("content-type"))
        except HookinboxError:
            payload = None
    actions = frozenset(job.action for job in delivery.jobs)
    return explain(source, delivery.event_type, payload, headers, actions)
