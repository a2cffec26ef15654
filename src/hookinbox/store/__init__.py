"""Stores: pick one by the database URL.

Everything outside this package imports from here, never from a module inside it: the
records the store exchanges, the contract, and :func:`open_store_for`.
"""

from __future__ import annotations

from hookinbox.store.base import (
    JOB_STATES,
    AttemptView,
    ClaimedJob,
    DeliveryStatus,
    DeliveryView,
    EffectRecord,
    EffectStart,
    JobState,
    JobView,
    NewDelivery,
    NewJob,
    Reservation,
    Store,
    iso,
)
from hookinbox.store.metrics_records import DeadLetter, DeliverySearch, StoreGaugeReadings
from hookinbox.store.ops_records import Anomalies, JobDetail, OperatorAction, SourceState
from hookinbox.store.resource_types import (
    OUTBOX_STATES,
    OUTCOMES,
    ClaimedOutbox,
    Finding,
    OutboxState,
    OutboxView,
    Outcome,
    ParkPolicy,
    ResourceEvent,
    ResourceOutcome,
    ResourceView,
    TransitionView,
)


def open_store_for(url: str) -> Store:
    """The store for ``url``, not yet opened: ``sqlite:///PATH`` or ``postgresql://...``."""
    if url.startswith("sqlite:"):
        from hookinbox.store.sqlite import SQLiteStore

        return SQLiteStore(url)
    from hookinbox.store.postgres import PostgresStore

    return PostgresStore(url)


__all__ = [
    "JOB_STATES",
    "OUTBOX_STATES",
    "OUTCOMES",
    "Anomalies",
    "AttemptView",
    "ClaimedJob",
    "ClaimedOutbox",
    "DeadLetter",
    "DeliverySearch",
    "DeliveryStatus",
    "DeliveryView",
    "EffectRecord",
    "EffectStart",
    "Finding",
    "JobDetail",
    "JobState",
    "JobView",
    "NewDelivery",
    "NewJob",
    "OperatorAction",
    "OutboxState",
    "OutboxView",
    "Outcome",
    "ParkPolicy",
    "Reservation",
    "ResourceEvent",
    "ResourceOutcome",
    "ResourceView",
    "SourceState",
    "Store",
    "StoreGaugeReadings",
    "TransitionView",
    "iso",
    "open_store_for",
]
