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
from hookinbox.config import Config
from hookinbox.errors import (
    AmbiguousId,
    Forbidden,
    HookinboxError,
    InvalidArgument,
    NotFound,
    Unauthenticated,
)
from hookinbox.http.errors import error_response, unexpected_error_fields
from hookinbox.logs import get_logger
from hookinbox.ops.search import clean_term
from hookinbox.store import Store

log = get_logger("hookinbox.api")

#: The largest request body the API reads (its bodies are a few fields).
MAX_BODY = 16 * 1024


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
    body: models.RetryMatching | None = call.body
    if body is None:
        raise InvalidArgument("a JSON body with at least a limit")
    if not body.dry_run and not call.token.allows("operate"):
        raise Forbidden("a retry needs the operate scope (a dry run needs read)")
    report = await ops.dlq_retry_all(
        call.store,
        call.config,
        limit=body.limit,
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


async def list_reviews(call: Call) -> dict[str, Any]:
    q: models.ReviewQueryParams = call.query
    found = await ops.list_reviews(
        call.store, call.config, resolved=q.all, before=q.before, limit=q.limit
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
        models.SourceState,
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
        models.SourceState,
        resume_source,
        errors=(404,),
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
]


# -- plumbing -------------------------------------------------------------------------
def _error(exc: HookinboxError) -> Response:
    response = error_response(exc)
    if isinstance(exc, AmbiguousId):
        response = JSONResponse(
            {"error": exc.code, "sources": list(exc.sources)}, status_code=exc.http_status
        )
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
    ) -> None:
        self.config = config
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
                return JSONResponse({"error": "internal"}, status_code=500)

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
) -> list[Mount]:
    """``[Mount("/api/v1", ...)]`` when ``HOOKINBOX_API_TOKENS`` names tokens, else
    nothing: the API is off without one."""
    tokens = tokens_from(os.environ if environ is None else environ)
    if not tokens:
        return []
    mount = Mount("/api/v1", app=Api(config, store, tokens, views=views).app)
    # A path holding a newline is still the API's (to answer 400 in JSON), not the
    # outer app's plain-text 404: Starlette's "(?P<path>.*)" stops at a newline.
    mount.path_regex = re.compile(mount.path_regex.pattern, re.DOTALL)
    return [mount]
