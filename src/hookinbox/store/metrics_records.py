"""Records the metrics gauges and the admin's read-only lists are built from.

They live apart from :mod:`hookinbox.store.base` so the receiving and working contract
stays small. Every field is an id, a count, a code or a time, never a payload.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

SearchStatus = Literal["accepted", "processing", "completed", "failed"]


@dataclass(frozen=True, slots=True)
class StoreGaugeReadings:
    """One reading of the store gauges, each keyed by source (missing means 0)."""

    #: Jobs accepted (incl. scheduled retries) or processing.
    queue_depth: dict[str, int] = field(default_factory=dict)
    #: Age in seconds of the oldest due job no worker has claimed.
    lag_seconds: dict[str, float] = field(default_factory=dict)
    dead_letters: dict[str, int] = field(default_factory=dict)
    parked: dict[str, int] = field(default_factory=dict)
    #: Outbox rows waiting or being sent (pending, sending).
    outbox_unsent: dict[str, int] = field(default_factory=dict)
    #: Outbox dead letters (failed): sent again only by ``hookinbox outbox retry``.
    outbox_failed: dict[str, int] = field(default_factory=dict)
    #: Paused sources only: seconds since the pause.
    paused_seconds: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class DeliverySearch:
    """A keyset page of the journal, newest first. ``since``/``until`` are unix seconds,
    turned into bounds on the time-ordered delivery id, so the primary key serves them."""

    ref: str | None = None  # a delivery id or an event id
    source: str | None = None
    event_type: str | None = None
    status: SearchStatus | None = None
    since: float | None = None
    until: float | None = None
    before: str | None = None  # the last delivery id of the previous page
    limit: int = 50


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """A failed job with its delivery's identity, for the dead-letter list."""

    job_id: str
    delivery_id: str
    source: str
    action: str
    event_id: str
    event_type: str
    attempts: int
    last_error: str | None
    failed_at: datetime | None
