"""``GET /metrics``: the Prometheus text format, with gauges read from the store.

The gauges (queue depth, lag, dead letters, parked events, unsent and failed outbox
rows, paused sources) are not counted: they are read from the store, which every process
shares, by :class:`StoreGauges`, at most once per ``min_interval`` however often
/metrics is scraped. Several serving processes report the same store values; aggregate
them with ``max``, never ``sum``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.requests import Request
from starlette.responses import Response

from hookinbox.errors import HookinboxError
from hookinbox.logs import get_logger
from hookinbox.metrics import CONTENT_TYPE_LATEST, OTHER_REASON, Metrics
from hookinbox.store import DestinationState, Store, StoreGaugeReadings

log = get_logger("hookinbox.metrics")

#: The most (source, action, reason) series of ``hookinbox_dead_letters_by_reason``.
MAX_REASON_SERIES = 200


def metrics_endpoint(
    metrics: Metrics, gauges: StoreGauges, store: Store
) -> Callable[[Request], Awaitable[Response]]:
    async def serve_metrics(request: Request) -> Response:
        await gauges.refresh(store)
        return Response(metrics.exposition([gauges]), media_type=CONTENT_TYPE_LATEST)

    return serve_metrics


class StoreGauges(Collector):
    """Gauges read from the store, refreshed at most once per ``min_interval`` seconds."""

    def __init__(
        self,
        sources: Iterable[str],
        *,
        min_interval: float = 5.0,
        destinations: Iterable[str] = (),
    ) -> None:
        self._sources = sorted(sources)
        #: ``[destinations.NAME]``: their circuits and forwards in flight, read from the
        #: store (every worker process shares them).
        self._destination_names = sorted(destinations)
        self._destinations: list[DestinationState] = []
        self._min_interval = min_interval
        self._lock = asyncio.Lock()
        self._read_at = -float("inf")
        self._readings: StoreGaugeReadings | None = None
        self._reasons: list[tuple[str, str, str, int]] = []
        self._up = 0

    async def refresh(self, store: Store, timeout: float = 5.0) -> None:
        """Read the store unless the last reading is fresh; concurrent scrapes share one
        reading. A failed read keeps the last values and sets ``hookinbox_store_up`` 0."""
        async with self._lock:
            if time.monotonic() - self._read_at < self._min_interval:
                return
            try:
                self._readings = await asyncio.wait_for(store.reads.read_store_gauges(), timeout)
                self._reasons = await asyncio.wait_for(store.reads.dead_letter_reasons(), timeout)
                if self._destination_names:
                    self._destinations = await asyncio.wait_for(
                        store.destinations.states(), timeout
                    )
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
        yield self._dead_letters_by_reason()
        yield from self._destination_gauges()
        yield GaugeMetricFamily(
            "hookinbox_store_up",
            "1 when the last read of the store gauges succeeded.",
            value=self._up,
        )

    def _destination_gauges(self) -> Iterator[Metric]:
        """Per configured destination: 1 while its circuit is open (or half-open, until
        the probe answers), and its forwards in flight."""
        states = {s.name: s for s in self._destinations if s.name in self._destination_names}
        circuit = GaugeMetricFamily(
            "hookinbox_destination_circuit_open",
            "1 while the destination's circuit is open (its jobs are held), else 0.",
            labels=["destination"],
        )
        in_flight = GaugeMetricFamily(
            "hookinbox_destination_in_flight",
            "Forwards to the destination under way, across every worker process.",
            labels=["destination"],
        )
        for name in self._destination_names:
            state = states.get(name)
            circuit.add_metric([name], 1.0 if state and state.open_for is not None else 0.0)
            in_flight.add_metric([name], float(state.in_flight) if state else 0.0)
        yield circuit
        yield in_flight

    def _dead_letters_by_reason(self) -> Metric:
        """Dead letters per (source, action, reason), so an alert or a panel names the
        cause. The largest groups first, at most :data:`MAX_REASON_SERIES`; the rest of a
        source's are summed under ``_other``."""
        family = GaugeMetricFamily(
            "hookinbox_dead_letters_by_reason",
            "Jobs in the dead-letter view by source, action and reason (the last error code).",
            labels=["source", "action", "reason"],
        )
        other: dict[str, int] = {}
        for index, (source, action, reason, count) in enumerate(self._reasons):
            if index < MAX_REASON_SERIES:
                family.add_metric([source, action, reason or "_none"], float(count))
            else:
                other[source] = other.get(source, 0) + count
        for source, count in sorted(other.items()):
            family.add_metric([source, "_other", OTHER_REASON], float(count))
        return family
