"""Prometheus metrics: what the receiver and the workers count, and gauges read from the store.

Counters and histograms are per process. When several processes run (``hookinbox serve``
plus ``hookinbox worker`` processes on one host), set ``PROMETHEUS_MULTIPROC_DIR`` to an
empty directory shared by all of them before they start: prometheus-client then keeps the
values in files there, and ``GET /metrics`` of any serving process adds up every
process's values (see the prometheus-client "multiprocess mode" docs).

The gauges (queue depth, lag, dead letters, parked events, unsent and failed outbox
rows, paused sources) are not counted: they are read from the store, which every process shares, by
:class:`StoreGauges`, at most once per ``min_interval`` however often /metrics is
scraped. Several serving processes report the same store values; aggregate them with
``max``, never ``sum``.

Label values are bounded: sources come from the config (an unknown source name from the
URL is reported as ``_unknown``), outcomes are error codes, actions are route actions.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections import defaultdict, deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from hookinbox.errors import HookinboxError
from hookinbox.logs import get_logger

if TYPE_CHECKING:
    from hookinbox.store import Store, StoreGaugeReadings


log = get_logger("hookinbox.metrics")

__all__ = [
    "CONTENT_TYPE_LATEST",
    "RESOURCE_EVENTS",
    "Metrics",
    "RecentCounts",
    "StoreGauges",
    "resource_event_counted",
]

#: The label for a delivery to a source name the config does not know.
UNKNOWN_SOURCE = "_unknown"

_ANSWER_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
_HANDLER_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


#: Events applied to tracked resources, by machine and outcome (``applied``,
#: ``rejected_transition``, ``tenant_mismatch``, ``owner_mismatch``, ``parked``...). Counted
#: where the event is applied (a worker, or the receiver for ``inline`` routes), which has
#: no inbox at hand: so one counter per process, added to every inbox's registry.
RESOURCE_EVENTS = Counter(
    "hookinbox_resource_events",
    "Events applied to tracked resources, by kind (machine) and outcome.",
    ["kind", "outcome"],
    registry=None,
)


def resource_event_counted(kind: str, outcome: str) -> None:
    RESOURCE_EVENTS.labels(kind, outcome).inc()


def multiprocess_dir() -> str | None:
    return os.environ.get("PROMETHEUS_MULTIPROC_DIR") or None


class RecentCounts:
    """Receipts per source, outcome and minute over the last hour, in this process.

    The admin overview reads it for duplicates and refusals: a refused delivery is by
    design never written to the store (a flood of forged requests must not cause writes),
    so memory is the only place it can be counted cheaply; Prometheus keeps the long,
    fleet-wide history from the counters."""

    def __init__(self, minutes: int = 60) -> None:
        self._minutes = minutes
        self._buckets: deque[tuple[int, dict[tuple[str, str], int]]] = deque()

    def add(self, source: str, outcome: str, now: float | None = None) -> None:
        minute = int((time.time() if now is None else now) // 60)
        if not self._buckets or self._buckets[-1][0] != minute:
            self._buckets.append((minute, defaultdict(int)))
            while self._buckets and self._buckets[0][0] <= minute - self._minutes:
                self._buckets.popleft()
        self._buckets[-1][1][(source, outcome)] += 1

    def per_minute(self, now: float | None = None) -> list[tuple[int, dict[tuple[str, str], int]]]:
        """``(minute since the epoch, {(source, outcome): count})`` within the window."""
        oldest = int((time.time() if now is None else now) // 60) - self._minutes
        return [(minute, dict(counts)) for minute, counts in self._buckets if minute > oldest]

    def totals(self, now: float | None = None) -> dict[tuple[str, str], int]:
        result: dict[tuple[str, str], int] = defaultdict(int)
        for _, counts in self.per_minute(now):
            for key, value in counts.items():
                result[key] += value
        return dict(result)


class Metrics:
    """The counters and histograms of one inbox (its own registry, so tests and several
    inboxes in one process do not share values)."""

    def __init__(self, sources: Iterable[str] = ()) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._sources = frozenset(sources)
        self.recent = RecentCounts()
        self._answered: dict[tuple[str, str], tuple[Any, Any]] = {}
        reg = self.registry
        reg.register(RESOURCE_EVENTS)
        self.deliveries = Counter(
            "hookinbox_deliveries",
            "Deliveries answered, by source and outcome (accepted, duplicate, challenge,"
            " or the refusal's error code).",
            ["source", "outcome"],
            registry=reg,
        )
        self.answer_seconds = Histogram(
            "hookinbox_answer_seconds",
            "Time from the request to the webhook answer, by source.",
            ["source"],
            buckets=_ANSWER_BUCKETS,
            registry=reg,
        )
        job_labels = ["source", "action"]
        self.jobs_started = Counter(
            "hookinbox_jobs_started", "Job attempts started.", job_labels, registry=reg
        )
        self.jobs_completed = Counter(
            "hookinbox_jobs_completed", "Jobs completed.", job_labels, registry=reg
        )
        self.jobs_retried = Counter(
            "hookinbox_jobs_retried",
            "Job attempts that failed and were rescheduled.",
            job_labels,
            registry=reg,
        )
        self.jobs_failed = Counter(
            "hookinbox_jobs_failed",
            "Jobs dead-lettered (attempts exhausted or unrunnable).",
            job_labels,
            registry=reg,
        )
        self.handler_seconds = Histogram(
            "hookinbox_handler_seconds",
            "Time an action (handler or forward) ran, by source and action.",
            job_labels,
            buckets=_HANDLER_BUCKETS,
            registry=reg,
        )

    def source_label(self, source: str) -> str:
        return source if source in self._sources or not self._sources else UNKNOWN_SOURCE

    # -- receiving --------------------------------------------------------------------
    def delivery_answered(self, source: str, outcome: str, started: float) -> None:
        """One answered webhook request; ``started`` is its ``time.perf_counter()``."""
        label = self.source_label(source)
        children = self._answered.get((label, outcome))
        if children is None:  # labels() per request costs more than the increment
            children = (self.deliveries.labels(label, outcome), self.answer_seconds.labels(label))
            self._answered[(label, outcome)] = children
        children[0].inc()
        children[1].observe(time.perf_counter() - started)
        self.recent.add(label, outcome)

    # -- working ----------------------------------------------------------------------
    def job_started(self, source: str, action: str) -> None:
        self.jobs_started.labels(source, action).inc()

    def job_ran(self, source: str, action: str, seconds: float) -> None:
        """The action returned or raised after ``seconds``."""
        self.handler_seconds.labels(source, action).observe(seconds)

    def job_settled(self, source: str, action: str, outcome: str) -> None:
        """``outcome``: completed, retried or failed."""
        counter = {
            "completed": self.jobs_completed,
            "retried": self.jobs_retried,
            "failed": self.jobs_failed,
        }[outcome]
        counter.labels(source, action).inc()

    # -- exposition -------------------------------------------------------------------
    def exposition(self, extra: Sequence[Collector] = ()) -> bytes:
        """The Prometheus text format: this process's values, or every process's when
        ``PROMETHEUS_MULTIPROC_DIR`` is set, plus ``extra`` collectors."""
        path = multiprocess_dir()
        if path is None:
            registry = self.registry
            for collector in extra:
                registry.register(collector)
            try:
                return generate_latest(registry)
            finally:
                for collector in extra:
                    registry.unregister(collector)
        registry = CollectorRegistry()
        MultiProcessCollector(registry, path=path)  # type: ignore[no-untyped-call]
        for collector in extra:
            registry.register(collector)
        return generate_latest(registry)


class StoreGauges(Collector):
    """Gauges read from the store, refreshed at most once per ``min_interval`` seconds."""

    def __init__(self, sources: Iterable[str], *, min_interval: float = 5.0) -> None:
        self._sources = sorted(sources)
        self._min_interval = min_interval
        self._lock = asyncio.Lock()
        self._read_at = -float("inf")
        self._readings: StoreGaugeReadings | None = None
        self._up = 0

    async def refresh(self, store: Store, timeout: float = 5.0) -> None:
        """Read the store unless the last reading is fresh; concurrent scrapes share one
        reading. A failed read keeps the last values and sets ``hookinbox_store_up`` 0."""
        async with self._lock:
            if time.monotonic() - self._read_at < self._min_interval:
                return
            try:
                self._readings = await asyncio.wait_for(store.reads.read_store_gauges(), timeout)
                self._up = 1
            except (HookinboxError, TimeoutError) as exc:
                self._up = 0
                code = exc.code if isinstance(exc, HookinboxError) else "timeout"
                log.warning("store_gauges_failed", error=code)
            self._read_at = time.monotonic()

    @property
    def readings(self) -> StoreGaugeReadings | None:
        return self._readings

    def describe(self) -> Iterable[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        r = self._readings
        per_source: dict[str, tuple[str, Mapping[str, float]]] = {
            "hookinbox_queue_depth": (
                "Jobs waiting or running (accepted, incl. scheduled retries, or processing).",
                r.queue_depth if r else {},
            ),
            "hookinbox_queue_lag_seconds": (
                "Age of the oldest due job that no worker has claimed yet (0 when none).",
                r.lag_seconds if r else {},
            ),
            "hookinbox_dead_letters": (
                "Jobs in the dead-letter view (failed).",
                r.dead_letters if r else {},
            ),
            "hookinbox_parked_events": (
                "Events parked until their resource is known.",
                r.parked if r else {},
            ),
            "hookinbox_outbox_unsent": (
                "Outbox rows waiting or being sent (pending, sending); not the failed ones.",
                r.outbox_unsent if r else {},
            ),
            "hookinbox_outbox_failed": (
                "Outbox rows dead-lettered after max_attempts (hookinbox outbox retry KEY).",
                r.outbox_failed if r else {},
            ),
            "hookinbox_source_paused": (
                "1 while an operator has paused the source.",
                {s: 1.0 for s in r.paused_seconds} if r else {},
            ),
            "hookinbox_source_paused_seconds": (
                "How long the source has been paused (0 when it is not).",
                r.paused_seconds if r else {},
            ),
        }
        for name, (doc, values) in per_source.items():
            family = GaugeMetricFamily(name, doc, labels=["source"])
            for source in sorted({*self._sources, *values}):
                family.add_metric([source], float(values.get(source, 0)))
            yield family
        yield GaugeMetricFamily(
            "hookinbox_store_up",
            "1 when the last read of the store gauges succeeded.",
            value=self._up,
        )
