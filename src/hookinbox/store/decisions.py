"""The domain decisions the store's transactions take, as pure functions.

Whether an event may touch a resource, when a parked event is looked at again, what an
outcome means for its job and what the outbox row says are decided here, once, with no
database in sight; the transactions (:mod:`hookinbox.store.transitions`) read the rows,
call these and write what they answer. Whether a transition is allowed is the state
machine's call: the store sees it through :class:`TransitionRules`, which
:class:`hookinbox.resources.machine.StateMachine` satisfies, so the store never imports
the package above it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Set
from datetime import datetime, timedelta
from typing import Protocol

from hookinbox.backoff import backoff_seconds
from hookinbox.codes import AttemptOutcome, JobCode, JobState
from hookinbox.store.resource_records import Mismatch, Outcome, ParkPolicy, ResourceEvent
from hookinbox.store.sql import Row


class TransitionRules(Protocol):
    """What the store needs of a state machine."""

    @property
    def name(self) -> str: ...

    @property
    def initial(self) -> str: ...

    @property
    def terminal(self) -> Set[str]: ...

    #: state -> the outbox kind a transition INTO it produces.
    @property
    def notify(self) -> Mapping[str, str]: ...

    def judge(self, current: str, target: str) -> str | None:
        """None when ``current -> target`` is allowed, else the reason it is not."""


def claim_mismatch(source: str, event: ResourceEvent, resource: Row) -> Mismatch | None:
    """An event moves only a resource bound to its source (one created without sources
    is bound by the first event applied to it) and whose tenant and owner it names (when
    the route checks them); a mismatch is refused without naming the other party's
    resource. The source is checked first: a sender another tenant's resource is not
    bound to is refused as such, whatever its body claims."""
    bound = resource["sources"]
    if bound and source not in bound.split(","):
        return "source_mismatch"
    if event.tenant is not None and event.tenant != resource["tenant"]:
        return "tenant_mismatch"
    if event.owner is not None and event.owner != resource["owner"]:
        return "owner_mismatch"
    return None


def line_tenant(event: ResourceEvent, resource: Row, mismatch: Mismatch | None) -> str | None:
    """The tenant a transition line (and its review) belongs to. An event the resource
    accepted as its own: the resource's tenant. A refused one: the sender's, which is
    its route's pinned tenant, else what it claimed, but never the tenant of a resource
    whose sources it is not one of (claiming it is what such a sender may not do); None
    when the sender is entitled to no tenant we know."""
    if mismatch is None:
        return str(resource["tenant"])
    if not event.tenant:
        return None
    if mismatch == "source_mismatch" and not event.tenant_pinned:
        return event.tenant if event.tenant != resource["tenant"] else None
    return event.tenant


def park_due(checks: int, now: datetime, deadline: datetime, policy: ParkPolicy) -> datetime | None:
    """When an event parked for the ``checks``-th time is looked at again (the one backoff,
    without jitter, so an operator can predict it), never past its deadline; None once
    the deadline has passed: the reference stayed unknown and the job is dead-lettered."""
    if now >= deadline:
        return None
    delay = backoff_seconds(checks, base=policy.recheck_seconds, cap=policy.recheck_max_seconds)
    return min(now + timedelta(seconds=delay), deadline)


def job_settlement(outcome: Outcome) -> tuple[JobState, str | None, AttemptOutcome]:
    """What applying an event means for its job: ``(state, last_error, attempt outcome)``.
    A parked event waits (accepted), one still unknown at its deadline is a dead letter,
    anything else completes the job (a refusal is recorded, not retried)."""
    if outcome == "parked":
        return JobState.ACCEPTED, JobCode.PARKED, AttemptOutcome.PARKED
    if outcome == "unknown_resource":
        return JobState.FAILED, JobCode.UNKNOWN_RESOURCE, AttemptOutcome.FAILED
    return JobState.COMPLETED, None if outcome == "applied" else outcome, AttemptOutcome.COMPLETED


def outbox_row(kind: str, resource: Row, previous: str, state: str) -> tuple[str, str]:
    """The notification's stable key (one per resource and kind, however often the
    provider repeats itself; also its Idempotency-Key) and its small JSON body: ids and
    states only, never the provider's body."""
    key = f"{kind}:{resource['id']}"
    body = {
        "key": key,
        "kind": kind,
        "resource_id": resource["id"],
        "resource_kind": resource["kind"],
        "tenant": resource["tenant"],
        "owner": resource["owner"],
        "provider_ref": resource["provider_ref"],
        "previous_state": previous,
        "state": state,
    }
    return key, json.dumps(body, sort_keys=True)
