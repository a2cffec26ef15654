"""The shapes the JSON API takes and answers, as pydantic models.

They serve twice: a request's query and body are validated with them (a value outside
the shape is a 400 ``invalid_argument``), and the OpenAPI document is generated from
them (:mod:`hookinbox.api.spec`), so the document cannot drift from what is checked.
Answers are what the operator functions' ``as_json()`` return; their models list the
fields a client may rely on and allow more (a later version may add fields). A model
whose class is named apart from a namesake elsewhere in the package keeps its published
schema name as its ``title``: clients generate code from those names.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from hookinbox.ops.dlq import BULK_PREVIEW, MAX_BULK
from hookinbox.ops.search import MAX_TERM

#: The most dead letters one API retry may touch.
MAX_API_RETRY = 1000
#: The most rows one API page lists.
MAX_PAGE = 500
#: The most kept rejected deliveries one API retry checks again.
MAX_REJECTED_RETRY = 1000
#: The most rows of each kind one API purge deletes (call again for the rest).
MAX_PURGE_ROWS = 100_000

#: No control characters: neither a store's text nor an audit line holds one.
PRINTABLE = r"^[^\u0000-\u001f\u007f-\u009f]*$"
#: Printable, and not empty or blank: a filter, pick or cursor given empty (``?source=``,
#: a client's variable never set) would read as one left out and widen a list, a replay
#: or a bulk retry to everything. Only the API refuses it: the admin's forms send every
#: field, empty for "any", and its pages read that as not given
#: (``ops.search.clean_term``).
_CHARACTER = r"[^\u0000-\u001f\u007f-\u009f]"
NON_BLANK = rf"^{_CHARACTER}*[^\s\u0000-\u001f\u007f-\u009f]{_CHARACTER}*$"
Term = Annotated[str, Field(max_length=MAX_TERM, pattern=NON_BLANK)]
When = Annotated[
    str,
    Field(
        max_length=40,
        pattern=NON_BLANK,
        description="A duration before now (24h, 15m, 7d), an ISO time (UTC when bare) "
        "or unix seconds",
    ),
]
Status = Literal["accepted", "processing", "completed", "failed"]
OutboxStateName = Literal["pending", "sending", "sent", "failed"]
SourceStateName = Literal["receiving", "paused", "not_configured"]
Duration = Annotated[
    str,
    Field(max_length=20, pattern=r"^\s*\d+(\.\d+)?\s*(ms|s|m|h|d|w)?\s*$"),
]


SourceName = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_\-]+$")]


class _Input(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _Output(BaseModel):
    model_config = ConfigDict(extra="allow")


# -- inputs ---------------------------------------------------------------------------
class DeliveryQueryParams(_Input):
    ref: Term | None = Field(None, description="A delivery id, job id or event id")
    source: Term | None = None
    type: Term | None = Field(None, description="A prefix (order) or a glob (order.*)")
    status: Status | None = None
    since: When | None = None
    until: When | None = None
    where: Term | None = Field(
        None,
        description="A payload field of retained payloads: data.object.customer = cus_123 "
        "(within at most 7 days; the last 24 hours unless since is given)",
    )
    before: Term | None = Field(None, description="The next_before of the previous page")
    limit: int = Field(50, ge=1, le=MAX_PAGE)


class SourceParam(_Input):
    source: Term | None = Field(None, description="When the event id exists in several sources")


class DeadLetterQueryParams(_Input):
    source: Term | None = None
    action: Term | None = None
    reason: Term | None = Field(None, description="The last error code (http_503, ...)")
    since: When | None = Field(None, description="Failed at or after")
    until: When | None = Field(None, description="Failed before")
    before: Term | None = Field(None, description="The last job id of the previous page")
    limit: int = Field(50, ge=1, le=MAX_PAGE)


class ReviewQueryParams(_Input):
    all: bool = Field(False, description="Reviewed ones too (by default only those waiting)")
    tenant: Term | None = Field(None, description="Only the lines filed under this tenant")
    source: Term | None = Field(None, description="Only the lines this source's events wrote")
    before: int | None = Field(None, ge=1, description="The last id of the previous page")
    limit: int = Field(50, ge=1, le=1000)


class ReviewResolution(_Input):
    note: Annotated[str, Field(min_length=1, max_length=2000)] = Field(
        description="What was decided, and why (kept with the review and in the audit)"
    )


class ReconcileParams(_Input):
    limit: int = Field(20, ge=1, le=200, description="Samples listed per check")


class RetryMatching(_Input):
    source: Term | None = None
    action: Term | None = None
    reason: Term | None = None
    since: When | None = None
    until: When | None = None
    limit: int | None = Field(
        None,
        ge=1,
        le=min(MAX_API_RETRY, MAX_BULK),
        description=f"Needed to retry; a dry run without one previews {BULK_PREVIEW}",
    )
    dry_run: bool = Field(True, description="The preview (the default): change nothing")
    expect: int | None = Field(
        None, ge=0, le=MAX_API_RETRY, description="Refuse unless exactly this many are selected"
    )


class RetryOne(_Input):
    dry_run: bool = False


class ReplayRequest(_Input):
    action: Term | None = Field(None, description="Only this action's job")
    dry_run: bool = False
    force_effects: bool = Field(False, description="Supersede recorded effects: make them again")


class RejectedQueryParams(_Input):
    source: Term | None = None
    all: bool = Field(False, description="Those a retry accepted too (by default not)")
    before: Term | None = Field(None, description="The last id of the previous page")
    limit: int = Field(50, ge=1, le=MAX_PAGE)


class RejectedRetry(_Input):
    ids: Annotated[list[Term], Field(min_length=1, max_length=100)] | None = Field(
        None, description="These kept deliveries (or all: true)"
    )
    all: bool = Field(False, description="Every one not yet accepted, oldest first, to limit")
    source: Term | None = Field(None, description="With all: only this source")
    limit: int | None = Field(None, ge=1, le=MAX_REJECTED_RETRY, description="Needed with all")


class OutboxQueryParams(_Input):
    state: OutboxStateName | None = Field(None, description="failed: the dead letters")
    kind: Term | None = None
    limit: int = Field(50, ge=1, le=MAX_PAGE)


class ResourceQueryParams(_Input):
    kind: Term | None = None
    tenant: Term | None = None
    state: Term | None = None
    before: Term | None = Field(None, description="The next_before of the previous page")
    limit: int = Field(50, ge=1, le=MAX_PAGE)


class PurgeRequest(_Input):
    older_than: Duration | None = Field(
        None,
        description="The key retention (30d), or with payloads_only the payload retention; "
        "the config's by default",
    )
    payloads_only: bool = Field(False, description="Drop only payloads, keep the journal")
    batch: int | None = Field(None, ge=1, le=10_000, description="Rows per transaction")
    max_rows: int = Field(
        10_000, ge=1, le=MAX_PURGE_ROWS, description="The most rows of each kind this call deletes"
    )
    dry_run: bool = Field(True, description="The preview (the default): count, delete nothing")


class ErasureRequest(_Input):
    subject: str = Field(
        min_length=1,
        max_length=1000,
        pattern=PRINTABLE,
        description="The subject's value as the source's subject pointer finds it (cus_123); "
        "hashed with the [privacy] key, never stored, logged or audited",
    )
    source: SourceName | None = Field(None, description="Only this source's deliveries")
    batch: int | None = Field(None, ge=1, le=10_000, description="Rows per transaction")
    dry_run: bool = Field(True, description="The preview (the default): count, erase nothing")


class CatchUpRequest(_Input):
    since: Annotated[str, Field(max_length=40, pattern=NON_BLANK)] | None = Field(
        None,
        description="Look from then (24h, an ISO time) within the window, leaving the cursor "
        "alone; the cursor's position by default",
    )
    dry_run: bool = Field(
        True, description="The preview (the default): list and compare, reserve nothing"
    )


class PauseRequest(_Input):
    #: Left out, a pause has no reason; given empty, it would be stored as one.
    reason: Annotated[str, Field(max_length=200, pattern=NON_BLANK)] | None = None


# -- outputs --------------------------------------------------------------------------
class Error(_Output):
    error: str = Field(description="A stable code: invalid_argument, not_found, refused, ...")
    sources: list[str] | None = Field(None, description="ambiguous_id: the sources to choose")


class DeliverySummary(_Output):
    delivery_id: str
    source: str
    event_id: str
    type: str
    status: Status
    first_seen_at: str
    last_seen_at: str
    delivery_count: int
    conflicts: int
    body_sha256: str
    payload_retained: bool
    origin: Literal["webhook", "catch_up"] = Field(
        description="webhook (received, signature checked) or catch_up (pulled from the "
        "provider's API, authenticated by TLS and the API key)"
    )


class DeliveryPage(_Output):
    count: int = Field(description="Matches in all, counted up to 1000")
    count_capped: bool
    next_before: str | None
    since: str | None
    until: str | None
    deliveries: list[DeliverySummary]


class Receipts(_Output):
    first_seen_at: str
    last_seen_at: str
    count: int
    conflicts: int


class Job(_Output):
    job_id: str
    action: str
    state: Status
    attempts: int
    max_attempts: int
    last_error: str | None
    attempt_history: list[dict[str, Any]]
    waiting_behind: dict[str, Any] | None = Field(
        None, description="An ordered job's key head it waits behind (job_id, delivery_id, ...)"
    )


class TracedDelivery(_Output):
    receipts: Receipts
    journal: DeliverySummary
    jobs: list[Job]
    effects: list[dict[str, Any]]
    operator_actions: list[dict[str, Any]]
    routes: list[dict[str, Any]]


class DeadLetter(_Output):
    job_id: str
    delivery_id: str
    source: str
    action: str
    state: Status
    attempts: int
    max_attempts: int
    last_error: str | None
    event_id: str
    type: str
    payload_retained: bool
    failed_at: str | None
    review_deadline: str | None
    holds_key: bool = Field(
        False, description="An ordered route's dead letter that holds its key (on_dead_letter)"
    )


class DeadLetterList(_Output):
    count: int
    review_days: float
    dead_letters: list[DeadLetter]


class RetryItem(_Output):
    job_id: str
    delivery_id: str
    source: str
    action: str
    outcome: Literal["requeued", "would_requeue", "refused"]
    reason: str | None
    last_error: str | None


class RetryReport(_Output):
    dry_run: bool
    matched: int | None = Field(description="Bulk retry: dead letters the filter matched")
    selected: int
    requeued: int
    would_requeue: int
    refused: int
    items: list[RetryItem]


class ReplayJob(_Output):
    job_id: str
    action: str
    outcome: str
    reason: str | None


class ReplayReport(_Output):
    delivery: dict[str, Any]
    dry_run: bool
    force_effects: bool
    jobs: list[ReplayJob]


class SourceEntry(_Output):
    model_config = ConfigDict(title="Source")

    source: str
    configured: bool
    scheme: str | None
    routes: list[str]
    state: SourceStateName = Field(description="One word, the CLI's and the admin's")
    paused: bool
    reason: str | None
    changed_at: str | None
    changed_by: str | None


class CatchUpRun(_Output):
    source: str
    provider: Literal["stripe", "github", "svix"]
    dry_run: bool
    floor: str | None = Field(description="The oldest time the run looked at")
    pages: int
    pulled: int = Field(description="Events the provider listed as not delivered")
    already_had: int = Field(description="Of those, events the journal already held")
    new: int = Field(description="Events reserved now (origin catch_up)")
    requested: int = Field(description="Redeliveries or recoveries asked of the provider")
    delivered: int = Field(description="Events the provider listed as delivered")
    refused: int = Field(description="Events the receiver would refuse (not reserved)")
    complete: bool = Field(description="The run reached the cursor's position")
    stopped: str | None = Field(description="max_pages, cursor_moved, or an error code")
    cursor: str | None = Field(description="The cursor's position after the run")
    waited_seconds: float
    new_delivery_ids: list[str]
    error: str | None


class Sources(_Output):
    sources: list[SourceEntry]


class SourcePauseState(_Output):
    model_config = ConfigDict(title="SourceState")

    source: str
    paused: bool
    reason: str | None
    changed_at: str | None
    changed_by: str | None


class Review(_Output):
    id: int
    resource_id: str | None = Field(description="None on a mismatch: another party's resource")
    kind: str
    source: str | None = Field(description="The source whose event was refused")
    tenant: str | None = Field(description="The sender's tenant, never the refused resource's")
    to: str
    reason: str | None
    delivery_id: str | None
    job_id: str | None
    at: str | None
    reviewed_at: str | None
    reviewed_by: str | None
    review_note: str | None


class ReviewWithDeadline(Review):
    review_deadline: str | None


class Reviews(_Output):
    count: int
    review_seconds: float
    reviews: list[ReviewWithDeadline]


class ReconcileFinding(_Output):
    model_config = ConfigDict(title="Finding")

    check: str
    title: str
    count: int
    items: list[dict[str, Any]]


class Reconciliation(_Output):
    clean: bool
    total: int
    findings: list[ReconcileFinding]


class RejectedRow(_Output):
    id: str
    source: str
    reason: str
    body_sha256: str
    body_bytes: int
    body_kept: bool
    header_names: list[str]
    first_seen_at: str | None
    last_seen_at: str | None
    seen: int
    retried_at: str | None
    retry_outcome: str | None
    retry_delivery_id: str | None


class RejectedTotal(_Output):
    source: str
    reason: str
    rows: int
    seen: int
    stored_bytes: int


class RejectedList(_Output):
    rejected: list[RejectedRow]
    totals: list[RejectedTotal]
    next_before: str | None


class RejectedRetryResult(_Output):
    rejected_id: str
    source: str
    outcome: str = Field(description="accepted, duplicate, or the code it is still refused with")
    delivery_id: str | None


class RejectedRetryReport(_Output):
    retried: int
    accepted: int
    still_refused: int
    results: list[RejectedRetryResult]


class OutboxRow(_Output):
    key: str
    kind: str
    resource_id: str | None
    state: OutboxStateName
    attempts: int
    last_error: str | None
    next_attempt_at: str | None
    created_at: str | None
    updated_at: str | None
    sent_at: str | None
    failed_at: str | None


class OutboxEntry(OutboxRow):
    body: dict[str, Any]


class OutboxList(_Output):
    outbox: list[OutboxRow]


class Resource(_Output):
    resource_id: str
    kind: str
    tenant: str
    owner: str
    state: str
    provider_ref: str | None
    sources: list[str] = Field(description="The sources whose events may move it; [] until bound")
    version: int
    created_at: str | None
    updated_at: str | None


class Transition(_Output):
    id: int
    from_: str | None = Field(alias="from")
    to: str | None
    outcome: str
    reason: str | None
    source: str | None
    delivery_id: str | None
    job_id: str | None
    event_type: str | None
    event_time: str | None
    outbox_key: str | None
    at: str | None


class ResourceList(_Output):
    resources: list[Resource]
    next_before: str | None


class ResourceDetail(Resource):
    transitions: list[Transition]


class Transitions(_Output):
    resource_id: str
    transitions: list[Transition]


class PurgeStep(_Output):
    kind: Literal["payloads", "deliveries", "rejected"]
    older_than_seconds: float
    candidates: int
    deleted: int
    batches: int
    held: int


class PartitionRetirement(_Output):
    table: Literal["payloads", "attempts", "jobs"] = Field(description="The partitioned table")
    name: str
    rows: int = Field(description="Rows it held (-1: not counted, a dry run or deferred)")
    held: int = Field(
        description="Rows kept past their day (moved to the DEFAULT partition); deferred or "
        "a dry run: the payloads, the jobs whose attempts, or the jobs that would be kept"
    )
    retired: bool
    deferred: Literal["lock", "held", "dry_run"] | None = Field(
        None, description="Why it stays this time: a lock not had in time, too many held"
    )
    seconds: float = Field(0.0, description="Wall seconds of its retiring transaction")
    locked_seconds: float = Field(
        0.0,
        description="Of those, the seconds the table's writers queued behind its lock, "
        "from the DETACH's lock request to the DROP, as the database measured them (its "
        "commit follows)",
    )


class PurgeReport(_Output):
    dry_run: bool
    steps: list[PurgeStep]
    partitions: list[PartitionRetirement] = Field(
        default_factory=list,
        description="PostgreSQL's day partitions of payloads past the payload retention and "
        "of attempts past the key retention",
    )
    partitions_made: int = Field(0, description="Day partitions made ahead by this purge")


class SubjectFound(_Output):
    deliveries: int
    payloads: int
    snippets: int
    rejected_bodies: int


class SubjectErased(_Output):
    payloads: int
    snippets: int
    rejected_bodies: int


class ErasureReport(_Output):
    dry_run: bool
    source: str | None
    subject_hash: str = Field(description="The subject's keyed hash (what the audit holds)")
    found: SubjectFound
    erased: SubjectErased
    batches: int
