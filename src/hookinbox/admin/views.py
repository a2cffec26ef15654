"""The admin web page under ``/admin``: overview, deliveries, dead letters, sources,
rejected deliveries, reviews of rejected transitions.

Server-rendered with Jinja2 (autoescaped) and a few lines of plain JS. It is off unless
``HOOKINBOX_ADMIN_TOKEN`` is set (access rules: :mod:`hookinbox.admin.auth`). Without a
valid session a GET redirects to the login form and a POST answers 401.

Every action is post/redirect/get: a POST that ran, or that its operator function
refused (404, 409: nothing changed), answers 303 to a GET page with its outcome as a
flash message signed for the session, so a reload shows the outcome again and never
repeats the action. A POST refused before anything changed (bad input, a missing CSRF
token) answers its 4xx page. Selecting dead letters to retry is a GET (the confirmation
page); only the confirmation's POST retries.

Every read and every action goes through the operator functions of :mod:`hookinbox.ops`
(the CLI calls the same), with the actor ``admin:NAME``. Every list is a keyset page over
a time-ordered primary key (``before`` = the last id seen), never OFFSET, so a page costs
the same on a million deliveries. A payload is shown only while retained, only after an
explicit POST, and each view is logged and audited by delivery id (never the payload).

Every input (query string, path, form) is checked before it is used: a value that is
not what the page asks for (a time, a whole number, a short text without control
characters) is a 400 page, never a 500.
"""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote, urlencode

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route

from hookinbox import ops
from hookinbox.admin.auth import (
    COOKIE,
    SESSION_SECONDS,
    Revocations,
    Sessions,
    StoreRevocations,
    admin_token,
    base_path,
    clean_name,
    safe_next,
    security_headers,
)
from hookinbox.admin.login import LoginLimiter, read_login_form
from hookinbox.admin.presentation import (
    Flash,
    chart,
    form_int,
    pretty_body,
    retry_summary,
    templates,
    text_arg,
    timeline,
)
from hookinbox.config import Config
from hookinbox.errors import AmbiguousId, HookinboxError, InvalidArgument, InvalidLoginForm
from hookinbox.http.clients import ClientAddresses
from hookinbox.http.errors import is_refusal, status_of
from hookinbox.logs import get_logger
from hookinbox.metrics import Metrics
from hookinbox.ops.reads import (
    dead_letter_page,
    overview,
    payload_already_viewed,
    view_payload,
)
from hookinbox.ops.rejected_deliveries import rejected_page
from hookinbox.ops.search import clean_term, source_name
from hookinbox.receive.receiver import Receiver
from hookinbox.receive.rejected_retry import retry_rejected_many
from hookinbox.store import JOB_STATES, Store

log = get_logger("hookinbox.admin")

PAGE = 50
#: The most dead letters one "retry selected" may touch.
MAX_RETRY_SELECTED = 200
#: The deliveries page's search fields (``where``: a payload field filter).
SEARCH_FIELDS = ("ref", "source", "type", "status", "since", "until", "where")
#: The most dead letters one "retry all matching" may touch.
MAX_RETRY_MATCHING = 1000
#: How many of the selected dead letters the preview names.
PREVIEW_IDS = 20
#: The longest id (delivery, job, event) or keyset cursor a page takes.
MAX_REF = 300
#: How often the overview reloads itself (a meta refresh: no script, any CSP).
OVERVIEW_REFRESH_SECONDS = 10
#: How long the page a "Show payload" redirected to may show it again (a reload).
PAYLOAD_GRANT_SECONDS = 300

Handler = Callable[[Request], Awaitable[Response]]


