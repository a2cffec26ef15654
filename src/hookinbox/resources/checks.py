"""Reconciliation checks for tracked resources, for ``hookinbox reconcile``.

Each check is one question: a terminal resource that no delivery's applied transition
moved there (someone changed it by hand, or an event is missing); an applied transition
into a notifying state with no outbox row; a resource moved but bound to no source (it
was moved before sources were recorded; whichever source's event is applied next binds
it); an outbox row unsent past
``outbox.unsent_after_seconds``; a parked event past its deadline (no worker is running).
They reach ``reconcile`` through :class:`hookinbox.ops.views.OperatorViews`.
"""

from __future__ import annotations

from dataclasses import dataclass

from hookinbox.config import Config
from hookinbox.ops.reconcile import Finding
from hookinbox.resources.machine import build_machines
from hookinbox.store import Store

#: How many findings a check counts at most (the samples shown are fewer).
_SCAN = 10_000

TITLES = {
    "terminal_without_delivery": "resources in a terminal state no delivery moved them to",
    "transition_without_outbox": "applied transitions without their outbox row",
    "unbound_resources": "resources moved but bound to no source yet (moved before sources "
    "were recorded): the next event applied binds its sender",
    "outbox_unsent": "outbox rows unsent past outbox.unsent_after_seconds",
    "parked_past_deadline": "parked events past their deadline",
}


@dataclass(frozen=True, slots=True)
class ResourceCheck:
    name: str
    title: str

    async def run(self, store: Store, config: Config, limit: int) -> Finding:
        found = [
            f
            for f in await store.resources.resource_findings(
                list(build_machines(config.machines).values()),
                outbox_unsent_seconds=config.outbox.unsent_after_seconds,
                limit=_SCAN,
            )
            if f.check == self.name
        ]
        items = [{"ref": f.ref, "detail": f.detail} for f in found[:limit]]
        return Finding(self.name, self.title, len(found), items)


CHECKS = [ResourceCheck(name, title) for name, title in TITLES.items()]
