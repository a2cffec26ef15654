"""Tracked resources: the library API, and what an event asks of its resource.

The application creates a resource when it starts an operation (a video render) and
attaches the provider's reference when the provider answers::

    task = await inbox.resources.create("video", tenant="acme", owner="user-7", sources=["acme"])
    await inbox.resources.attach_ref(task.id, provider_task_id)

A route with a ``resource`` table then moves it by the provider's callbacks through its
state machine (:mod:`hookinbox.resources.machine`): the event's reference finds the
resource, the event's source must be one the resource is bound to (created without, the
first event applied binds it to its sender), the event's tenant (the route's pinned one,
or what the body claims) and owner must match it, the machine judges the transition, and the
transition, its outbox rows and the job's completion are one transaction (the store's
``apply_resource_event``). An event for a reference not attached yet is parked and
re-checked, never attached to anything else; at its deadline it is a dead letter
``unknown_resource``. Log lines carry ids and codes; on a source, tenant or owner mismatch
not even the other party's resource id.
"""

from __future__ import annotations

import builtins
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from hookinbox.config import Config
from hookinbox.config.resources import TENANT_NAME, TENANT_RULE, ResourceBinding
from hookinbox.errors import InvalidArgument, NotFound, UnknownSource
from hookinbox.ids import new_delivery_id
from hookinbox.logs import get_logger
from hookinbox.metrics import Metrics
from hookinbox.payload import string_at
from hookinbox.resources.machine import StateMachine, build_machines
from hookinbox.store import (
    NewDelivery,
    ParkPolicy,
    ResourceEvent,
    ResourceFinding,
    ResourceOutcome,
    ResourceView,
    Store,
    TransitionView,
)
from hookinbox.verify.edge import MAX_TEXT_BYTES, storable_text

log = get_logger("hookinbox.resources")

_EVENT_TIME_MAX = 64
#: The config's rule for a source name (so a stored list splits on its commas).
_SOURCE_NAME = re.compile(r"^[A-Za-z0-9_\-]{1,64}$")
#: What a provider's reference given to :meth:`Resources.create` or
#: :meth:`Resources.attach_ref` must be: what an event's reference can be (storable text,
#: :func:`resource_event`), and not padded with spaces, as no provider's is. Anything else
#: would be stored and never matched by any event.
REF_RULE = f"printable text of 1 to {MAX_TEXT_BYTES} bytes (UTF-8), no leading or trailing space"


def checked_ref(provider_ref: str) -> str:
    """``provider_ref`` if an event's reference could match it, else InvalidArgument."""
    if not (provider_ref and storable_text(provider_ref) and provider_ref == provider_ref.strip()):
        raise InvalidArgument(f"provider_ref: {REF_RULE}")
    return provider_ref


def new_resource_id() -> str:
    """``res_`` + a ULID: time-ordered, so the newest-first list is a keyset walk."""
    return "res_" + new_delivery_id().removeprefix("dlv_")


