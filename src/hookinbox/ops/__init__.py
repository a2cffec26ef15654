"""Operator commands as plain async functions over a Store and a Config.

The ``hookinbox`` CLI (:mod:`hookinbox.cli`) and the admin page call these same
functions, so both show and do exactly the same thing. Each returns a dataclass with
``as_json()``; each refuses with a :class:`~hookinbox.errors.HookinboxError` subclass
(``NotFound``, ``OperationRefused``, ``UnknownSource``) whose one-line message names ids,
never data. Every change an operator makes is audited in the store with who (``actor``)
and what.

- dead letters: :func:`dlq_list`, :func:`dlq_retry`, :func:`dlq_retry_all`
- replay: :func:`replay` (through the normal worker path; the ledger still applies)
- retention: :func:`purge`, :func:`run_purge_loop` (the background purge of ``serve``)
- erasure by data subject: :func:`erase_subject`
- reconciliation: :func:`reconcile` over the checks it is given
- pause: :func:`list_sources`, :func:`pause_source`, :func:`resume_source`,
  :class:`PausedSources` (what each receiver consults)
- trace: :func:`trace`, with the layers it is given
- search: :func:`search_deliveries` (ids as pasted, type globs, relative times, a payload
  field), :func:`find_delivery` (never picks one of two sources silently)
- notifications: :func:`list_outbox`, :func:`show_outbox`, :func:`resend_outbox`
- tracked resources: :func:`list_resources`, :func:`show_resource`,
  :func:`resource_transitions`
- rejected deliveries: :func:`rejected_page` (a retry goes through the receiver:
  :mod:`hookinbox.receive.rejected_retry`)
- rejected transitions: :func:`list_reviews`, :func:`resolve_review`
- destinations: :func:`list_destinations` (limits, circuit, forwards in flight)
- :class:`OperatorViews`: the extra layers and checks a caller hands to trace/reconcile
"""

from __future__ import annotations

from hookinbox.ops.actor import default_actor
from hookinbox.ops.destination_list import DestinationRow, list_destinations
from hookinbox.ops.dlq import (
    BULK_PREVIEW,
    MAX_BULK,
    DeadLetterFilter,
    DeadLetterListing,
    DlqRetryResult,
    RetriedJob,
    bulk_limit,
    dlq_list,
    dlq_retry,
    dlq_retry_all,
)
from hookinbox.ops.erase import ErasureResult, erase_subject
from hookinbox.ops.outbox import list_outbox, resend_outbox, show_outbox
from hookinbox.ops.purge import PurgedKind, PurgeResult, purge, run_purge_loop
from hookinbox.ops.reconcile import (
    PIPELINE_CHECKS,
    Finding,
    ReconcileCheck,
    ReconcileReport,
    StoreCheck,
    reconcile,
)
from hookinbox.ops.rejected_deliveries import RejectedPage, rejected_page
from hookinbox.ops.replay import ReplayItem, ReplayResult, replay
from hookinbox.ops.reviews import ReviewList, list_reviews, resolve_review
from hookinbox.ops.search import (
    DeliveryQuery,
    SearchPage,
    find_delivery,
    parse_when,
    search_deliveries,
)
from hookinbox.ops.sources import (
    PausedSources,
    SourceRow,
    SourcesReport,
    list_sources,
    pause_source,
    resume_source,
)
from hookinbox.ops.trace import DeliveryTrace, TracedJob, TraceLayer, TraceReport, trace
from hookinbox.ops.tracked import (
    TrackedResource,
    TrackedResourceList,
    list_resources,
    resource_transitions,
    show_resource,
)
from hookinbox.ops.views import OperatorViews

__all__ = [
    "BULK_PREVIEW",
    "MAX_BULK",
    "PIPELINE_CHECKS",
    "DeadLetterFilter",
    "DeadLetterListing",
    "DeliveryQuery",
    "DeliveryTrace",
    "DestinationRow",
    "DlqRetryResult",
    "ErasureResult",
    "Finding",
    "OperatorViews",
    "PausedSources",
    "PurgeResult",
    "PurgedKind",
    "ReconcileCheck",
    "ReconcileReport",
    "RejectedPage",
    "ReplayItem",
    "ReplayResult",
    "RetriedJob",
    "ReviewList",
    "SearchPage",
    "SourceRow",
    "SourcesReport",
    "StoreCheck",
    "TraceLayer",
    "TraceReport",
    "TracedJob",
    "TrackedResource",
    "TrackedResourceList",
    "bulk_limit",
    "default_actor",
    "dlq_list",
    "dlq_retry",
    "dlq_retry_all",
    "erase_subject",
    "find_delivery",
    "list_destinations",
    "list_outbox",
    "list_resources",
    "list_reviews",
    "list_sources",
    "parse_when",
    "pause_source",
    "purge",
    "reconcile",
    "rejected_page",
    "replay",
    "resend_outbox",
    "resolve_review",
    "resource_transitions",
    "resume_source",
    "run_purge_loop",
    "search_deliveries",
    "show_outbox",
    "show_resource",
    "trace",
]
