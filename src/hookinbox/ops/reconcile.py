"""Reconciliation: a report of what does not add up, for a person or for cron.

A report is the list of :data:`CHECKS`, each run on its own, each answering how many and
which (a few samples with ids). The defaults cover the pipeline: jobs processing past
their lease, accepted jobs older than ``accepted_too_old``, dead letters past their review
deadline, deliveries with no job though a route now matches, effects started and never
recorded, keys of ordered routes a dead letter holds. A caller adds others (tracked
resources add theirs, see :class:`hookinbox.ops.views.OperatorViews`): any object with
``name``, ``title`` and ``async run(store, config, limit) -> Finding``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from hookinbox.config import Config
from hookinbox.store import Store, iso


@dataclass(frozen=True, slots=True)
class Finding:
    check: str
    title: str
    count: int
    items: list[dict[str, Any]] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {
            "check": self.check,
            "title": self.title,
            "count": self.count,
            "items": [
                {k: iso(v) if hasattr(v, "isoformat") else v for k, v in item.items()}
                for item in self.items
            ],
        }


@dataclass(frozen=True, slots=True)
class ReconcileReport:
    findings: list[Finding]

    @property
    def total(self) -> int:
        return sum(finding.count for finding in self.findings)

    @property
    def clean(self) -> bool:
        return self.total == 0

    def as_json(self) -> dict[str, Any]:
        return {
            "clean": self.clean,
            "total": self.total,
            "findings": [finding.as_json() for finding in self.findings],
        }


class ReconcileCheck(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def title(self) -> str: ...

    async def run(self, store: Store, config: Config, limit: int) -> Finding: ...


@dataclass(frozen=True, slots=True)
class StoreCheck:
    """A check that is one named query of the store (``Store.reads.find_anomalies``)."""

    name: str
    title: str
    #: The age threshold in seconds, from the config (0 when the query has none).
    age: Callable[[Config], float] = lambda config: 0.0

    async def run(self, store: Store, config: Config, limit: int) -> Finding:
        found = await store.reads.find_anomalies(
            self.name, older_than_seconds=self.age(config), limit=limit
        )
        return Finding(self.name, self.title, found.count, found.samples)


@dataclass(frozen=True, slots=True)
class UnroutedDeliveriesCheck:
    """Deliveries that got no job although a route of the current config matches their
    type (a route added later, or one fixed after a contract change)."""

    name: str = "deliveries_without_jobs"
    title: str = "deliveries with no job though a route matches"
    scan_groups: int = 10_000

    async def run(self, store: Store, config: Config, limit: int) -> Finding:
        found = await store.reads.find_anomalies(self.name, limit=self.scan_groups)
        matched = []
        for group in found.samples:
            source = config.source(group["source"])
            if source is not None and source.routes_for(group["detail"]):
                matched.append(group)
        count = sum(int(group.get("deliveries", 1)) for group in matched)
        return Finding(self.name, self.title, count, matched[:limit])


#: The checks of the pipeline itself (jobs, dead letters, effects).
PIPELINE_CHECKS: tuple[ReconcileCheck, ...] = (
    StoreCheck("expired_leases", "jobs processing past their lease"),
    StoreCheck(
        "stale_accepted",
        "accepted jobs older than operations.accepted_too_old",
        lambda config: config.operations.accepted_too_old,
    ),
    StoreCheck(
        "failed_past_review",
        "dead letters past their review deadline (operations.dlq_review_days)",
        lambda config: config.operations.dlq_review_seconds,
    ),
    UnroutedDeliveriesCheck(),
    StoreCheck(
        "unrecorded_effects",
        "effects started and never recorded (older than operations.accepted_too_old)",
        lambda config: config.operations.accepted_too_old,
    ),
    StoreCheck(
        "held_keys",
        "keys of ordered routes held by a dead letter (on_dead_letter = hold):"
        " retry it to release them",
    ),
    StoreCheck(
        "unreviewed_transitions",
        "rejected transitions unreviewed past operations.transition_review"
        " (hookinbox reviews list)",
        lambda config: config.operations.transition_review,
    ),
)


async def reconcile(
    store: Store,
    config: Config,
    *,
    checks: Sequence[ReconcileCheck],
    limit: int = 20,
) -> ReconcileReport:
    """Run each check; ``limit`` caps the samples listed per check (not the counts).
    ``checks`` has no default: the inbox's full set comes from its
    :class:`~hookinbox.ops.views.OperatorViews`, never from a silent pipeline-only one."""
    return ReconcileReport([await check.run(store, config, limit) for check in checks])