class Resources:
    """``inbox.resources``: create, attach, read. Reads can be scoped to a tenant and
    owner, so a result is handed only to whoever owns the operation."""

    def __init__(
        self,
        store: Store,
        machines: Mapping[str, StateMachine],
        sources: Collection[str] | None = None,
    ) -> None:
        self._store = store
        self.machines = dict(machines)
        #: The configured sources a resource may be bound to (None: any well-formed name).
        self._sources = frozenset(sources) if sources is not None else None

    def machine(self, kind: str) -> StateMachine:
        try:
            return self.machines[kind]
        except KeyError:
            raise InvalidArgument(f"no state machine named {kind!r}") from None

    async def create(
        self,
        kind: str,
        *,
        tenant: str,
        owner: str,
        provider_ref: str | None = None,
        sources: Iterable[str] | None = None,
    ) -> ResourceView:
        """A new resource in its machine's initial state, bound to ``sources`` (the
        sources whose events may move it). Without, the first event applied to it binds
        it to that event's source: until then any source whose route finds it by
        reference (and whose tenant and owner match) may move it first."""
        machine = self.machine(kind)
        for name, value in (("tenant", tenant), ("owner", owner)):
            if not value:
                raise InvalidArgument(f"a resource needs a non-empty {name}")
            if not TENANT_NAME.fullmatch(value):
                # A route's pinned tenant is held to the same rule, and the API's and the
                # CLI's tenant filters take no control character: a tenant outside it
                # could never be matched by a pinned route or listed by its own name. An
                # owner is a name of the same sort, matched as the tenant is against what
                # an event claims and shown beside it in every list and notification.
                raise InvalidArgument(f"{name}: {TENANT_RULE}")
        ref = checked_ref(provider_ref) if provider_ref else None
        bound = self._checked_sources(sources)
        view = await self._store.resources.create_resource(
            new_resource_id(),
            kind,
            tenant=tenant,
            owner=owner,
            state=machine.initial,
            provider_ref=ref,
            sources=bound,
        )
        log.info(
            "resource_created",
            resource_id=view.id,
            kind=kind,
            state=view.state,
            sources=list(view.sources),
        )
        return view

    def _checked_sources(self, sources: Iterable[str] | None) -> tuple[str, ...]:
        if sources is None:
            return ()
        if isinstance(sources, str):  # a lone name would bind each of its letters
            raise InvalidArgument("sources is a list of source names")
        names = tuple(sorted(set(sources)))
        if not names:
            raise InvalidArgument("sources needs at least one source name (or leave it out)")
        for name in names:
            if not _SOURCE_NAME.match(name):
                raise InvalidArgument(f"{name!r} is not a source name (letters, digits, _ and -)")
            if self._sources is not None and name not in self._sources:
                raise UnknownSource(f"no source named {name!r} in the config")
        return names

    async def attach_ref(self, resource_id: str, provider_ref: str) -> ResourceView:
        """Attach the provider's reference; parked events for it are applied next."""
        if not provider_ref:
            raise InvalidArgument("a provider reference cannot be empty")
        view = await self._store.resources.attach_provider_ref(
            resource_id, checked_ref(provider_ref)
        )
        log.info("resource_ref_attached", resource_id=resource_id, kind=view.kind)
        return view

    async def get(
        self, resource_id: str, *, tenant: str | None = None, owner: str | None = None
    ) -> ResourceView | None:
        """The resource, or None (also when it belongs to another tenant or owner)."""
        view = await self._store.resources.get_resource(resource_id)
        if view is None:
            return None
        if (tenant is not None and view.tenant != tenant) or (
            owner is not None and view.owner != owner
        ):
            return None
        return view

    async def require(self, resource_id: str) -> ResourceView:
        view = await self._store.resources.get_resource(resource_id)
        if view is None:
            raise NotFound(f"no resource {resource_id!r}")
        return view

    async def find(self, kind: str, provider_ref: str) -> ResourceView | None:
        return await self._store.resources.find_resource(kind, provider_ref)

    async def list(
        self,
        *,
        kind: str | None = None,
        tenant: str | None = None,
        state: str | None = None,
        limit: int = 50,
        before: str | None = None,
    ) -> builtins.list[ResourceView]:
        return await self._store.resources.list_resources(
            kind=kind, tenant=tenant, state=state, limit=limit, before=before
        )

    async def transitions(self, resource_id: str) -> builtins.list[TransitionView]:
        return await self._store.resources.list_transitions(resource_id)

    async def findings(
        self, *, outbox_unsent_seconds: float = 300.0
    ) -> builtins.list[ResourceFinding]:
        """What does not add up (see :func:`reconcile_resources`)."""
        return await reconcile_resources(
            self._store, self.machines.values(), outbox_unsent_seconds=outbox_unsent_seconds
        )


async def reconcile_resources(
    store: Store,
    machines: Sequence[StateMachine] | Any,
    *,
    outbox_unsent_seconds: float = 300.0,
    limit: int = 100,
) -> list[ResourceFinding]:
    """The resource checks of reconciliation: ``terminal_without_delivery``,
    ``transition_without_outbox``, ``unbound_resources``, ``outbox_unsent`` (older than
    the threshold) and ``parked_past_deadline``."""
    return await store.resources.resource_findings(
        list(machines), outbox_unsent_seconds=outbox_unsent_seconds, limit=limit
    )


