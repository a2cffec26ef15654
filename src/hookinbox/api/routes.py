"""The JSON API under ``/api/v1``: the operator functions of the CLI and the admin page
over HTTP, behind bearer tokens with scopes (:mod:`hookinbox.api.tokens`).

It is served by the operator listener only (``[server] admin_port``; see
:mod:`hookinbox.http.listeners`) and is off unless ``HOOKINBOX_API_TOKENS`` is set.
Every route calls the same :mod:`hookinbox.ops` function as the CLI and the admin
page; every write is audited by those functions with the actor ``api:NAME``. Errors
are ``{"error": code}`` with the status :mod:`hookinbox.http.errors` gives the code
(an input outside the route's models is 400 ``invalid_argument``), never a traceback.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

import orjson
from pydantic import BaseModel, ValidationError
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Mount, Route

from hookinbox import ops
from hookinbox.api import models
from hookinbox.api.call import Call
from hookinbox.api.spec import RouteSpec, openapi_document
from hookinbox.api.tokens import ApiToken, find_token, tokens_from
from hookinbox.catch_up import run_catch_up
from hookinbox.config import Config
from hookinbox.config.fields import parse_duration
from hookinbox.errors import (
    ConfigError,
    Forbidden,
    HookinboxError,
    InvalidArgument,
    NotFound,
    OperationRefused,
    Unauthenticated,
)
from hookinbox.http.errors import (
    error_response,
    internal_error_response,
    unexpected_error_fields,
)
from hookinbox.logs import get_logger
from hookinbox.metrics import Metrics
from hookinbox.ops.search import clean_term, parse_when
from hookinbox.receive.receiver import Receiver
from hookinbox.receive.rejected_retry import retry_rejected_many
from hookinbox.store import OutboxView, Store
from hookinbox.tracing import NOOP

log = get_logger("hookinbox.api")

#: The largest request body the API reads (its bodies are a few fields).
MAX_BODY = 16 * 1024
#: The CLI's rule in the API's words: a real bulk retry is bounded by the caller.
BULK_NEEDS_LIMIT = "a retry of many needs a limit (a dry run does not)"


# -- handlers -------------------------------------------------------------------------
async def search_deliveries(call: Call) -> dict[str, Any]:
    q: models.DeliveryQueryParams = call.query
    query = ops.DeliveryQuery(
        ref=q.ref,
        source=q.source,
        type=q.type,
        status=q.status,
        since=q.since,
        until=q.until,
        payload=q.where,
        before=q.before,
        limit=q.limit,
    )
    return (await ops.search_deliveries(call.store, call.config, query)).as_json()


async def show_delivery(call: Call) -> dict[str, Any]:
    found = await ops.find_delivery(call.store, call.path["ref"], call.query.source)
    report = await ops.trace(call.store, call.config, found.id, layers=call.views.trace_layers)
    traced = next((d for d in report.deliveries if d.delivery.id == found.id), None)
    if traced is None:
        raise NotFound(f"delivery {found.id} vanished")
    return traced.as_json()


async def replay_delivery(call: Call) -> dict[str, Any]:
    body: models.ReplayRequest = call.body or models.ReplayRequest.model_validate({})
    report = await ops.replay(
        call.store,
        call.config,
        call.path["ref"],
        source=call.query.source,
        actor=call.actor,
        action=clean_term(body.action, "action"),
        dry_run=body.dry_run,
        force_effects=body.force_effects,
        wait_seconds=0,
    )
    return report.as_json()


def _filter(q: Any) -> ops.DeadLetterFilter:
    return ops.DeadLetterFilter(
        source=q.source,
        action=q.action,
        reason=q.reason,
        since=ops.parse_when(q.since, "since"),
        until=ops.parse_when(q.until, "until"),
    )


async def list_dead_letters(call: Call) -> dict[str, Any]:
    q: models.DeadLetterQueryParams = call.query
    found = await ops.dlq_list(
        call.store, call.config, matching=_filter(q), before=q.before, limit=q.limit
    )
    return found.as_json()


async def retry_matching(call: Call) -> dict[str, Any]:
    body: models.RetryMatching = call.body or models.RetryMatching.model_validate({})
    if not body.dry_run and not call.token.allows("operate"):
        raise Forbidden("a retry needs the operate scope (a dry run needs read)")
    limit = ops.bulk_limit(body.limit, dry_run=body.dry_run)
    if limit is None:
        raise InvalidArgument(BULK_NEEDS_LIMIT)
    report = await ops.dlq_retry_all(
        call.store,
        call.config,
        limit=limit,
        matching=_filter(body),
        expect=body.expect,
        actor=call.actor,
        dry_run=body.dry_run,
        max_limit=models.MAX_API_RETRY,
    )
    return report.as_json()


async def retry_one(call: Call) -> dict[str, Any]:
    body: models.RetryOne = call.body or models.RetryOne.model_validate({})
    report = await ops.dlq_retry(
        call.store, call.config, call.path["job_id"], actor=call.actor, dry_run=body.dry_run
    )
    return report.as_json()


async def list_sources(call: Call) -> dict[str, Any]:
    return (await ops.list_sources(call.store, call.config)).as_json()


async def pause_source(call: Call) -> dict[str, Any]:
    body: models.PauseRequest = call.body or models.PauseRequest.model_validate({})
    state = await ops.pause_source(
        call.store,
        call.config,
        call.path["name"],
        actor=call.actor,
        reason=clean_term(body.reason, "reason", max_length=200),
    )
    return state.as_json()


async def resume_source(call: Call) -> dict[str, Any]:
    state = await ops.resume_source(call.store, call.config, call.path["name"], actor=call.actor)
    return state.as_json()


async def catch_up_source(call: Call) -> dict[str, Any]:
    body: models.CatchUpRequest = call.body or models.CatchUpRequest.model_validate({})
    if not body.dry_run and not call.token.allows("operate"):
        raise Forbidden("a catch-up needs the operate scope (a dry run needs read)")
    report = await run_catch_up(
        call.config,
        call.store,
        call.receiver,
        call.receiver.metrics,
        call.path["name"],
        since=parse_when(body.since, "since"),
        dry_run=body.dry_run,
    )
    if report.failure is not None:
        # The pages before it are committed; the answer is the provider's error.
        raise report.failure
    return report.as_json()


async def list_reviews(call: Call) -> dict[str, Any]:
    q: models.ReviewQueryParams = call.query
    found = await ops.list_reviews(
        call.store,
        call.config,
        resolved=q.all,
        tenant=q.tenant,
        source=q.source,
        before=q.before,
        limit=q.limit,
    )
    return found.as_json()


async def resolve_review(call: Call) -> dict[str, Any]:
    raw = call.path["transition_id"]
    if not raw.isascii() or not raw.isdigit() or len(raw) > 18:
        raise InvalidArgument("a transition id is a whole number")
    body: models.ReviewResolution | None = call.body
    if body is None:
        raise InvalidArgument("a review needs a note (what was decided, and why)")
    review = await ops.resolve_review(call.store, int(raw), actor=call.actor, note=body.note)
    return review.as_json()


async def reconcile(call: Call) -> dict[str, Any]:
    report = await ops.reconcile(
        call.store, call.config, limit=call.query.limit, checks=call.views.checks
    )
    return report.as_json()


# -- rejected deliveries, the outbox, tracked resources, purge ---------------------------
async def list_rejected(call: Call) -> dict[str, Any]:
    q: models.RejectedQueryParams = call.query
    found = await ops.rejected_page(
        call.store, source=q.source, include_settled=q.all, before=q.before, limit=q.limit + 1
    )
    page = found.rejected[: q.limit]
    more = len(found.rejected) > q.limit
    return {
        **ops.RejectedPage(page, found.totals).as_json(),
        "next_before": page[-1].id if more else None,
    }


async def retry_rejected(call: Call) -> dict[str, Any]:
    body: models.RejectedRetry | None = call.body
    if body is None or bool(body.ids) == body.all:
        raise InvalidArgument("name the rejected ids, or all: true (with limit, source)")
    if (body.source is not None or body.limit is not None) and not body.all:
        raise InvalidArgument("source and limit go with all: true")
    if body.all and body.limit is None:
        raise InvalidArgument(BULK_NEEDS_LIMIT)
    ids = list(dict.fromkeys(body.ids or ()))
    results = await retry_rejected_many(
        call.receiver,
        call.store,
        ids=ids or None,
        source=body.source,
        limit=body.limit or len(ids),
        actor=call.actor,
    )
    accepted = sum(r.outcome in ("accepted", "duplicate") for r in results)
    return {
        "retried": len(results),
        "accepted": accepted,
        "still_refused": len(results) - accepted,
        "results": [r.as_json() for r in results],
    }


def _outbox_row(row: OutboxView) -> dict[str, Any]:
    """A row of a list: everything but the body (``GET /outbox/{key}`` has it)."""
    return {k: v for k, v in row.as_json().items() if k != "body"}


async def list_outbox(call: Call) -> dict[str, Any]:
    q: models.OutboxQueryParams = call.query
    rows = await ops.list_outbox(call.store, state=q.state, kind=q.kind, limit=q.limit)
    return {"outbox": [_outbox_row(r) for r in rows]}


async def show_outbox(call: Call) -> dict[str, Any]:
    return (await ops.show_outbox(call.store, call.path["key"])).as_json()


async def resend_outbox(call: Call) -> dict[str, Any]:
    row = await ops.resend_outbox(
        call.store, call.path["key"], actor=call.actor, command="outbox-resend"
    )
    return row.as_json()


async def list_resources(call: Call) -> dict[str, Any]:
    q: models.ResourceQueryParams = call.query
    found = await ops.list_resources(
        call.store, kind=q.kind, tenant=q.tenant, state=q.state, before=q.before, limit=q.limit
    )
    return found.as_json()


async def show_resource(call: Call) -> dict[str, Any]:
    return (await ops.show_resource(call.store, call.path["resource_id"])).as_json()


async def resource_transitions(call: Call) -> dict[str, Any]:
    resource_id = call.path["resource_id"]
    log = await ops.resource_transitions(call.store, resource_id)
    return {"resource_id": resource_id, "transitions": [t.as_json() for t in log]}


async def purge(call: Call) -> dict[str, Any]:
    body: models.PurgeRequest = call.body or models.PurgeRequest.model_validate({})
    if not body.dry_run and not call.token.allows("operate"):
        raise Forbidden("a purge needs the operate scope (a dry run needs read)")
    older_than = parse_duration(body.older_than) if body.older_than is not None else None
    report = await ops.purge(
        call.store,
        call.config,
        older_than=older_than,
        payloads_only=body.payloads_only,
        batch=body.batch,
        dry_run=body.dry_run,
        max_rows=body.max_rows,
        actor=call.actor,
    )
    return report.as_json()


async def erase_subject(call: Call) -> dict[str, Any]:
    body: models.ErasureRequest = call.body
    if body is None:
        raise InvalidArgument("an erasure needs a body with the subject")
    try:
        report = await ops.erase_subject(
            call.store,
            call.config,
            subject=body.subject,
            source=body.source,
            dry_run=body.dry_run,
            batch=body.batch,
            actor=call.actor,
        )
    except ConfigError as exc:  # the key is not in this process's environment
        raise OperationRefused(exc.message) from None
    return report.as_json()


ROUTES: list[RouteSpec] = [
    RouteSpec(
        "GET",
        "/deliveries",
        "searchDeliveries",
        "Search deliveries, newest first (a keyset page, with the count of all matches)",
        "read",
        models.DeliveryPage,
        search_deliveries,
        query=models.DeliveryQueryParams,
    ),
    RouteSpec(
        "GET",
        "/deliveries/{ref}",
        "showDelivery",
        "One delivery with its trace: receipts, journal, jobs and attempts, effects, audit",
        "read",
        models.TracedDelivery,
        show_delivery,
        query=models.SourceParam,
        errors=(404, 409),
    ),
    RouteSpec(
        "POST",
        "/deliveries/{ref}/replay",
        "replayDelivery",
        "Run a delivery's jobs again through the workers (the effects ledger still applies)",
        "operate",
        models.ReplayReport,
        replay_delivery,
        query=models.SourceParam,
        body=models.ReplayRequest,
        errors=(404, 409),
        writes=True,
    ),
    RouteSpec(
        "GET",
        "/dead-letters",
        "listDeadLetters",
        "Dead letters by filter, newest failure first, with their review deadline",
        "read",
        models.DeadLetterList,
        list_dead_letters,
        query=models.DeadLetterQueryParams,
    ),
    RouteSpec(
        "POST",
        "/dead-letters/retry",
        "retryDeadLetters",
        "Retry the dead letters a filter matches, oldest failure first, up to a limit; "
        "dry_run (the default) previews how many match and which (read scope suffices)",
        "read",
        models.RetryReport,
        retry_matching,
        body=models.RetryMatching,
        errors=(409,),
        writes=True,
    ),
    RouteSpec(
        "POST",
        "/dead-letters/{job_id}/retry",
        "retryDeadLetter",
        "Retry one dead letter",
        "operate",
        models.RetryReport,
        retry_one,
        body=models.RetryOne,
        errors=(404, 409),
        writes=True,
    ),
    RouteSpec(
        "GET",
        "/sources",
        "listSources",
        "Sources and their pause state",
        "read",
        models.Sources,
        list_sources,
    ),
    RouteSpec(
        "POST",
        "/sources/{name}/pause",
        "pauseSource",
        "Pause a source: its endpoint answers 503 until resumed, nothing is lost",
        "operate",
        models.SourcePauseState,
        pause_source,
        body=models.PauseRequest,
        errors=(404,),
        writes=True,
    ),
    RouteSpec(
        "POST",
        "/sources/{name}/resume",
        "resumeSource",
        "Resume a paused source",
        "operate",
        models.SourcePauseState,
        resume_source,
        errors=(404,),
        writes=True,
    ),
    RouteSpec(
        "POST",
        "/sources/{name}/catch-up",
        "catchUpSource",
        "Pull what the provider's API holds that the receiver never got, from the source's "
        "cursor, through the same reservation as webhooks; dry_run (the default) lists and "
        "compares with the journal (read scope suffices)",
        "read",
        models.CatchUpRun,
        catch_up_source,
        body=models.CatchUpRequest,
        errors=(404, 409, 502),
        writes=True,
    ),
    RouteSpec(
        "GET",
        "/reviews",
        "listReviews",
        "Transitions a state machine rejected, waiting for a person's review (newest first)",
        "read",
        models.Reviews,
        list_reviews,
        query=models.ReviewQueryParams,
    ),
    RouteSpec(
        "POST",
        "/reviews/{transition_id}/resolve",
        "resolveReview",
        "Mark a rejected transition reviewed, with a note; the first verdict stands",
        "operate",
        models.Review,
        resolve_review,
        body=models.ReviewResolution,
        errors=(404, 409),
        writes=True,
    ),
    RouteSpec(
        "GET",
        "/reconcile",
        "reconcile",
        "What does not add up: expired leases, stale jobs, dead letters past review, ...",
        "read",
        models.Reconciliation,
        reconcile,
        query=models.ReconcileParams,
    ),
    RouteSpec(
        "GET",
        "/rejected",
        "listRejected",
        "Deliveries refused for their signature or timestamp and kept for a retry (newest "
        "first), with totals per source and reason; ids, codes and sizes, never a body",
        "read",
        models.RejectedList,
        list_rejected,
        query=models.RejectedQueryParams,
    ),
    RouteSpec(
        "POST",
        "/rejected/retry",
        "retryRejected",
        "Check kept deliveries again with the current secrets, as of when each was received, "
        "through the normal path (ids, or all up to a limit)",
        "operate",
        models.RejectedRetryReport,
        retry_rejected,
        body=models.RejectedRetry,
        errors=(404,),
        writes=True,
    ),
    RouteSpec(
        "GET",
        "/outbox",
        "listOutbox",
        "Notifications of tracked resources, newest first (state=failed: the dead letters)",
        "read",
        models.OutboxList,
        list_outbox,
        query=models.OutboxQueryParams,
    ),
    RouteSpec(
        "GET",
        "/outbox/{key}",
        "showOutbox",
        "One outbox row with its body",
        "read",
        models.OutboxEntry,
        show_outbox,
        errors=(404,),
    ),
    RouteSpec(
        "POST",
        "/outbox/{key}/resend",
        "resendOutbox",
        "Send one notification again from its existing row (same key, same body); the "
        "resource is not touched",
        "operate",
        models.OutboxEntry,
        resend_outbox,
        errors=(404, 409),
        writes=True,
    ),
    RouteSpec(
        "GET",
        "/resources",
        "listResources",
        "Tracked resources, newest first",
        "read",
        models.ResourceList,
        list_resources,
        query=models.ResourceQueryParams,
    ),
    RouteSpec(
        "GET",
        "/resources/{resource_id}",
        "showResource",
        "One tracked resource with its transition log",
        "read",
        models.ResourceDetail,
        show_resource,
        errors=(404,),
    ),
    RouteSpec(
        "GET",
        "/resources/{resource_id}/transitions",
        "listTransitions",
        "A tracked resource's transition log, oldest first: applied, rejected (with the "
        "reason), created, attached",
        "read",
        models.Transitions,
        resource_transitions,
        errors=(404,),
    ),
    RouteSpec(
        "POST",
        "/purge",
        "purge",
        "Delete payloads, old journal keys and old rejected copies in bounded batches, at "
        "most max_rows of each per call (never dead letters); dry_run (the default) counts "
        "(read scope suffices)",
        "read",
        models.PurgeReport,
        purge,
        body=models.PurgeRequest,
        errors=(409,),
        writes=True,
    ),
    RouteSpec(
        "POST",
        "/erasures",
        "eraseSubject",
        "Erase one data subject's payloads, answer snippets and kept refusals' bodies in "
        "bounded batches (the journal's ids and hashes stay); dry_run (the default) counts; "
        "needs the erase scope, which no other scope includes",
        "erase",
        models.ErasureReport,
        erase_subject,
        body=models.ErasureRequest,
        errors=(409,),
        writes=True,
    ),
]


# -- plumbing -------------------------------------------------------------------------
def _error(exc: HookinboxError) -> Response:
    response = error_response(exc)
    if isinstance(exc, Unauthenticated):
        response.headers["www-authenticate"] = "Bearer"
    return response


def _validated(model: type[BaseModel] | None, data: Any) -> Any:
    if model is None:
        return None
    try:
        return model.model_validate(data)
    except ValidationError:
        raise InvalidArgument("the parameters or the body do not fit this route") from None


async def _body(request: Request, model: type[BaseModel] | None) -> Any:
    raw = await request.body()
    if model is None or not raw.strip():
        return None
    if len(raw) > MAX_BODY:
        raise InvalidArgument("the body is too large")
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise InvalidArgument("the body is not JSON") from None
    return _validated(model, data)


class Api:
    """The API as a Starlette app; mount it at ``/api/v1``."""

    def __init__(
        self,
        config: Config,
        store: Store,
        tokens: tuple[ApiToken, ...],
        *,
        views: ops.OperatorViews,
        receiver: Receiver | None = None,
    ) -> None:
        self.config = config
        #: Rejected deliveries are retried through it (the inbox's; without an inbox, one
        #: of its own that counts into metrics of its own and does not trace).
        self.receiver = receiver or Receiver(
            config,
            store,
            metrics=Metrics(config.sources, slowest_job_seconds=config.worker.job_timeout_seconds),
            tracing=NOOP,
        )
        self.store = store
        self.tokens = tokens
        self.views = views
        self.document = openapi_document(ROUTES)
        routes: list[BaseRoute] = [
            Route(spec.path, self._endpoint(spec), methods=[spec.method]) for spec in ROUTES
        ]
        routes.append(Route("/openapi.json", self.openapi, methods=["GET"]))
        self.app = Starlette(routes=routes, exception_handlers={HTTPException: self._http_error})

    async def openapi(self, request: Request) -> Response:
        """The document needs no token: it describes routes, never data."""
        return JSONResponse(self.document)

    async def _http_error(self, request: Request, exc: Exception) -> Response:
        status = exc.status_code if isinstance(exc, HTTPException) else 500
        code = {404: "not_found", 405: "method_not_allowed"}.get(status, "invalid_argument")
        return JSONResponse({"error": code}, status_code=status)

    def _endpoint(self, spec: RouteSpec) -> Any:
        async def endpoint(request: Request) -> Response:
            try:
                token = find_token(self.tokens, request.headers.get("authorization"))
                if token is None:
                    raise Unauthenticated()
                if not token.allows(spec.scope):
                    log.warning("api_forbidden", actor=f"api:{token.name}", route=spec.name)
                    raise Forbidden()
                path = {
                    name: _path_value(value, name) for name, value in request.path_params.items()
                }
                call = Call(
                    store=self.store,
                    config=self.config,
                    views=self.views,
                    receiver=self.receiver,
                    token=token,
                    path=path,
                    query=_validated(spec.query, dict(request.query_params)),
                    body=await _body(request, spec.body),
                )
                answer = await spec.handler(call)
                if spec.writes:
                    log.info("api_write", actor=call.actor, route=spec.name)
                return JSONResponse(answer)
            except HookinboxError as exc:
                return _error(exc)
            except Exception as exc:  # a bug: logged by class and line, answered 500
                log.error("api_failed", route=spec.name, **unexpected_error_fields(exc))
                return internal_error_response()

        return endpoint


def _path_value(value: str, name: str) -> str:
    clean = clean_term(value, name)
    if clean is None:
        raise InvalidArgument(f"no {name}")
    return clean


def api_routes(
    config: Config,
    store: Store,
    views: ops.OperatorViews,
    environ: Mapping[str, str] | None = None,
    *,
    receiver: Receiver | None = None,
) -> list[Mount]:
    """``[Mount("/api/v1", ...)]`` when ``HOOKINBOX_API_TOKENS`` names tokens, else
    nothing: the API is off without one."""
    tokens = tokens_from(os.environ if environ is None else environ)
    if not tokens:
        return []
    mount = Mount("/api/v1", app=Api(config, store, tokens, views=views, receiver=receiver).app)
    # A path holding a newline is still the API's (to answer 400 in JSON), not the
    # outer app's plain-text 404: Starlette's "(?P<path>.*)" stops at a newline.
    mount.path_regex = re.compile(mount.path_regex.pattern, re.DOTALL)
    return [mount]