class Admin:
    """The admin as a Starlette app; mount it at ``/admin``."""

    def __init__(
        self,
        config: Config,
        store: Store,
        token: str,
        *,
        metrics: Metrics,
        views: ops.OperatorViews,
        receiver: Receiver,
        revocations: Revocations | None = None,
        logins: LoginLimiter | None = None,
    ) -> None:
        self.config = config
        self.store = store
        self.sessions = Sessions(token, revocations or StoreRevocations(store.admin_sessions))
        self.logins = logins or LoginLimiter()
        self.clients = ClientAddresses(config.server.forwarded_allow_ips)
        self.metrics = metrics
        self.views = views
        self.receiver = receiver
        page = self._page
        act = self._action
        self.app = Starlette(
            routes=[
                Route("/login", self.login_form, methods=["GET"]),
                Route("/login", self.login, methods=["POST"]),
                Route("/logout", act(self.logout), methods=["POST"]),
                Route("/", page(self.overview), methods=["GET"]),
                Route("/deliveries", page(self.deliveries), methods=["GET"]),
                Route("/deliveries/{id}", page(self.delivery), methods=["GET"]),
                Route("/deliveries/{id}/payload", act(self.payload), methods=["POST"]),
                Route("/deliveries/{id}/replay", act(self.replay), methods=["POST"]),
                Route("/dead-letters", page(self.dead_letters), methods=["GET"]),
                Route("/dead-letters/confirm", page(self.confirm_retry), methods=["GET"]),
                Route("/dead-letters/retry", act(self.retry_one), methods=["POST"]),
                Route("/dead-letters/retry-selected", act(self.retry_selected), methods=["POST"]),
                Route(
                    "/dead-letters/retry-matching",
                    page(self.retry_preview),
                    methods=["GET"],
                ),
                Route("/dead-letters/retry-matching", act(self.retry_matching), methods=["POST"]),
                Route("/sources", page(self.sources), methods=["GET"]),
                Route("/rejected", page(self.rejected), methods=["GET"]),
                Route("/rejected/retry", act(self.retry_rejected), methods=["POST"]),
                Route("/reviews", page(self.reviews), methods=["GET"]),
                Route("/reviews/{id}/resolve", act(self.resolve_review), methods=["POST"]),
                Route("/destinations", page(self.destinations), methods=["GET"]),
                Route("/sources/{name}/pause", act(self.pause), methods=["POST"]),
                Route("/sources/{name}/resume", act(self.resume), methods=["POST"]),
            ]
        )

    # -- plumbing -----------------------------------------------------------------------
    async def _session(self, request: Request) -> tuple[str, str] | None:
        found = await self.sessions.check(request.cookies.get(COOKIE))
        if found is not None:
            request.state.sid, request.state.name = found
        return found

    def _page(self, handler: Handler) -> Handler:
        async def guarded(request: Request) -> Response:
            if await self._session(request) is None:
                target = base_path(request) + "/login?" + urlencode({"next": request.url.path})
                return RedirectResponse(target, status_code=303)
            try:
                return await handler(request)
            except HookinboxError as exc:
                return self._render(request, "error.html", status=status_of(exc), error=exc)

        return guarded

    def _action(self, handler: Handler) -> Handler:
        async def guarded(request: Request) -> Response:
            if await self._session(request) is None:
                return PlainTextResponse("login required", status_code=401)
            form = await request.form()
            if not self.sessions.csrf_matches(request.state.sid, str(form.get("csrf", ""))):
                log.warning("admin_csrf_refused", path=request.url.path)
                return PlainTextResponse("invalid CSRF token", status_code=403)
            request.state.form = form
            request.state.back = None
            try:
                return await handler(request)
            except HookinboxError as exc:
                back = request.state.back
                if back is not None and is_refusal(exc):
                    # Refused by the operator function (no such job, not failed any
                    # more, an unknown source): nothing changed, and the page the
                    # action came from says so; a reload repeats nothing either way.
                    return self._back(request, back, f"{exc.code}: {exc.message}", problem=True)
                return self._render(request, "error.html", status=status_of(exc), error=exc)

        return guarded

    def _render(
        self, request: Request, template: str, status: int = 200, **context: Any
    ) -> Response:
        nonce = secrets.token_urlsafe(12)
        sid = getattr(request.state, "sid", None)
        html = templates.get_template(template).render(
            base=base_path(request),
            csrf=self.sessions.csrf(sid) if sid else "",
            who=getattr(request.state, "name", None),
            nonce=nonce,
            flash=self._flash(request, sid),
            here=request.url.path,
            now=datetime.now(UTC),
            **context,
        )
        return HTMLResponse(html, status_code=status, headers=security_headers(nonce))

    def _actor(self, request: Request) -> str:
        return f"admin:{request.state.name}"

    def _back(
        self,
        request: Request,
        path: str,
        message: str,
        *,
        problem: bool = False,
        query: dict[str, str] | None = None,
    ) -> Response:
        """303 to the GET page ``path`` with ``message`` as a flash signed for this session
        (post/redirect/get: a reload shows the message, never repeats the action)."""
        flash = Flash.of("problem" if problem else "done", message)
        signed = {**flash.query(), "fs": self.sessions.sign(request.state.sid, "flash", str(flash))}
        return RedirectResponse(
            f"{base_path(request)}{path}?{urlencode({**(query or {}), **signed})}", 303
        )

    def _flash(self, request: Request, sid: str | None) -> Flash | None:
        """The flash of the redirect that led here, when signed for this session."""
        flash = Flash.from_query(request.query_params)
        mac = request.query_params.get("fs", "")
        if flash is None or sid is None or not self.sessions.signed(sid, "flash", str(flash), mac):
            return None
        return flash

    # -- login --------------------------------------------------------------------------
    async def login_form(self, request: Request) -> Response:
        return self._render(request, "login.html", next=safe_next(request))

    async def login(self, request: Request) -> Response:
        """The slot is taken before the body is read and the token compared, and given
        back only for the right token (:mod:`hookinbox.admin.login`)."""
        client = self.clients.of(request.scope)
        wait = self.logins.take(client)
        if wait:
            log.warning("admin_login_throttled", retry_in_s=wait)
            response = self._render(
                request, "login.html", status=429, next=safe_next(request), throttled=wait
            )
            response.headers["retry-after"] = str(wait)
            response.headers["connection"] = "close"  # its body was never read
            return response
        succeeded = False
        try:
            try:
                form = await read_login_form(request)
            except InvalidLoginForm as exc:
                log.warning("admin_login_refused", error=exc.code)
                response = self._render(request, "error.html", status=status_of(exc), error=exc)
                response.headers["connection"] = "close"  # the body may be partly unread
                return response
            if not self.sessions.token_matches(form.token):
                log.warning("admin_login_refused", error="invalid_token")
                return self._render(
                    request, "login.html", status=401, next=safe_next(request), failed=True
                )
            succeeded = True
        finally:
            if succeeded:
                self.logins.succeeded(client)
            else:
                self.logins.failed(client)
        name = clean_name(form.name)
        log.info("admin_login", actor=f"admin:{name}")
        response = RedirectResponse(base_path(request) + safe_next(request, form.next), 303)
        response.set_cookie(
            COOKIE,
            self.sessions.issue(name),
            max_age=SESSION_SECONDS,
            path=base_path(request) or "/",
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
        )
        return response

    async def logout(self, request: Request) -> Response:
        await self.sessions.revoke(request.cookies.get(COOKIE))
        log.info("admin_logout", actor=self._actor(request))
        response = RedirectResponse(base_path(request) + "/login", 303)
        response.delete_cookie(COOKIE, path=base_path(request) or "/")
        return response

    # -- overview -----------------------------------------------------------------------
    async def overview(self, request: Request) -> Response:
        seen = await overview(self.store, self.config, self.metrics.receipts)
        as_of = datetime.fromtimestamp(seen.as_of, UTC)
        return self._render(
            request,
            "overview.html",
            rows=seen.sources,
            chart=chart(seen.minutes),
            as_of=as_of,
            as_of_iso=as_of.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            refresh_seconds=OVERVIEW_REFRESH_SECONDS,
        )

    # -- deliveries ---------------------------------------------------------------------
    async def deliveries(self, request: Request) -> Response:
        q = request.query_params
        query = ops.DeliveryQuery(
            **{k: q.get(k) for k in ("ref", "source", "type", "status", "since", "until")},
            payload=q.get("where"),
            before=q.get("before"),
            limit=PAGE,
        )
        found = await ops.search_deliveries(self.store, self.config, query)
        filters = {k: q.get(k, "") for k in SEARCH_FIELDS}
        kept = {k: v for k, v in filters.items() if v}
        older = urlencode({**kept, "before": found.next_before}) if found.next_before else None
        return self._render(
            request,
            "deliveries.html",
            deliveries=found.deliveries,
            filters=filters,
            older=older,
            first=urlencode(kept) if query.before else None,
            count=found.count,
            count_capped=found.count_capped,
            sources=sorted(self.config.sources),
            states=JOB_STATES,
        )

    async def delivery(self, request: Request) -> Response:
        ref = _path_ref(request)
        source = text_arg(request.query_params.get("source"), "source")
        try:
            found = await ops.find_delivery(self.store, ref, source)
        except AmbiguousId:
            # Two sources share the event id: list both rather than pick one.
            shared = await self.store.journal.find_deliveries_by_event(ref.strip())
            return self._render(
                request,
                "deliveries.html",
                deliveries=shared,
                filters={**dict.fromkeys(SEARCH_FIELDS, ""), "ref": ref.strip()},
                older=None,
                first=None,
                count=len(shared),
                count_capped=False,
                sources=sorted(self.config.sources),
                states=JOB_STATES,
            )
        report = await ops.trace(self.store, self.config, found.id, layers=self.views.trace_layers)
        traced = report.deliveries[0]
        payload = None
        if self._payload_granted(request, traced.delivery.id):
            body = await payload_already_viewed(self.store, traced.delivery.id)
            payload = pretty_body(body) if body is not None else None
        return self._render(
            request,
            "delivery.html",
            d=traced.delivery,
            timeline=timeline(traced),
            jobs=traced.jobs,
            payload=payload,
        )

    def _payload_granted(self, request: Request, delivery_id: str) -> bool:
        """Whether this GET follows this session's audited "Show payload" of this
        delivery, less than PAYLOAD_GRANT_SECONDS ago (``?shown=expiry.mac``)."""
        expiry, _, mac = request.query_params.get("shown", "").partition(".")
        if not (expiry.isascii() and expiry.isdigit() and len(expiry) <= 12):
            return False
        value = f"{delivery_id}:{expiry}"
        fresh = int(expiry) >= time.time()
        return fresh and self.sessions.signed(request.state.sid, "payload", value, mac)

    async def payload(self, request: Request) -> Response:
        found, body = await view_payload(self.store, _path_ref(request), actor=self._actor(request))
        path = f"/deliveries/{quote(found.id)}"
        if body is None:
            return self._back(request, path, "the payload is no longer retained", problem=True)
        expiry = str(int(time.time()) + PAYLOAD_GRANT_SECONDS)
        grant = self.sessions.sign(request.state.sid, "payload", f"{found.id}:{expiry}")
        return self._back(
            request,
            path,
            "payload shown; this view was audited",
            query={"shown": f"{expiry}.{grant}"},
        )

    async def replay(self, request: Request) -> Response:
        ref = _path_ref(request)
        request.state.back = f"/deliveries/{quote(ref)}"
        report = await ops.replay(
            self.store, self.config, ref, actor=self._actor(request), wait_seconds=0
        )
        refused = [i for i in report.items if i.outcome == "refused"]
        path = f"/deliveries/{quote(report.delivery.id)}"
        if refused and len(refused) == len(report.items):
            return self._back(request, path, "replay refused for every job", problem=True)
        return self._back(request, path, f"replayed {len(report.items) - len(refused)} job(s)")

    # -- dead letters -------------------------------------------------------------------
    async def dead_letters(self, request: Request) -> Response:
        q = request.query_params
        source, reason = text_arg(q.get("source"), "source"), text_arg(q.get("reason"), "reason")
        before = text_arg(q.get("before"), "page", max_length=MAX_REF)
        found = await dead_letter_page(
            self.store, source=source, reason=reason, before=before, limit=PAGE + 1
        )
        page, more = found.dead[:PAGE], len(found.dead) > PAGE
        older = None
        if more:
            keep = {k: v for k, v in (("source", source), ("reason", reason)) if v}
            older = urlencode({**keep, "before": page[-1].job_id})
        return self._render(
            request,
            "dead_letters.html",
            reasons=found.reasons,
            dead=page,
            older=older,
            source=source or "",
            reason=reason or "",
            max_selected=MAX_RETRY_SELECTED,
            max_matching=MAX_RETRY_MATCHING,
            sources=sorted(self.config.sources),
        )

    async def retry_one(self, request: Request) -> Response:
        form = request.state.form
        job_id = text_arg(form.get("one") or form.get("job_id"), "job id", max_length=MAX_REF)
        if job_id is None:
            raise InvalidArgument("no dead letter named")
        request.state.back = "/dead-letters"  # a refusal: nothing changed, say so there
        await ops.dlq_retry(self.store, self.config, job_id, actor=self._actor(request))
        message = f"{job_id} retried: requeued, the workers run it again"
        if form.get("from") == "list":
            # From the dead letters' list: back to it, with its filters, so the next
            # one is a tap away.
            keep = {k: v for k in ("source", "reason") if (v := text_arg(form.get(k), k))}
            return self._back(request, "/dead-letters", message, query=keep)
        delivery_id = job_id.rsplit(":", 1)[0]
        return self._back(request, f"/deliveries/{quote(delivery_id)}", message)

    async def confirm_retry(self, request: Request) -> Response:
        """The selection of the dead letters page (a GET form: pressing Enter in it can
        only ever land here) and the one button that retries them."""
        job_ids, limit = _selection(request.query_params.getlist("job_id"), request.query_params)
        return self._render(request, "confirm_retry.html", job_ids=job_ids, limit=limit)

    async def retry_selected(self, request: Request) -> Response:
        form = request.state.form
        job_ids, limit = _selection(form.getlist("job_id"), form)
        if form.get("confirm") != "yes":
            query = urlencode([*(("job_id", j) for j in job_ids), ("limit", str(limit))])
            return RedirectResponse(f"{base_path(request)}/dead-letters/confirm?{query}", 303)
        results: list[tuple[str, str | None]] = []
        for job_id in job_ids:
            try:
                await ops.dlq_retry(self.store, self.config, job_id, actor=self._actor(request))
                results.append((job_id, None))
            except HookinboxError as exc:
                results.append((job_id, exc.code))
        refused = any(code for _, code in results)
        return self._back(request, "/dead-letters", retry_summary(results), problem=refused)

    def _matching(self, values: Any) -> tuple[ops.DeadLetterFilter, int]:
        """The filter and limit of a "retry all matching" form (query string or body)."""
        matching = ops.DeadLetterFilter(
            source=source_name(self.config, values.get("source")),
            action=clean_term(values.get("action"), "action"),
            reason=clean_term(values.get("reason"), "reason"),
            since=ops.parse_when(values.get("since"), "since"),
            until=ops.parse_when(values.get("until"), "until"),
        )
        limit = form_int(values.get("limit"), MAX_RETRY_MATCHING, what="limit")
        if not 1 <= limit <= MAX_RETRY_MATCHING:
            raise InvalidArgument(f"the limit must be between 1 and {MAX_RETRY_MATCHING}")
        return matching, limit

    async def retry_preview(self, request: Request) -> Response:
        """How many dead letters match and exactly which the limit selects (a read: the
        retry itself is the confirmation's POST)."""
        matching, limit = self._matching(request.query_params)
        preview = await ops.dlq_retry_all(
            self.store,
            self.config,
            limit=limit,
            matching=matching,
            actor=self._actor(request),
            dry_run=True,
            max_limit=MAX_RETRY_MATCHING,
        )
        # The confirmation carries the times as resolved now: "24h" means the same
        # moment when it is confirmed a minute later.
        filters = {k: v or "" for k, v in matching.as_json().items()}
        return self._render(
            request,
            "confirm_retry_matching.html",
            preview=preview,
            shown=preview.items[:PREVIEW_IDS],
            filters=filters,
            limit=limit,
        )

    async def retry_matching(self, request: Request) -> Response:
        form = request.state.form
        request.state.back = "/dead-letters"
        matching, limit = self._matching(form)
        expect = form_int(form.get("expect"), -1, what="expected count")
        if form.get("confirm") != "yes" or expect < 0:
            raise InvalidArgument("confirm the preview first")
        report = await ops.dlq_retry_all(
            self.store,
            self.config,
            limit=limit,
            matching=matching,
            expect=expect,
            actor=self._actor(request),
            max_limit=MAX_RETRY_MATCHING,
        )
        return self._back(
            request, "/dead-letters", f"retried all matching: {report.requeued} requeued"
        )

    # -- sources ------------------------------------------------------------------------
    async def sources(self, request: Request) -> Response:
        report = await ops.list_sources(self.store, self.config)
        reconciliation = None
        if request.query_params.get("reconcile"):
            reconciliation = await ops.reconcile(
                self.store, self.config, limit=10, checks=self.views.checks
            )
        return self._render(
            request, "sources.html", sources=report.sources, reconciliation=reconciliation
        )

    async def destinations(self, request: Request) -> Response:
        rows = await ops.list_destinations(self.store, self.config)
        return self._render(request, "destinations.html", destinations=rows)

    async def rejected(self, request: Request) -> Response:
        """Kept rejected deliveries, each with a Retry (the same as ``rejected retry``)."""
        q = request.query_params
        source = text_arg(q.get("source"), "source")
        before = text_arg(q.get("before"), "page", max_length=MAX_REF)
        found = await rejected_page(self.store, source=source, before=before, limit=PAGE + 1)
        page, more = found.rejected[:PAGE], len(found.rejected) > PAGE
        older = None
        if more:
            keep = {"source": source} if source else {}
            older = urlencode({**keep, "before": page[-1].id})
        return self._render(
            request,
            "rejected.html",
            rejected=page,
            totals=found.totals,
            older=older,
            source=source or "",
        )

    async def retry_rejected(self, request: Request) -> Response:
        """Check one kept delivery again with the current secrets (as the CLI's
        ``rejected retry ID``); back to the list with the outcome."""
        form = request.state.form
        rejected_id = text_arg(form.get("id"), "rejected id", max_length=MAX_REF)
        if rejected_id is None:
            raise InvalidArgument("no rejected delivery named")
        source = text_arg(form.get("source"), "source")
        query = {"source": source} if source else {}
        request.state.back = "/rejected"
        (result,) = await retry_rejected_many(
            self.receiver, self.store, ids=[rejected_id], actor=self._actor(request)
        )
        held = result.outcome in ("accepted", "duplicate")
        text = f"{rejected_id}: {result.outcome}"
        text += f" as {result.delivery_id}" if result.delivery_id else " (still refused)"
        return self._back(request, "/rejected", text, problem=not held, query=query)

    # -- reviews ------------------------------------------------------------------------
    async def reviews(self, request: Request) -> Response:
        """Rejected transitions waiting for a review (``?all=1``: resolved ones too)."""
        q = request.query_params
        include_resolved = q.get("all") == "1"
        before = form_int(q.get("before"), 0, what="page") or None
        found = await ops.list_reviews(
            self.store, self.config, resolved=include_resolved, before=before, limit=PAGE + 1
        )
        page, more = found.reviews[:PAGE], len(found.reviews) > PAGE
        older = None
        if more:
            keep = {"all": "1"} if include_resolved else {}
            older = urlencode({**keep, "before": str(page[-1].id)})
        return self._render(
            request,
            "reviews.html",
            reviews=page,
            report=found,
            include_resolved=include_resolved,
            older=older,
        )

    async def resolve_review(self, request: Request) -> Response:
        transition_id = form_int(request.path_params["id"], 0, what="transition id")
        note = str(request.state.form.get("note", ""))
        request.state.back = "/reviews"
        await ops.resolve_review(self.store, transition_id, actor=self._actor(request), note=note)
        return self._back(request, "/reviews", f"transition {transition_id} resolved")

    async def pause(self, request: Request) -> Response:
        name = _path_name(request)
        # As typed: ops.pause_source checks it as for every surface (empty is no reason).
        reason = str(request.state.form.get("reason", ""))
        request.state.back = "/sources"
        await ops.pause_source(
            self.store, self.config, name, actor=self._actor(request), reason=reason
        )
        return self._back(request, "/sources", f"source {name} paused")

    async def resume(self, request: Request) -> Response:
        name = _path_name(request)
        request.state.back = "/sources"
        await ops.resume_source(self.store, self.config, name, actor=self._actor(request))
        return self._back(request, "/sources", f"source {name} resumed")


