"""Stores: pick one by the database URL.

Everything outside this package imports from here, never from a module inside it: the
records the store exchanges, the :class:`Store` (one attribute per concept:
``store.journal``, ``store.queue``, ``store.effects``, ``store.audit``,
``store.sources``, ``store.resources``, ``store.outbox``, ``store.reads``,
``store.retention``, ``store.rejected``) and :func:`open_store_for`. The layout is in docs/store.md.
"""

from __future__ import annotations

from hookinbox.store.core import Store
from hookinbox.store.decisions import TransitionRules
from hookinbox.store.destinations import (
    Admission,
    DestinationLimits,
    DestinationState,
    Release,
)
from hookinbox.store.notices import FactGroup, NewNotice
from hookinbox.store.operator_records import (
    Anomalies,
    DeadLetter,
    JobDetail,
    OperatorAction,
    SourceState,
    StoreGaugeReadings,
)
from hookinbox.store.queue import DeadLetterOrder
from hookinbox.store.records import (
    JOB_STATES,
    AttemptDetail,
    AttemptView,
    ClaimedJob,
    DeliverySearch,
    DeliveryStatus,
    DeliveryView,
    EffectRecord,
    EffectStart,
    JobState,
    JobView,
    NewDelivery,
    NewJob,
    PayloadMatch,
    Reservation,
    Settlement,
    SettleOutcome,
    iso,
)
from hookinbox.store.rejected import NewRejected, RejectedDelivery
from hookinbox.store.resource_records import (
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
from hookinbox.store.reviews import TransitionReview


def open_store_for(url: str) -> Store:
    """The store for ``url``, not yet opened: ``sqlite:///PATH`` or ``postgresql://...``."""
    if url.startswith("sqlite:"):
        from hookinbox.store.sqlite import SQLiteDriver

        return Store(SQLiteDriver(url))
    from hookinbox.store.postgres import PostgresDriver

    return Store(PostgresDriver(url))


__all__ = [
    "JOB_STATES",
    "OUTBOX_STATES",
    "OUTCOMES",
    "Admission",
    "Anomalies",
    "AttemptDetail",
    "AttemptView",
    "ClaimedJob",
    "ClaimedOutbox",
    "DeadLetter",
    "DeadLetterOrder",
    "DeliverySearch",
    "DeliveryStatus",
    "DeliveryView",
    "DestinationLimits",
    "DestinationState",
    "EffectRecord",
    "EffectStart",
    "FactGroup",
    "Finding",
    "JobDetail",
    "JobState",
    "JobView",
    "NewDelivery",
    "NewJob",
    "NewNotice",
    "NewRejected",
    "OperatorAction",
    "OutboxState",
    "OutboxView",
    "Outcome",
    "ParkPolicy",
    "PayloadMatch",
    "RejectedDelivery",
    "Release",
    "Reservation",
    "ResourceEvent",
    "ResourceOutcome",
    "ResourceView",
    "SettleOutcome",
    "Settlement",
    "SourceState",
    "Store",
    "StoreGaugeReadings",
    "TransitionReview",
    "TransitionRules",
    "TransitionView",
    "iso",
    "open_store_for",
]
