"""``[otel]``: OpenTelemetry traces, off by default (the extra ``hookinbox[otel]``).

::

    [otel]
    enabled = true
    service_name = "hookinbox"     # unless OTEL_SERVICE_NAME says otherwise

Where spans go is the standard environment: ``OTEL_TRACES_EXPORTER`` (``otlp``, the
default, ``console`` or ``none``), ``OTEL_EXPORTER_OTLP_ENDPOINT`` /
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``, ``OTEL_EXPORTER_OTLP_HEADERS``,
``OTEL_RESOURCE_ATTRIBUTES``, ``OTEL_SDK_DISABLED`` ... (the SDK reads them).
"""

from __future__ import annotations

from pydantic import Field

from hookinbox.config.fields import Frozen


class OtelSettings(Frozen):
    #: Trace receipts, reservations, claims, attempts and forwards with OpenTelemetry.
    enabled: bool = False
    #: ``service.name`` of the spans, unless ``OTEL_SERVICE_NAME`` is set.
    service_name: str = Field(default="hookinbox", min_length=1, max_length=100)