def _selection(values: list[Any], params: Any) -> tuple[list[str], int]:
    """The dead letters picked for a bulk retry and its limit, checked: at least one,
    at most the limit, the limit within 1..MAX_RETRY_SELECTED."""
    named = (text_arg(v, "job id", max_length=MAX_REF) for v in values)
    job_ids = list(dict.fromkeys(v for v in named if v))
    limit = form_int(params.get("limit"), MAX_RETRY_SELECTED, what="limit")
    if not job_ids:
        raise InvalidArgument("select at least one dead letter")
    if not 1 <= limit <= MAX_RETRY_SELECTED:
        raise InvalidArgument(f"the limit must be between 1 and {MAX_RETRY_SELECTED}")
    if len(job_ids) > limit:
        raise InvalidArgument(f"{len(job_ids)} selected, more than the limit of {limit}")
    return job_ids, limit


def _path_ref(request: Request) -> str:
    ref = text_arg(request.path_params["id"], "id", max_length=MAX_REF)
    if ref is None:
        raise InvalidArgument("no id")
    return ref


def _path_name(request: Request) -> str:
    name = text_arg(request.path_params["name"], "source")
    if name is None:
        raise InvalidArgument("no source")
    return name


def admin_routes(
    config: Config, store: Store, metrics: Metrics, views: ops.OperatorViews, receiver: Receiver
) -> list[Mount]:
    """``[Mount("/admin", ...)]`` when ``HOOKINBOX_ADMIN_TOKEN`` is set, else nothing: the
    admin is off without a token."""
    token = admin_token(os.environ)
    if token is None:
        return []
    admin = Admin(config, store, token, metrics=metrics, views=views, receiver=receiver)
    return [Mount("/admin", app=admin.app)]


__all__ = ["Admin", "admin_routes"]