def park_policy(binding: ResourceBinding) -> ParkPolicy:
    return ParkPolicy(
        park_seconds=binding.park_seconds,
        recheck_seconds=binding.park_recheck_seconds,
        recheck_max_seconds=binding.park_recheck_max_seconds,
    )


def resource_event(
    binding: ResourceBinding,
    machine: StateMachine,
    *,
    event_type: str,
    payload: Mapping[str, Any],
    delivery_id: str,
    job_id: str,
) -> ResourceEvent | str:
    """What the event asks of its resource, or the dead-letter code saying why it can't."""
    target = (binding.targets or machine.events).get(event_type)
    if target is None:
        return "unmapped_event"
    ref = string_at(payload, binding.ref)
    if ref is None:
        return "missing_resource_ref"
    if not storable_text(ref):  # a reference is indexed and logged like an event id
        return "invalid_resource_ref"
    event_time = string_at(payload, binding.event_time)
    pinned = binding.pinned_tenant
    if pinned is not None:  # one tenant per source: the body has no say
        tenant: str | None = pinned
    elif binding.tenant is not None:
        # A checked field the event lacks is "": it never matches a resource's value.
        tenant = string_at(payload, binding.tenant) or ""
    else:
        tenant = None
    return ResourceEvent(
        kind=binding.kind,
        provider_ref=ref,
        target=target,
        tenant=tenant,
        owner=(string_at(payload, binding.owner) or "") if binding.owner else None,
        event_type=event_type,
        event_time=event_time[:_EVENT_TIME_MAX] if event_time else None,
        delivery_id=delivery_id,
        job_id=job_id,
        tenant_pinned=pinned is not None,
    )


def log_outcome(outcome: ResourceOutcome, metrics: Metrics, **fields: Any) -> None:
    """One line per applied event, counted in ``hookinbox_resource_events_total`` (the
    store's transition log is the durable count, ``Store.resources.transition_counts``); a mismatch
    names no resource (it is not the caller's)."""
    metrics.resource_event(outcome.kind or str(fields.get("kind") or "_unknown"), outcome.outcome)
    detail: dict[str, Any] = {"outcome": outcome.outcome}
    if outcome.outcome in ("applied", "rejected_transition", "already_applied"):
        detail.update(
            resource_id=outcome.resource_id,
            from_state=outcome.from_state,
            to_state=outcome.to_state,
            reason=outcome.reason,
            outbox=list(outcome.outbox_keys),
        )
    level = log.warning if outcome.outcome.endswith("_mismatch") else log.info
    level("resource_event", **fields, **detail)


class ResourceRoutes:
    """The config's resource routes, resolved once: what the receiver needs to apply
    ``inline = true`` routes inside its own commit."""

    def __init__(self, config: Config) -> None:
        self.machines = build_machines(config.machines)
        self._inline: dict[tuple[str, str], ResourceBinding] = {}
        for name, source in config.sources.items():
            for route in source.routes:
                if route.resource is not None and route.resource.inline:
                    self._inline[(name, route.action)] = route.resource

    def inline_applies(
        self, item: NewDelivery, payload: Mapping[str, Any]
    ) -> list[tuple[ResourceEvent, StateMachine, ParkPolicy]]:
        """One entry per inline job of the delivery whose event can be applied now; a job
        whose event cannot (unmapped type, no reference) is left to a worker, which
        dead-letters it with the reason."""
        applies: list[tuple[ResourceEvent, StateMachine, ParkPolicy]] = []
        if not self._inline:
            return applies
        for job in item.jobs:
            binding = self._inline.get((item.source, job.action))
            if binding is None:
                continue
            machine = self.machines[binding.kind]
            asked = resource_event(
                binding,
                machine,
                event_type=item.event_type,
                payload=payload,
                delivery_id=item.id,
                job_id=job.id,
            )
            if not isinstance(asked, str):
                applies.append((asked, machine, park_policy(binding)))
        return applies

    @property
    def any_inline(self) -> bool:
        return bool(self._inline)
