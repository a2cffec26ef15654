"""The admin web page under ``/admin``: overview, deliveries, dead letters, sources.

Server-rendered with Jinja2 (autoescaped) and a few lines of plain JS. It is off unless
``HOOKINBOX_ADMIN_TOKEN`` is set. Access:

- ``POST /admin/login`` with the token sets a session cookie (HttpOnly, SameSite=Strict,
  path ``/admin``, Secure over https). The session is ``id.expiry.name.mac``, signed
  with a key derived from the token: every process with the same token accepts it, and
  changing the token ends every session. Nothing of the token is in the cookie.
- Every state-changing action is a POST carrying a CSRF token derived from the session
  (a per-session HMAC); a GET never changes anything.
- Without a valid session a GET redirects to the login form and a POST answers 401.

Every list is a keyset page over a time-ordered primary key (``before`` = the last id
seen), never OFFSET, so a page costs the same on a million deliveries. Actions call the
operator functions of :mod:`hookinbox.ops` (the CLI calls the same), with the actor
``admin:NAME``. A payload is shown only while retained, only after an explicit POST, and
each view is logged and audited by delivery id (never the payload itself).

Why the overview takes duplicates and refusals from memory: a refused delivery is never
written to the store (a flood of forged requests must not cause writes), so this
process's :class:`~hookinbox.metrics.RecentCounts` is where it can be counted cheaply;
accepted counts come from the journal and are exact for every process. Prometheus keeps
the fleet-wide history of both.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import re
import secrets
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import jinja2
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route

from hookinbox import ops
from hookinbox.config import Config
from hookinbox.errors import HookinboxError, InvalidArgument, NotFound
from hookinbox.logs import get_logger
from hookinbox.metrics import Metrics, StoreGauges
from hookinbox.store import JOB_STATES, DeliverySearch, Store

log = get_logger("hookinbox.admin")

ADMIN_TOKEN_ENV = "HOOKINBOX_ADMIN_TOKEN"
COOKIE = "hookinbox_admin"
SESSION_SECONDS = 12 * 3600
PAGE = 50
#: The most dead letters one "retry selected" may touch.
MAX_RETRY_SELECTED = 200
_NAME = re.compile(r"[^A-Za-z0-9_.@-]")

Handler = Callable[[Request], Awaitable[Response]]

_templates = jinja2.Environment(
    loader=jinja2.FileSystemLoader(Path(__file__).parent / "templates"),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
)


def _fmt_time(value: datetime | None) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S") if value else ""


_templates.filters["t"] = _fmt_time


class Sessions:
    """Signed, stateless sessions and their CSRF tokens."""

    def __init__(self, token: str) -> None:
        self._token = token.encode()
        self._key = hashlib.sha256(b"hookinbox-admin-session:" + self._token).digest()

    def token_matches(self, offered: str) -> bool:
        return hmac.compare_digest(offered.encode(), self._token)

    def _mac(self, message: str) -> str:
        digest = hmac.new(self._key, message.encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).decode().rstrip("=")

    def issue(self, name: str) -> str:
        body = f"{secrets.token_hex(8)}.{int(time.time()) + SESSION_SECONDS}.{name}"
        return f"{body}.{self._mac(body)}"

    def check(self, cookie: str | None) -> tuple[str, str] | None:
        """``(session id, name)`` of a valid, unexpired session."""
        if not cookie or cookie.count(".") != 3:
            return None
        sid, expiry, name, mac = cookie.split(".")
        if not hmac.compare_digest(mac.encode(), self._mac(f"{sid}.{expiry}.{name}").encode()):
            return None
        if not expiry.isdigit() or int(expiry) < time.time():
            return None
        return sid, name

    def csrf(self, sid: str) -> str:
        return self._mac("csrf:" + sid)


class Admin:
    """The admin as a Starlette app; mount it at ``/admin``."""

    def __init__(
        self,
        config: Config,
        store: Store,
        token: str,
        *,
        metrics: Metrics,
        gauges: StoreGauges,
    ) -> None:
        self.config = config
        self.store = store
        self.sessions = Sessions(token)
        self.metrics = metrics
        self.gauges = gauges
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
                Route("/dead-letters/retry", act(self.retry_one), methods=["POST"]),
                Route("/dead-letters/retry-selected", act(self.retry_selected), methods=["POST"]),
                Route("/sources", page(self.sources), methods=["GET"]),
                Route("/sources/{name}/pause", act(self.pause), methods=["POST"]),
                Route("/sources/{name}/resume", act(self.resume), methods=["POST"]),
            ]
        )

    # -- plumbing -----------------------------------------------------------------------
    def _session(self, request: Request) -> tuple[str, str] | None:
        found = self.sessions.check(request.cookies.get(COOKIE))
        if found is not None:
            request.state.sid, request.state.name = found
        return found

    def _page(self, handler: Handler) -> Handler:
        async def guarded(request: Request) -> Response:
            if self._session(request) is None:
                target = _base(request) + "/login?" + urlencode({"next": request.url.path})
                return RedirectResponse(target, status_code=303)
            try:
                return await handler(request)
            except HookinboxError as exc:
                return self._render(request, "error.html", status=exc.http_status, error=exc)

        return guarded

    def _action(self, handler: Handler) -> Handler:
        async def guarded(request: Request) -> Response:
            if self._session(request) is None:
                return PlainTextResponse("login required", status_code=401)
            form = await request.form()
            offered = str(form.get("csrf", ""))
            expected = self.sessions.csrf(request.state.sid)
            if not hmac.compare_digest(offered.encode(), expected.encode()):
                log.warning("admin_csrf_refused", path=request.url.path)
                return PlainTextResponse("invalid CSRF token", status_code=403)
            request.state.form = form
            try:
                return await handler(request)
            except HookinboxError as exc:
                return self._render(request, "error.html", status=exc.http_status, error=exc)

        return guarded

    def _render(
        self, request: Request, template: str, status: int = 200, **context: Any
    ) -> Response:
        nonce = secrets.token_urlsafe(12)
        sid = getattr(request.state, "sid", None)
        html = _templates.get_template(template).render(
            base=_base(request),
            csrf=self.sessions.csrf(sid) if sid else "",
            who=getattr(request.state, "name", None),
            nonce=nonce,
            flash=request.query_params.get("done", ""),
            **context,
        )
        return HTMLResponse(html, status_code=status, headers=_security_headers(nonce))

    def _actor(self, request: Request) -> str:
        return f"admin:{request.state.name}"

    def _back(self, request: Request, path: str, done: str) -> Response:
        return RedirectResponse(f"{_base(request)}{path}?{urlencode({'done': done})}", 303)

    # -- login --------------------------------------------------------------------------
    async def login_form(self, request: Request) -> Response:
        return self._render(request, "login.html", next=_safe_next(request), failed=False)

    async def login(self, request: Request) -> Response:
        form = await request.form()
        name = _NAME.sub("", str(form.get("name", "")))[:40] or "operator"
        if not self.sessions.token_matches(str(form.get("token", ""))):
            log.warning("admin_login_refused")
            return self._render(
                request, "login.html", status=401, next=_safe_next(request), failed=True
            )
        log.info("admin_login", actor=f"admin:{name}")
        response = RedirectResponse(_base(request) + _safe_next(request, form.get("next")), 303)
        response.set_cookie(
            COOKIE,
            self.sessions.issue(name),
            max_age=SESSION_SECONDS,
            path=_base(request) or "/",
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
        )
        return response

    async def logout(self, request: Request) -> Response:
        response = RedirectResponse(_base(request) + "/login", 303)
        response.delete_cookie(COOKIE, path=_base(request) or "/")
        return response

    # -- overview -----------------------------------------------------------------------
    async def overview(self, request: Request) -> Response:
        now = time.time()
        await self.gauges.refresh(self.store)
        readings = self.gauges.readings
        per_minute = await self.store.reads.deliveries_per_minute(
            datetime.fromtimestamp(now - 3600, UTC)
        )
        recent = self.metrics.recent
        accepted: dict[str, int] = {}
        minutes: dict[int, dict[str, int]] = {}
        for source, minute, count in per_minute:
            accepted[source] = accepted.get(source, 0) + count
            minutes.setdefault(minute, {}).setdefault("accepted", 0)
            minutes[minute]["accepted"] += count
        for minute, counts in recent.per_minute(now):
            for (_, outcome), count in counts.items():
                if outcome in ("accepted", "challenge"):
                    continue
                kind = "duplicate" if outcome in ("duplicate", "conflict") else "rejected"
                minutes.setdefault(minute, {}).setdefault(kind, 0)
                minutes[minute][kind] += count
        totals = recent.totals(now)
        rows = []
        for name in sorted(self.config.sources):
            mine = {o: n for (s, o), n in totals.items() if s == name}
            rows.append(
                {
                    "name": name,
                    "accepted": accepted.get(name, 0),
                    "duplicate": mine.get("duplicate", 0) + mine.get("conflict", 0),
                    "rejected": sum(
                        n
                        for o, n in mine.items()
                        if o not in ("accepted", "duplicate", "conflict", "challenge")
                    ),
                    "lag": readings.lag_seconds.get(name, 0.0) if readings else None,
                    "depth": readings.queue_depth.get(name, 0) if readings else None,
                    "dead": readings.dead_letters.get(name, 0) if readings else None,
                    "paused": name in readings.paused_seconds if readings else None,
                }
            )
        first = int(now // 60) - 59
        chart = [{"minute": m, **minutes.get(m, {})} for m in range(first, first + 60)]
        return self._render(request, "overview.html", rows=rows, chart=_chart(chart))

    # -- deliveries ---------------------------------------------------------------------
    async def deliveries(self, request: Request) -> Response:
        q = request.query_params
        status = q.get("status") or None
        if status is not None and status not in JOB_STATES:
            raise InvalidArgument(f"unknown status {status!r}")
        search = DeliverySearch(
            ref=q.get("ref") or None,
            source=q.get("source") or None,
            event_type=q.get("type") or None,
            status=status,
            since=_parse_time(q.get("since")),
            until=_parse_time(q.get("until")),
            before=q.get("before") or None,
            limit=PAGE + 1,
        )
        found = await self.store.journal.search_deliveries(search)
        page, more = found[:PAGE], len(found) > PAGE
        filters = {k: q.get(k, "") for k in ("ref", "source", "type", "status", "since", "until")}
        older = None
        if more:
            older = urlencode({**{k: v for k, v in filters.items() if v}, "before": page[-1].id})
        return self._render(
            request,
            "deliveries.html",
            deliveries=page,
            filters=filters,
            older=older,
            sources=sorted(self.config.sources),
            states=JOB_STATES,
        )

    async def delivery(self, request: Request, *, payload: str | None = None) -> Response:
        ref = request.path_params["id"]
        report = await ops.trace(self.store, self.config, ref)
        traced = next((d for d in report.deliveries if d.delivery.id == ref), None)
        traced = traced or report.deliveries[0]
        return self._render(
            request,
            "delivery.html",
            d=traced.delivery,
            timeline=_timeline(traced),
            jobs=traced.jobs,
            payload=payload,
        )

    async def payload(self, request: Request) -> Response:
        ref = request.path_params["id"]
        found = await self.store.journal.get_delivery(ref)
        if found is None:
            raise NotFound(f"no delivery {ref!r}")
        body = await self.store.journal.read_payload(found.id)
        actor = self._actor(request)
        if body is None:
            return self._back(request, f"/deliveries/{quote(found.id)}", "payload_purged")
        log.warning("payload_viewed", delivery_id=found.id, source=found.source, actor=actor)
        await self.store.audit.record_operator_action(
            actor=actor, command="view-payload", source=found.source, delivery_id=found.id
        )
        request.path_params["id"] = found.id
        return await self.delivery(request, payload=_pretty(body))

    async def replay(self, request: Request) -> Response:
        ref = request.path_params["id"]
        report = await ops.replay(
            self.store, self.config, ref, actor=self._actor(request), wait_seconds=0
        )
        refused = [i for i in report.items if i.outcome == "refused"]
        done = "replay_refused" if refused and len(refused) == len(report.items) else "replayed"
        return self._back(request, f"/deliveries/{quote(report.delivery.id)}", done)

    # -- dead letters -------------------------------------------------------------------
    async def dead_letters(self, request: Request) -> Response:
        q = request.query_params
        source, reason = q.get("source") or None, q.get("reason") or None
        found = await self.store.queue.list_dead_letters(
            source=source, reason=reason, before=q.get("before") or None, limit=PAGE + 1
        )
        page, more = found[:PAGE], len(found) > PAGE
        older = None
        if more:
            keep = {k: v for k, v in (("source", source), ("reason", reason)) if v}
            older = urlencode({**keep, "before": page[-1].job_id})
        return self._render(
            request,
            "dead_letters.html",
            reasons=await self.store.reads.dead_letter_reasons(),
            dead=page,
            older=older,
            source=source or "",
            reason=reason or "",
            max_selected=MAX_RETRY_SELECTED,
        )

    async def retry_one(self, request: Request) -> Response:
        form = request.state.form
        job_id = str(form.get("one") or form.get("job_id") or "")
        await ops.dlq_retry(self.store, self.config, job_id, actor=self._actor(request))
        delivery_id = job_id.rsplit(":", 1)[0]
        return self._back(request, f"/deliveries/{quote(delivery_id)}", "retried")

    async def retry_selected(self, request: Request) -> Response:
        form = request.state.form
        job_ids = list(dict.fromkeys(str(v) for v in form.getlist("job_id")))
        limit = _int(form.get("limit"), MAX_RETRY_SELECTED)
        if not job_ids:
            raise InvalidArgument("select at least one dead letter")
        if not 1 <= limit <= MAX_RETRY_SELECTED:
            raise InvalidArgument(f"the limit must be between 1 and {MAX_RETRY_SELECTED}")
        if len(job_ids) > limit:
            raise InvalidArgument(f"{len(job_ids)} selected, more than the limit of {limit}")
        if form.get("confirm") != "yes":
            return self._render(request, "confirm_retry.html", job_ids=job_ids, limit=limit)
        results = []
        for job_id in job_ids:
            try:
                await ops.dlq_retry(self.store, self.config, job_id, actor=self._actor(request))
                results.append((job_id, "requeued", ""))
            except HookinboxError as exc:
                results.append((job_id, "refused", exc.message))
        return self._render(request, "retried.html", results=results)

    # -- sources ------------------------------------------------------------------------
    async def sources(self, request: Request) -> Response:
        report = await ops.list_sources(self.store, self.config)
        reconciliation = None
        if request.query_params.get("reconcile"):
            reconciliation = await ops.reconcile(self.store, self.config, limit=10)
        return self._render(
            request, "sources.html", sources=report.sources, reconciliation=reconciliation
        )

    async def pause(self, request: Request) -> Response:
        name = request.path_params["name"]
        reason = str(request.state.form.get("reason", "")).strip()[:200] or None
        await ops.pause_source(
            self.store, self.config, name, actor=self._actor(request), reason=reason
        )
        return self._back(request, "/sources", "paused")

    async def resume(self, request: Request) -> Response:
        name = request.path_params["name"]
        await ops.resume_source(self.store, self.config, name, actor=self._actor(request))
        return self._back(request, "/sources", "resumed")


def _base(request: Request) -> str:
    return str(request.scope.get("root_path", "")).rstrip("/")


def _safe_next(request: Request, value: object = None) -> str:
    """A path inside the admin to go to after login; anything else goes to the overview."""
    target = str(value if value is not None else request.query_params.get("next", ""))
    base = _base(request)
    if base and target.startswith(base + "/") and "//" not in target and "\\" not in target:
        return target[len(base) :]
    return "/"


def _security_headers(nonce: str) -> dict[str, str]:
    return {
        "content-security-policy": (
            "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; "
            f"script-src 'nonce-{nonce}'; form-action 'self'; frame-ancestors 'none'; "
            "base-uri 'none'"
        ),
        "x-frame-options": "DENY",
        "x-content-type-options": "nosniff",
        "referrer-policy": "no-referrer",
        "cache-control": "no-store",
    }


def _parse_time(value: str | None) -> datetime | None:
    """``2026-01-31T12:00`` (UTC, as an HTML datetime-local input sends it) or unix seconds."""
    if not value:
        return None
    if re.fullmatch(r"\d+(\.\d+)?", value):
        return datetime.fromtimestamp(float(value), UTC)
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidArgument(f"not a time: {value[:40]!r}") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed


def _int(value: object, default: int) -> int:
    text = str(value or "").strip()
    return int(text) if text.isdigit() else default


def _pretty(body: bytes) -> str:
    try:
        return json.dumps(json.loads(body), indent=2, ensure_ascii=False)
    except ValueError:
        return body.decode("utf-8", errors="replace")


def _timeline(traced: ops.TracedDelivery) -> list[dict[str, Any]]:
    """Everything that happened to one delivery, oldest first."""
    d = traced.delivery
    events: list[dict[str, Any]] = [
        {"at": d.first_seen_at, "kind": "receipt", "what": "first received", "detail": ""},
    ]
    if d.delivery_count > 1:
        detail = f"{d.delivery_count} deliveries in all"
        if d.conflicts:
            detail += f", {d.conflicts} with a different body"
        events.append(
            {"at": d.last_seen_at, "kind": "receipt", "what": "last received", "detail": detail}
        )
    for job in traced.jobs:
        for attempt in job.attempts:
            events.append(
                {
                    "at": attempt.started_at,
                    "kind": "attempt",
                    "what": f"{job.job.action} attempt {attempt.number} ({attempt.trigger})",
                    "detail": " ".join(
                        x for x in (attempt.outcome or "running", attempt.error_code or "") if x
                    ),
                    "error": bool(attempt.error_code),
                }
            )
    for effect in traced.effects:
        events.append(
            {"at": effect.created_at, "kind": "effect", "what": effect.key, "detail": effect.state}
        )
    for action in traced.operator_actions:
        events.append(
            {
                "at": action.at,
                "kind": "operator",
                "what": f"{action.command} by {action.actor}",
                "detail": action.detail or "",
            }
        )
    for layer, rows in traced.layers.items():
        for row in rows:
            at = row.get("at") or row.get("created_at")
            when = at if isinstance(at, datetime) else _maybe_time(at)
            events.append(
                {
                    "at": when,
                    "kind": layer,
                    "what": str(row.get("what") or row.get("key") or row.get("id") or layer),
                    "detail": str(row.get("detail") or row.get("state") or ""),
                }
            )
    epoch = datetime.fromtimestamp(0, UTC)
    return sorted(events, key=lambda e: e["at"] or epoch)


def _maybe_time(value: object) -> datetime | None:
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
    return None


def _chart(minutes: list[dict[str, int]]) -> dict[str, Any]:
    """Stacked bars (accepted, duplicate, rejected) per minute as SVG rectangles."""
    width, height, gap = 10, 80, 2
    peak = max(
        (sum(m.get(k, 0) for k in ("accepted", "duplicate", "rejected")) for m in minutes),
        default=0,
    )
    scale = height / peak if peak else 0
    bars = []
    for index, minute in enumerate(minutes):
        y: float = height
        for kind in ("accepted", "duplicate", "rejected"):
            count = minute.get(kind, 0)
            if not count:
                continue
            h = max(1.0, count * scale)
            y -= h
            label = datetime.fromtimestamp(minute["minute"] * 60, UTC).strftime("%H:%M")
            bars.append(
                {
                    "x": index * (width + gap),
                    "y": round(y, 1),
                    "h": round(h, 1),
                    "w": width,
                    "kind": kind,
                    "title": f"{label} {kind}: {count}",
                }
            )
    return {"bars": bars, "width": len(minutes) * (width + gap), "height": height, "peak": peak}


def admin_routes(
    config: Config, store: Store, metrics: Metrics, gauges: StoreGauges
) -> list[Mount]:
    """``[Mount("/admin", ...)]`` when ``HOOKINBOX_ADMIN_TOKEN`` is set, else nothing: the
    admin is off without a token."""
    token = os.environ.get(ADMIN_TOKEN_ENV, "")
    if not token:
        return []
    admin = Admin(config, store, token, metrics=metrics, gauges=gauges)
    return [Mount("/admin", app=admin.app)]


__all__ = ["ADMIN_TOKEN_ENV", "Admin", "Sessions", "admin_routes"]
