"""Which bodies a source takes: JSON objects, forms, or either by Content-Type.

The receiver (through the source's verifier) and the worker (reading the stored body
again for a handler) ask the same question with the same inputs -- the source's config
and the delivery's Content-Type, kept with it -- so a body accepted as a form is read as
that form by the handler, and a JSON body as JSON.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hookinbox.config import Config, Source
from hookinbox.payload import JSON_BODY, BodyFormat


def body_format(source: Source) -> BodyFormat:
    """The source's :class:`~hookinbox.payload.BodyFormat`: Slack's forms carry their
    interactivity JSON in the ``payload`` field."""
    kind = source.body_kind
    if kind == "json":
        return JSON_BODY
    return BodyFormat(kind, ("payload",) if source.scheme == "slack" else ())


class BodyReader:
    """For the worker: each source's stored body read as its receiver read it."""

    def __init__(self, config: Config) -> None:
        self._formats = {name: body_format(source) for name, source in config.sources.items()}

    def parse(self, source: str, body: bytes, headers: Mapping[str, str]) -> dict[str, Any]:
        fmt = self._formats.get(source, JSON_BODY)
        return fmt.parse(body, headers.get("content-type"))
