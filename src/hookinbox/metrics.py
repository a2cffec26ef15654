"""Prometheus metrics: what the receiver and the workers count, and gauges read from the store.

Counters and histograms are per process. When several processes run (``hookinbox serve``
plus ``hookinbox worker`` processes on one host), set ``PROMETHEUS_MULTIPROC_DIR`` to an
empty directory shared by all of them before they start: prometheus-client then keeps the
values in files there, and ``GET /metrics`` of any serving process adds up every
process's values (see the prometheus-client "multiprocess mode" docs).

The gauges (queue depth, lag, dead letters...) are not counted here: they are read from
the store by :class:`hookinbox.http.metrics.StoreGauges` when ``/metrics`` is scraped.

Label values are bounded: sources come from the config (an unknown source name from the
URL is reported as ``_unknown``), outcomes are error codes, actions are route actions, and
a failure's ``reason`` is its code (``connect_error``, ``http_503``, a handler's own
``ActionError`` code), at most :data:`MAX_REASONS` distinct ones per process (the rest
``_other``), so an alert can name the cause without a handler inventing unbounded labels.

Counters export no ``_created`` series (``hookinbox_deliveries_created`` would read like a
count), and each inbox's registry carries the process and platform collectors.
"""

from __future__ import annotations

import gc
import glob
import os
import platform
import time
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, NamedTuple

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from hookinbox.logs import get_logger
from hookinbox.version import __version__

log = get_logger("hookinbox.metrics")

__all__ = ["CONTENT_TYPE_LATEST", "GC_PAUSES", "Metrics", "ReceiptTally", "watch_gc_pauses"]

#: The label for a delivery to a source name the config does not know.
UNKNOWN_SOURCE = "_unknown"

_ANSWER_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
#: Where an answer's time goes on the receive path (a batch's wait, its commit, a pause of
#: the whole process): finer at the low end, where a 10 ms p99 is decided.
_WAIT_BUCKETS = (
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.002,
    0.004,
    0.006,
    0.008,
    0.01,
    0.015,
    0.02,
    0.03,
    0.05,
    0.1,
    0.25,
    1.0,
)
_BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
_HANDLER_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
#: Beyond a minute, up to the longest a job may run (``worker.job_timeout_seconds``).
_SLOW_HANDLER_BUCKETS = (120.0, 300.0, 600.0, 1800.0, 3600.0, 7200.0, 21600.0, 86400.0)
#: Distinct ``reason`` label values per process; later ones are counted as ``_other``.
MAX_REASONS = 64
OTHER_REASON = "_other"


def handler_buckets(slowest: float) -> tuple[float, ...]:
    """Buckets up to the first one at or past ``slowest`` seconds, so a job that runs
    until its timeout still lands in a bucket of its own, not only in +Inf."""
    longer = [b for b in _SLOW_HANDLER_BUCKETS if b < slowest]
    return (*_HANDLER_BUCKETS, *longer, float(slowest)) if slowest > 60 else _HANDLER_BUCKETS


#: The ASGI scope extension in which hookinbox's own server says when a request was whole
#: (``{"at": time.perf_counter()}``, set once its last body byte is read): the webhook
#: answer's time counts from there, so it includes the wait for the event loop before the
#: handler ran and never a client's slow upload. Under another server the handler's
#: start stands in.
REQUEST_RECEIVED = "hookinbox.request_received"

#: Client connections the server cut off or refused, by reason (the list is in
#: docs/server.md: ``header_timeout``, ``write_stalled``, ``upgrade_refused`` ...). The HTTP
#: server (:mod:`hookinbox.server`) is one per process and is built by uvicorn's server,
#: not by an inbox: so this one counter is per process, and each inbox's registry shows it.
CONNECTIONS_CUT = Counter(
    "hookinbox_connections_cut",
    "Client connections the server closed before a normal answer, by reason.",
    ["reason"],
    registry=None,
)


#: The garbage collector's pauses, by generation: the whole process stops for each (every
#: request in flight waits), so they are the first suspect of a latency tail. One per
#: process, like the connection cuts, filled once :func:`watch_gc_pauses` is called.
GC_PAUSES = Histogram(
    "hookinbox_gc_pause_seconds",
    "Pauses of the garbage collector (the whole process stops), by generation.",
    ["generation"],
    buckets=_WAIT_BUCKETS,
    registry=None,
)


def watch_gc_pauses() -> None:
    """Time every collection of this process into :data:`GC_PAUSES` (once per process;
    a second call does nothing). The callback costs two clock reads per collection."""
    if any(isinstance(getattr(cb, "__self__", None), _GcWatch) for cb in gc.callbacks):
        return
    gc.callbacks.append(_GcWatch().callback)


