"""OpenTelemetry tracing (the extra ``hookinbox[otel]``), built only when ``[otel]
enabled``: imported by :func:`hookinbox.tracing.build_tracing`, never at start-up otherwise.

Spans (all with ``hookinbox.source`` and, once known, ``hookinbox.delivery_id``):

- ``hookinbox.receive`` (SERVER): one delivery, child of the provider's ``traceparent``
  when the request has one; ``hookinbox.outcome`` is accepted, duplicate, challenge or
  the refusal's code;
- ``hookinbox.reserve``: its reservation (the batch commit it waited for);
- ``hookinbox.claim``: a worker's claim, linked to the trace of every job it leased;
- ``hookinbox.attempt`` (CONSUMER): one attempt, child of the receive span, whose
  ``traceparent`` is stored with the delivery's headers;
- ``hookinbox.forward`` (CLIENT): one forward POST, whose context is the
  ``traceparent`` the target receives (so its own spans continue the trace).

The tracer provider is the application's when it already set an SDK one (a library
user), else one of our own with a batch processor and the exporter ``OTEL_TRACES_EXPORTER``
names (``otlp`` over HTTP by default, ``console``, ``none``), its endpoint and headers
from the standard ``OTEL_EXPORTER_OTLP_*`` variables, its resource from
``OTEL_SERVICE_NAME`` / ``OTEL_RESOURCE_ATTRIBUTES``.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator, Mapping, MutableMapping, Sequence
from typing import Any

from hookinbox.errors import ConfigError, HookinboxError
from hookinbox.http.errors import is_server_error
from hookinbox.version import __version__

#: The W3C trace context headers (the same names as hookinbox.tracing's).
TRACEPARENT = "traceparent"
TRACESTATE = "tracestate"

try:
    from opentelemetry import context as otel_context
    from opentelemetry import trace
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        ConsoleSpanExporter,
        SpanExporter,
    )
    from opentelemetry.trace import Link, SpanKind, Status, StatusCode
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
except ImportError as exc:  # pragma: no cover - the extra is a test dependency
    raise ConfigError(
        "otel.enabled: OpenTelemetry needs the extra: pip install 'hookinbox[otel]'"
    ) from exc

_PROPAGATOR = TraceContextTextMapPropagator()


def _exporter() -> SpanExporter | None:
    chosen = os.environ.get("OTEL_TRACES_EXPORTER", "otlp").split(",")[0].strip().lower()
    if chosen == "none":
        return None
    if chosen == "console":
        return ConsoleSpanExporter()
    if chosen != "otlp":
        raise ConfigError(f"OTEL_TRACES_EXPORTER: {chosen!r} is not otlp, console or none")
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    except ImportError:  # pragma: no cover
        raise ConfigError(
            "otel.enabled: the OTLP exporter needs the extra: pip install 'hookinbox[otel]'"
        ) from None
    return OTLPSpanExporter()


class _Span:
    __slots__ = ("_span",)

    def __init__(self, span: Any) -> None:
        self._span = span

    def set(self, key: str, value: str | int | bool) -> None:
        self._span.set_attribute(key, value)


class OtelTracing:
    enabled = True

    def __init__(self, *, service_name: str = "hookinbox", exporter: Any = None) -> None:
        current = trace.get_tracer_provider()
        if isinstance(current, TracerProvider) and exporter is None:
            provider = current  # the application's own: its exporters, its resource
            self._own: TracerProvider | None = None
        else:
            resource = Resource.create({"service.name": service_name})
            if os.environ.get("OTEL_SERVICE_NAME"):
                resource = Resource.create()  # OTEL_SERVICE_NAME and attributes win
            provider = TracerProvider(resource=resource)
            chosen = exporter if exporter is not None else _exporter()
            if chosen is not None:
                provider.add_span_processor(BatchSpanProcessor(chosen))
            self._own = provider
        self._tracer = provider.get_tracer("hookinbox", __version__)

    # -- receiving --------------------------------------------------------------------
    @contextlib.contextmanager
    def receive(self, source: str, headers: Mapping[str, str]) -> Iterator[_Span]:
        parent = _PROPAGATOR.extract(
            {k: v for k in (TRACEPARENT, TRACESTATE) if (v := headers.get(k)) is not None}
        )
        with self._tracer.start_as_current_span(
            "hookinbox.receive",
            context=parent,
            kind=SpanKind.SERVER,
            attributes={"hookinbox.source": source},
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            try:
                yield _Span(span)
            except HookinboxError as exc:
                span.set_attribute("hookinbox.outcome", exc.code)
                if is_server_error(exc):
                    span.set_status(Status(StatusCode.ERROR, exc.code))
                raise
            except Exception as exc:
                # Never the message (it may quote the payload): the class only.
                span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
                raise

    @contextlib.contextmanager
    def reserve(self, source: str) -> Iterator[_Span]:
        with self._tracer.start_as_current_span(
            "hookinbox.reserve", attributes={"hookinbox.source": source}
        ) as span:
            yield _Span(span)

    def traceparent(self) -> str | None:
        carrier: dict[str, str] = {}
        _PROPAGATOR.inject(carrier)
        return carrier.get(TRACEPARENT)

    # -- working ----------------------------------------------------------------------
    def now_ns(self) -> int:
        return time.time_ns()

    def claimed(self, started_ns: int, jobs: Sequence[Any]) -> None:
        if not jobs:
            return
        links = []
        for job in jobs:
            found = trace.get_current_span(_parent_of(job)).get_span_context()
            if found.is_valid:
                links.append(Link(found, {"hookinbox.delivery_id": job.delivery_id}))
        span = self._tracer.start_span(
            "hookinbox.claim",
            context=otel_context.Context(),  # a root of the worker's own
            links=links,
            start_time=started_ns,
            attributes={"hookinbox.jobs": len(jobs)},
        )
        span.end()

    @contextlib.contextmanager
    def attempt(self, job: Any) -> Iterator[_Span]:
        with self._tracer.start_as_current_span(
            "hookinbox.attempt",
            context=_parent_of(job),
            kind=SpanKind.CONSUMER,
            attributes={
                "hookinbox.source": job.source,
                "hookinbox.action": job.action,
                "hookinbox.delivery_id": job.delivery_id,
                "hookinbox.job_id": job.id,
                "hookinbox.attempt": job.attempts,
                "hookinbox.trigger": job.trigger,
            },
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            try:
                yield _Span(span)
            except BaseException as exc:
                code = getattr(exc, "code", None)
                reason = code if isinstance(code, str) else type(exc).__name__
                span.set_attribute("hookinbox.outcome", reason)
                span.set_status(Status(StatusCode.ERROR, reason))
                raise
            else:
                span.set_attribute("hookinbox.outcome", "completed")

    @contextlib.contextmanager
    def forward(self, url: str, headers: MutableMapping[bytes, bytes]) -> Iterator[_Span]:
        with self._tracer.start_as_current_span(
            "hookinbox.forward",
            kind=SpanKind.CLIENT,
            attributes={"url.full": url, "http.request.method": "POST"},
            record_exception=False,
        ) as span:
            carrier: dict[str, str] = {}
            _PROPAGATOR.inject(carrier)
            headers.pop(TRACEPARENT.encode(), None)
            headers.pop(TRACESTATE.encode(), None)
            for name, value in carrier.items():
                headers[name.encode()] = value.encode()
            yield _Span(span)

    def shutdown(self) -> None:
        if self._own is not None:
            self._own.shutdown()


def _parent_of(job: Any) -> otel_context.Context:
    headers = getattr(job, "headers", None) or {}
    found = {k: v for k in (TRACEPARENT, TRACESTATE) if (v := headers.get(k)) is not None}
    return _PROPAGATOR.extract(found)
