"""Tracked resources: created and attached by the application, moved by events along
their machine, reconciled. Applying an event is :mod:`hookinbox.store.transitions`.

A provider reference belongs to one resource of a kind (a unique index); attaching one
wakes the events parked waiting for it, in the same commit.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from hookinbox.errors import NotFound, OperationRefused
from hookinbox.store.decisions import TransitionRules
from hookinbox.store.resource_records import (
    ParkPolicy,
    ResourceEvent,
    ResourceFinding,
    ResourceOutcome,
    ResourceView,
    TransitionView,
    sources_text,
)
from hookinbox.store.sql import (
    WAKE,
    DecodeTime,
    Step,
    Tx,
    UniqueConflict,
    count,
    row,
    rows,
)
from hookinbox.store.statements import load_statements
from hookinbox.store.transitions import LOG, apply_or_park, log_params

if TYPE_CHECKING:
    from hookinbox.store.driver import Driver

_REF_TAKEN = "a resource of this kind already holds that provider reference"

_SQL = load_statements("tracked_resources")
_CREATE = _SQL["create"]
_GET = _SQL["get"]
_GET_FOR_UPDATE = _SQL["get_for_update"]
_FIND = _SQL["find"]
_ATTACH = _SQL["attach"]
_WAKE_PARKED = _SQL["wake_parked"]
_LIST = _SQL["list"]
_LOG_OF_RESOURCE = _SQL["log_of_resource"]
_LOG_OF_DELIVERY = _SQL["log_of_delivery"]
_LEASE_HELD = _SQL["lease_held"]
_COUNTS = _SQL["counts"]
# Reconciliation.
_TERMINAL_WITHOUT_DELIVERY = _SQL["terminal_without_delivery"]
_TRANSITION_WITHOUT_OUTBOX = _SQL["transition_without_outbox"]
_OUTBOX_UNSENT = _SQL["outbox_unsent"]
_UNBOUND_MOVED = _SQL["unbound_moved"]
_PARKED_PAST_DEADLINE = _SQL["parked_past_deadline"]


def _wake_parked(kind: str, provider_ref: str) -> Tx[None]:
    """Events parked waiting for this reference become due now."""
    if (yield count(_WAKE_PARKED, kind=kind, ref=provider_ref)):
        yield WAKE


def _create(
    resource_id: str,
    kind: str,
    tenant: str,
    owner: str,
    state: str,
    provider_ref: str | None,
    sources: Sequence[str],
    decode_time: DecodeTime,
) -> Tx[ResourceView]:
    created = yield row(
        _CREATE,
        id=resource_id,
        kind=kind,
        tenant=tenant,
        owner=owner,
        state=state,
        ref=provider_ref,
        sources=sources_text(sources),
    )
    if created is None:
        raise OperationRefused(_REF_TAKEN)
    yield count(LOG, **log_params(resource_id, None, state), outcome="created")
    if provider_ref is not None:
        yield from _wake_parked(kind, provider_ref)
    return ResourceView.from_row(created, decode_time)


def _attach(resource_id: str, provider_ref: str, decode_time: DecodeTime) -> Tx[ResourceView]:
    found = yield row(_GET_FOR_UPDATE, id=resource_id)
    if found is None:
        raise NotFound(f"no resource {resource_id!r}")
    if found["provider_ref"] == provider_ref:
        return ResourceView.from_row(found, decode_time)
    if found["provider_ref"] is not None:
        raise OperationRefused("the resource already has another provider reference")
    try:
        attached = yield Step(_ATTACH, {"id": resource_id, "ref": provider_ref}, "row", True)
    except UniqueConflict:
        # The one place a taken reference becomes a domain error.
        raise OperationRefused(_REF_TAKEN) from None
    yield count(LOG, **log_params(resource_id, found["state"], found["state"]), outcome="attached")
    yield from _wake_parked(found["kind"], provider_ref)
    return ResourceView.from_row(attached, decode_time)


def _apply(
    job_id: str,
    lease_token: str,
    source: str,
    event: ResourceEvent,
    rules: TransitionRules,
    park: ParkPolicy,
    decode_time: DecodeTime,
) -> Tx[ResourceOutcome]:
    if (yield row(_LEASE_HELD, id=job_id, token=lease_token)) is None:
        return ResourceOutcome("lease_lost")
    return (yield from apply_or_park(job_id, source, event, rules, park, decode_time, leased=True))


def _findings(
    machines: Sequence[TransitionRules], outbox_unsent_seconds: float, limit: int
) -> Tx[list[ResourceFinding]]:
    found: list[ResourceFinding] = []
    for machine in machines:
        for state in sorted(machine.terminal):
            stale = yield rows(
                _TERMINAL_WITHOUT_DELIVERY, kind=machine.name, state=state, limit=limit
            )
            found += [ResourceFinding("terminal_without_delivery", r["id"], state) for r in stale]
        for state, outbox_kind in sorted(machine.notify.items()):
            lost = yield rows(
                _TRANSITION_WITHOUT_OUTBOX,
                kind=machine.name,
                state=state,
                outbox_kind=outbox_kind,
                limit=limit,
            )
            found += [
                ResourceFinding("transition_without_outbox", r["resource_id"], state) for r in lost
            ]
        unbound = yield rows(
            _UNBOUND_MOVED, kind=machine.name, initial=machine.initial, limit=limit
        )
        found += [ResourceFinding("unbound_resources", r["id"], r["state"]) for r in unbound]
    unsent = yield rows(_OUTBOX_UNSENT, age=float(outbox_unsent_seconds), limit=limit)
    found += [ResourceFinding("outbox_unsent", r["key"], r["state"]) for r in unsent]
    parked = yield rows(_PARKED_PAST_DEADLINE, limit=limit)
    found += [ResourceFinding("parked_past_deadline", r["job_id"]) for r in parked]
    return found


class TrackedResources:
    def __init__(self, db: Driver) -> None:
        self._db = db

    async def create_resource(
        self,
        resource_id: str,
        kind: str,
        *,
        tenant: str,
        owner: str,
        state: str,
        provider_ref: str | None = None,
        sources: Sequence[str] = (),
    ) -> ResourceView:
        """Insert a resource in its initial state (logged as ``created``), bound to
        ``sources`` (none: bound by the first event applied to it); a provider
        reference already held by another resource of the kind is OperationRefused.
        Parked events waiting for that reference become due now."""
        decode = self._db.decode_time
        return await self._db.run(
            _create(resource_id, kind, tenant, owner, state, provider_ref, sources, decode)
        )

    async def attach_provider_ref(self, resource_id: str, provider_ref: str) -> ResourceView:
        """Set the provider reference once (the same one again is a no-op); a different
        one, or one another resource holds, is OperationRefused; unknown id is NotFound.
        Parked events waiting for it become due now, in the same commit."""
        return await self._db.run(_attach(resource_id, provider_ref, self._db.decode_time))

    async def get_resource(self, resource_id: str) -> ResourceView | None:
        found = await self._db.row(_GET, id=resource_id)
        return ResourceView.from_row(found, self._db.decode_time) if found else None

    async def find_resource(self, kind: str, provider_ref: str) -> ResourceView | None:
        found = await self._db.row(_FIND, kind=kind, ref=provider_ref)
        return ResourceView.from_row(found, self._db.decode_time) if found else None

    async def list_resources(
        self,
        *,
        kind: str | None = None,
        tenant: str | None = None,
        state: str | None = None,
        limit: int = 50,
        before: str | None = None,
    ) -> list[ResourceView]:
        """Newest first, keyset-paginated by resource id."""
        found = await self._db.rows(
            _LIST, kind=kind, tenant=tenant, state=state, before=before, limit=limit
        )
        return [ResourceView.from_row(r, self._db.decode_time) for r in found]

    async def list_transitions(self, resource_id: str) -> list[TransitionView]:
        """The resource's transition log, oldest first."""
        found = await self._db.rows(_LOG_OF_RESOURCE, id=resource_id)
        return [TransitionView.from_row(r, self._db.decode_time) for r in found]

    async def list_delivery_transitions(self, delivery_id: str) -> list[TransitionView]:
        """The transition log lines one delivery wrote (applied or rejected, on any
        resource), oldest first: for the trace of that delivery."""
        found = await self._db.rows(_LOG_OF_DELIVERY, id=delivery_id)
        return [TransitionView.from_row(r, self._db.decode_time) for r in found]

    async def apply_resource_event(
        self,
        job_id: str,
        lease_token: str,
        source: str,
        event: ResourceEvent,
        machine: TransitionRules,
        park: ParkPolicy,
    ) -> ResourceOutcome:
        """In ONE transaction, with the job's lease checked: find the resource by
        reference (locked), check source (binding an unbound resource to it when the
        event is applied), tenant and owner, judge the transition, write it (or
        its rejection) to the log, insert the outbox rows it produces and complete the
        job; or park the job (unknown reference) or dead-letter it at the park deadline
        (``unknown_resource``). ``lease_lost`` writes nothing."""
        return await self._db.run(
            _apply(job_id, lease_token, source, event, machine, park, self._db.decode_time)
        )

    async def resource_findings(
        self,
        machines: Sequence[TransitionRules],
        *,
        outbox_unsent_seconds: float,
        limit: int = 100,
    ) -> list[ResourceFinding]:
        """Reconciliation: ``terminal_without_delivery`` (a terminal resource no
        delivery's applied transition moved), ``transition_without_outbox``,
        ``unbound_resources`` (moved, yet bound to no source: moved before sources were
        recorded),
        ``outbox_unsent`` (pending or sending longer than the threshold) and
        ``parked_past_deadline``."""
        return await self._db.run(_findings(machines, outbox_unsent_seconds, limit), atomic=False)

    async def transition_counts(self) -> dict[str, int]:
        """Transition log lines per outcome (``applied``) or rejection reason
        (``rejected:from_terminal``, ``rejected:tenant_mismatch``...): for metrics."""
        found = await self._db.rows(_COUNTS)
        return {
            r["outcome"] + (f":{r['reason']}" if r["reason"] else ""): int(r["n"]) for r in found
        }