class _GcWatch:
    __slots__ = ("_children", "_started")

    def __init__(self) -> None:
        self._started = 0.0
        self._children = [GC_PAUSES.labels(str(generation)) for generation in range(3)]

    def callback(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self._children[info["generation"]].observe(time.perf_counter() - self._started)


def multiprocess_dir() -> str | None:
    return os.environ.get("PROMETHEUS_MULTIPROC_DIR") or None


#: The smallest values file prometheus-client reads: its 4-byte used size and padding.
_VALUES_FILE_HEAD = 8


class ProcessFilesCollector(MultiProcessCollector):
    """Every process's values files, leaving out a file another process has just created
    and not yet sized: prometheus-client opens a new file empty and then sizes it, and
    read in between it raises ``struct.error`` (a 500 from ``/metrics`` as a worker
    starts or meets a new label). Such a file holds no value yet."""

    def collect(self) -> Any:
        files = []
        for name in glob.glob(os.path.join(self._path, "*.db")):
            try:
                if os.path.getsize(name) >= _VALUES_FILE_HEAD:
                    files.append(name)
            except OSError:  # removed since the listing (a dead process's live gauges)
                continue
        return self.merge(files, accumulate=True)  # type: ignore[no-untyped-call]


#: Answers the store already counts elsewhere (the journal) or that are no receipt.
UNTALLIED = frozenset({"accepted", "challenge"})


class ReceiptTally:
    """Answers per minute, source and outcome in this process, waiting to be added to
    the store's counts (:meth:`take`, by the inbox every few seconds).

    A refused delivery is never journaled (a flood of forged requests must not cause a
    write each), so the counts of duplicates and refusals the admin shows come from
    here: every process adds what it counted, one upsert per (minute, source,
    outcome) and flush, and the store's sum is the same in every process and after a
    restart. Accepted deliveries are counted from the journal instead."""

    def __init__(self) -> None:
        self._pending: dict[tuple[int, str, str], int] = defaultdict(int)

    def add(self, source: str, outcome: str, now: float | None = None) -> None:
        if outcome in UNTALLIED:
            return
        minute = int((time.time() if now is None else now) // 60)
        self._pending[(minute, source, outcome)] += 1

    def take(self) -> dict[tuple[int, str, str], int]:
        """What was counted since the last take; forgotten here (see :meth:`put_back`)."""
        taken, self._pending = dict(self._pending), defaultdict(int)
        return taken

    def put_back(self, counts: dict[tuple[int, str, str], int]) -> None:
        """Counts a flush could not write, to go with the next one."""
        for key, value in counts.items():
            self._pending[key] += value


class BuildInfo(Collector):
    """``hookinbox_build_info{version,python} 1``: which build answers (the Prometheus
    ``*_build_info`` convention). A collector rather than a Gauge, so it is the same in
    multiprocess mode, where a process's own registry is not read."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "hookinbox_build_info",
            "The hookinbox version and Python version of this process (always 1).",
            labels=["version", "python"],
        )
        family.add_metric([__version__, platform.python_version()], 1)
        yield family


class _JobMetrics(NamedTuple):
    """One route's job metrics (the children for its source and action)."""

    started: Any
    ran: Any
    completed: Any


class Metrics:
    """The counters and histograms of one inbox (its own registry, so tests and several
    inboxes in one process do not share values)."""

    def __init__(self, sources: Iterable[str] = (), *, slowest_job_seconds: float = 600.0) -> None:
        # Process-wide and idempotent: prometheus-client reads it when a metric is made.
        disable_created_metrics()  # type: ignore[no-untyped-call]
        self.registry = CollectorRegistry(auto_describe=True)
        self._sources = frozenset(sources)
        self.receipts = ReceiptTally()
        self._answered: dict[tuple[str, str], tuple[Any, Any]] = {}
        self._jobs: dict[tuple[str, str], _JobMetrics] = {}
        self._reasons: set[str] = set()
        reg = self.registry
        ProcessCollector(registry=reg)
        PlatformCollector(registry=reg)
        # The HTTP server is one per process and counts into it; every inbox shows it.
        reg.register(CONNECTIONS_CUT)
        reg.register(GC_PAUSES)
        self.deliveries = Counter(
            "hookinbox_deliveries",
            "Deliveries answered, by source and outcome (accepted, duplicate, challenge,"
            " or the refusal's error code).",
            ["source", "outcome"],
            registry=reg,
        )
        self.answer_seconds = Histogram(
            "hookinbox_answer_seconds",
            "Time from the whole request (its last byte read, in hookinbox serve) to the"
            " webhook answer, by source.",
            ["source"],
            buckets=_ANSWER_BUCKETS,
            registry=reg,
        )
        self.reserve_seconds = Histogram(
            "hookinbox_reserve_seconds",
            "Where a batch of reservations spends its time: gathering (from its first"
            " delivery's hand-off to the batch leaving, including a wait for a free batch"
            " slot) and commit (the store's round trip).",
            ["phase"],
            buckets=_WAIT_BUCKETS,
            registry=reg,
        )
        self.reserve_batch_size = Histogram(
            "hookinbox_reserve_batch_size",
            "Deliveries per reservation batch (one commit each).",
            buckets=_BATCH_BUCKETS,
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
            "Job attempts that failed and were rescheduled, by reason (the failure's code).",
            [*job_labels, "reason"],
            registry=reg,
        )
        self.jobs_failed = Counter(
            "hookinbox_jobs_failed",
            "Jobs dead-lettered (attempts exhausted or unrunnable), by reason.",
            [*job_labels, "reason"],
            registry=reg,
        )
        self.resource_events = Counter(
            "hookinbox_resource_events",
            "Events applied to tracked resources, by kind (machine) and outcome.",
            ["kind", "outcome"],
            registry=reg,
        )
        self.rejected = Counter(
            "hookinbox_rejected_deliveries",
            "Deliveries refused for their signature or timestamp, by source, reason and what"
            " became of the copy (kept, kept_without_body, rate_limited, busy, off,"
            " store_error).",
            ["source", "reason", "kept"],
            registry=reg,
        )
        self.ordered_late = Counter(
            "hookinbox_ordered_reservations_late",
            "Reservations of an ordered route that committed later than the workers' order"
            " grace after their id was made: a later job of the same key may have run"
            " before them.",
            ["source"],
            registry=reg,
        )
        self.catch_up_events = Counter(
            "hookinbox_catch_up_events",
            "Events catch-up looked at in a provider's API, by source and result: pulled"
            " (listed as not delivered), already_had (the journal held it), new (reserved"
            " now, origin catch_up), requested (a redelivery or recovery asked of the"
            " provider, which then sends a signed webhook).",
            ["source", "result"],
            registry=reg,
        )
        self.handler_seconds = Histogram(
            "hookinbox_handler_seconds",
            "Time an action (handler or forward) ran, by source and action.",
            job_labels,
            buckets=handler_buckets(slowest_job_seconds),
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
        self.receipts.add(label, outcome)

    def rejected_delivery(self, source: str, reason: str, kept: str) -> None:
        """A refusal for a signature or a timestamp, and whether a copy was kept."""
        self.rejected.labels(self.source_label(source), reason, kept).inc()

    def ordered_reservation_late(self, source: str) -> None:
        self.ordered_late.labels(self.source_label(source)).inc()

    def caught_up(self, source: str, result: str, count: int) -> None:
        """``count`` events of one catch-up page with one ``result``."""
        if count:
            self.catch_up_events.labels(self.source_label(source), result).inc(count)

    # -- working ----------------------------------------------------------------------
    def _job(self, source: str, action: str) -> _JobMetrics:
        """A route's children, looked up once: ``labels()`` per job cost more than the
        three updates (Prometheus keeps every child it made anyway)."""
        found = self._jobs.get((source, action))
        if found is None:
            found = _JobMetrics(
                self.jobs_started.labels(source, action),
                self.handler_seconds.labels(source, action),
                self.jobs_completed.labels(source, action),
            )
            self._jobs[(source, action)] = found
        return found

    def job_started(self, source: str, action: str) -> None:
        self._job(source, action).started.inc()

    def job_ran(self, source: str, action: str, seconds: float) -> None:
        """The action returned or raised after ``seconds``."""
        self._job(source, action).ran.observe(seconds)

    def job_completed(self, source: str, action: str) -> None:
        self._job(source, action).completed.inc()

    def job_retried(self, source: str, action: str, reason: str) -> None:
        self.jobs_retried.labels(source, action, self.reason_label(reason)).inc()

    def job_failed(self, source: str, action: str, reason: str) -> None:
        """Dead-lettered with ``reason``."""
        self.jobs_failed.labels(source, action, self.reason_label(reason)).inc()

    def reason_label(self, reason: str) -> str:
        if reason in self._reasons:
            return reason
        if len(self._reasons) >= MAX_REASONS:
            return OTHER_REASON
        self._reasons.add(reason)
        return reason

    def resource_event(self, kind: str, outcome: str) -> None:
        """One event applied to a tracked resource (``applied``, ``rejected_transition``,
        ``tenant_mismatch``, ``parked``...), by a worker or by the receiver (inline)."""
        self.resource_events.labels(kind, outcome).inc()

    # -- exposition -------------------------------------------------------------------
    def exposition(self, extra: Sequence[Collector] = ()) -> bytes:
        """The Prometheus text format: this process's values, or every process's when
        ``PROMETHEUS_MULTIPROC_DIR`` is set, plus ``extra`` collectors and the build info."""
        extra = (BuildInfo(), *extra)
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
        ProcessFilesCollector(registry, path=path)  # type: ignore[no-untyped-call]
        for collector in extra:
            registry.register(collector)
        return generate_latest(registry)
