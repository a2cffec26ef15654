"""Stores: pick one by the database URL.

Everything outside this package imports from here, never from a module inside it: the
records the store exchanges, the :class:`Store` and :func:`open_store_for`. A Store has
one attribute per concept: ``journal`` (deliveries), ``queue`` (jobs, leases, dead
letters), ``effects`` (the ledger), ``audit`` and ``sources`` (operator actions, pauses),
``resources`` and ``outbox`` (tracked resources and their notifications), ``reviews``
(rejected transitions awaiting an operator), ``notices`` (what notifiers are told of,
written to the outbox), ``destinations`` (a destination's bucket, slots and circuit),
``rejected`` (refused deliveries kept for a retry), ``admin_sessions`` (admin sessions
ended by a logout), ``receipts`` (webhook answers per minute), ``catch_up`` (catch-up's
cursor per source), ``reads`` (gauges and reconciliation queries), ``retention`` (purges),
``partitions`` (PostgreSQL's payload partitions by day) and ``erasure`` (a data subject's
payloads, snippets and kept refusals' bodies). The layout, the SQL files and the golden
test are in docs/store.md.
"""

from __future__ import annotations

from hookinbox.admission import Admission, DestinationLimits
from hookinbox.sealing import PLAINTEXT, Sealer
from hookinbox.store.catch_up import (
    CATCH_UP_ORIGIN,
    CatchUpCursor,
    CursorMove,
    PageCommit,
    PageEntry,
)
from hookinbox.store.core import SchemaVersions, Store
from hookinbox.store.decisions import TransitionRules
from hookinbox.store.destination_state import DestinationState, Release
from hookinbox.store.driver import WriteClock, timing_writes
from hookinbox.store.erasure import ErasedBatch, SubjectData
from hookinbox.store.journal import InlineApply
from hookinbox.store.notices import FactGroup, NewNotice
from hookinbox.store.operator_records import (
    Anomalies,
    DeadLetter,
    JobDetail,
    OperatorAction,
    SourceState,
    StoreGaugeReadings,
)
from hookinbox.store.partitions import PartitionInfo, Retirement
from hookinbox.store.queue import DeadLetterOrder
from hookinbox.store.records import (
    JOB_STATES,
    AttemptDetail,
    AttemptView,
    ClaimedJob,
    DeadLetterCriteria,
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
    WaitingBehind,
    iso,
)
from hookinbox.store.rejected_deliveries import NewRejected, RejectedDelivery
from hookinbox.store.resource_records import (
    OUTBOX_STATES,
    OUTCOMES,
    ClaimedOutbox,
    OutboxState,
    OutboxView,
    Outcome,
    ParkPolicy,
    ResourceEvent,
    ResourceFinding,
    ResourceOutcome,
    ResourceView,
    TransitionView,
)
from hookinbox.store.reviews import TransitionReview
from hookinbox.store.sealed_rows import SEALED_TABLES, KeyCount, RewrapBatch


def open_store_for(url: str, *, sealer: Sealer = PLAINTEXT) -> Store:
    """The store for ``url``, not yet opened: ``sqlite:///PATH`` or ``postgresql://...``.
    ``sealer``: how bodies and snippets are sealed at rest (plaintext unless given)."""
    if url.startswith("sqlite:"):
        from hookinbox.store.sqlite import SQLiteDriver

        return Store(SQLiteDriver(url), sealer=sealer)
    from hookinbox.store.postgres import PostgresDriver

    return Store(PostgresDriver(url), sealer=sealer)


__all__ = [
    "CATCH_UP_ORIGIN",
    "JOB_STATES",
    "OUTBOX_STATES",
    "OUTCOMES",
    "SEALED_TABLES",
    "Admission",
    "Anomalies",
    "AttemptDetail",
    "AttemptView",
    "CatchUpCursor",
    "ClaimedJob",
    "ClaimedOutbox",
    "CursorMove",
    "DeadLetter",
    "DeadLetterCriteria",
    "DeadLetterOrder",
    "DeliverySearch",
    "DeliveryStatus",
    "DeliveryView",
    "DestinationLimits",
    "DestinationState",
    "EffectRecord",
    "EffectStart",
    "ErasedBatch",
    "FactGroup",
    "InlineApply",
    "JobDetail",
    "JobState",
    "JobView",
    "KeyCount",
    "NewDelivery",
    "NewJob",
    "NewNotice",
    "NewRejected",
    "OperatorAction",
    "OutboxState",
    "OutboxView",
    "Outcome",
    "PageCommit",
    "PageEntry",
    "ParkPolicy",
    "PartitionInfo",
    "PayloadMatch",
    "RejectedDelivery",
    "Release",
    "Reservation",
    "ResourceEvent",
    "ResourceFinding",
    "ResourceOutcome",
    "ResourceView",
    "Retirement",
    "RewrapBatch",
    "SchemaVersions",
    "SettleOutcome",
    "Settlement",
    "SourceState",
    "Store",
    "StoreGaugeReadings",
    "SubjectData",
    "TransitionReview",
    "TransitionRules",
    "TransitionView",
    "WaitingBehind",
    "WriteClock",
    "iso",
    "open_store_for",
    "timing_writes",
]
