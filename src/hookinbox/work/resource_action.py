"""The action of a ``resource`` route: apply the provider's event to its tracked resource.

It settles its own job, in the store transaction that applies the event (transition, its
outbox rows and the job's completion commit together), and tells the worker so through
``ctx.settled``. What the event asks is read by :func:`hookinbox.resources.service.
resource_event`; an event that cannot ask anything (unmapped type, no reference) is a
dead letter with that code.
"""

from __future__ import annotations

from hookinbox.config.resources import ResourceBinding
from hookinbox.logs import get_logger
from hookinbox.metrics import Metrics
from hookinbox.resources.machine import StateMachine
from hookinbox.resources.service import log_outcome, park_policy, resource_event
from hookinbox.work.actions import Event
from hookinbox.work.effects import JobContext, JobSettled

log = get_logger("hookinbox.resources")


class ResourceAction:
    """A ``resource`` route's action; it settles its own job (see the module)."""

    def __init__(
        self, source: str, binding: ResourceBinding, machine: StateMachine, metrics: Metrics
    ) -> None:
        self.source = source
        self.metrics = metrics
        self.binding = binding
        self.machine = machine
        self.park = park_policy(binding)

    async def run(self, event: Event, ctx: JobContext) -> str | None:
        asked = resource_event(
            self.binding,
            self.machine,
            event_type=event.type,
            payload=event.payload,
            delivery_id=event.delivery_id,
            job_id=ctx.job_id,
        )
        fields = {"job_id": ctx.job_id, "delivery_id": event.delivery_id, "kind": self.machine.name}
        if isinstance(asked, str):
            ours = await ctx.store.queue.fail_job(ctx.job_id, ctx.lease_token, asked)
            log.warning("resource_event", **fields, outcome=asked)
            ctx.settled = JobSettled(ours=ours, state="failed", outcome=asked)
            return None
        outcome = await ctx.store.resources.apply_resource_event(
            ctx.job_id, ctx.lease_token, self.source, asked, self.machine, self.park
        )
        log_outcome(outcome, self.metrics, **fields)
        state = {"parked": "parked", "unknown_resource": "failed"}.get(outcome.outcome, "completed")
        ctx.settled = JobSettled(
            ours=outcome.outcome != "lease_lost",
            state=state,
            outcome=outcome.outcome,
            business_id=outcome.resource_id,
        )
        return outcome.resource_id
