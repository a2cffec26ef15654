"""Distributed traces, optional: the seam every layer calls, and its no-op default.

hookinbox opens a span when it receives a delivery (continuing the provider's W3C
``traceparent`` when there is one), when it reserves it, when a worker claims jobs, for
each attempt and for each forward, and passes the forward's ``traceparent`` to the
target. Every span carries ``hookinbox.delivery_id``. The trace context crosses the
queue inside the delivery: the receive span's ``traceparent`` is stored with the
delivery's headers, and the worker continues it.

Off by default (``[otel] enabled = false``), and then nothing of OpenTelemetry is
imported: every call below is a no-op on :data:`NOOP` (a shared context manager, no
allocation), measured at noise level by ``make bench``. On, :mod:`hookinbox.otel` (the
extra ``hookinbox[otel]``) builds the real one, configured by the standard ``OTEL_*``
variables.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from hookinbox.config import Config

#: The W3C trace context header (https://www.w3.org/TR/trace-context/).
TRACEPARENT = "traceparent"
TRACESTATE = "tracestate"


class Span(Protocol):
    def set(self, key: str, value: str | int | bool) -> None:
        """An attribute (ids, codes, counts: never a payload)."""


class _NoSpan:
    """The span and the context manager of :class:`NoTracing`: does nothing, reused."""

    __slots__ = ()

    def __enter__(self) -> _NoSpan:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def set(self, key: str, value: str | int | bool) -> None:
        return None


_NO_SPAN = _NoSpan()


class Tracing(Protocol):
    enabled: bool

    def receive(self, source: str, headers: Mapping[str, str]) -> AbstractContextManager[Span]:
        """A delivery received (a server span, continuing the request's traceparent)."""
        ...

    def reserve(self, source: str) -> AbstractContextManager[Span]:
        """The reservation (journal + jobs, one commit) of the current delivery."""
        ...

    def traceparent(self) -> str | None:
        """The current span as a ``traceparent`` value (stored with the delivery)."""
        ...

    def claimed(self, started_ns: int, jobs: Sequence[Any]) -> None:
        """A worker's claim that started at ``started_ns`` and leased ``jobs``."""
        ...

    def attempt(self, job: Any) -> AbstractContextManager[Span]:
        """One attempt of a job, continuing the trace stored with its delivery."""
        ...

    def forward(
        self, url: str, headers: MutableMapping[bytes, bytes]
    ) -> AbstractContextManager[Span]:
        """One forward POST; the target's ``traceparent`` is written into ``headers``."""
        ...

    def now_ns(self) -> int: ...

    def shutdown(self) -> None: ...


class NoTracing:
    """Tracing off: every call returns at once."""

    enabled = False

    def receive(self, source: str, headers: Mapping[str, str]) -> _NoSpan:
        return _NO_SPAN

    def reserve(self, source: str) -> _NoSpan:
        return _NO_SPAN

    def traceparent(self) -> str | None:
        return None

    def claimed(self, started_ns: int, jobs: Sequence[Any]) -> None:
        return None

    def attempt(self, job: Any) -> _NoSpan:
        return _NO_SPAN

    def forward(self, url: str, headers: MutableMapping[bytes, bytes]) -> _NoSpan:
        return _NO_SPAN

    def now_ns(self) -> int:
        return 0

    def shutdown(self) -> None:
        return None


#: The tracing of an inbox that does not trace.
NOOP: Tracing = NoTracing()


def build_tracing(config: Config) -> Tracing:
    """:data:`NOOP` unless ``[otel] enabled``; then the OpenTelemetry tracing (which needs
    the extra ``hookinbox[otel]``; without it, a ConfigError names the extra)."""
    if not config.otel.enabled:
        return NOOP
    from hookinbox.otel import OtelTracing  # imported only when asked for

    return OtelTracing(service_name=config.otel.service_name)
