"""GitHub: a hook's deliveries (https://docs.github.com/rest/webhooks/repo-deliveries,
``/app/hook/deliveries`` for a GitHub App), over plain httpx.

GitHub never redelivers a failed delivery by itself; its documentation gives a script
that lists the deliveries, finds those whose ``status`` is not ``OK``, and asks for a
redelivery. This is that script, bounded: deliveries come newest first, up to 100 a page,
paged by the ``cursor`` of the ``Link: <...>; rel="next"`` header; the walk stops at the
first delivery older than the floor. An event (``guid``, the ``X-GitHub-Delivery`` id
every delivery of it shares) with a delivery answered 2xx is delivered; the others are
either fetched (``GET .../deliveries/{id}``: the request's headers and payload) and
reserved here, ``inject``, or redelivered by GitHub (``POST .../deliveries/{id}/attempts``),
``redeliver``, which then sends a signed webhook.

Rate limits: a 429 or 403 with ``retry-after`` (the secondary limit) waits that long; one
with ``x-ratelimit-remaining: 0`` waits until ``x-ratelimit-reset``; any other 401/403 is
``catch_up_unauthorized``.
"""

from __future__ import annotations

import re
import time
from datetime import datetime
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import orjson

from hookinbox.catch_up.provider import Pacer, ProviderPage, PulledEvent
from hookinbox.config.catch_up import CatchUpSettings
from hookinbox.errors import CatchUpFailed, CatchUpUnauthorized

API = "https://api.github.com"
_NEXT = re.compile(r'<([^>]+)>\s*;\s*rel="next"')
#: Headers of a delivery passed on with its payload: GitHub's identity headers and the
#: content type, never a signature (it signs the original bytes, not this rendering).
_KEEP = ("content-type", "user-agent")


def _next_cursor(link: str | None) -> str | None:
    if not link:
        return None
    found = _NEXT.search(link)
    if found is None:
        return None
    values = parse_qs(urlsplit(found.group(1)).query).get("cursor")
    return values[0] if values else None


def _unix(text: Any) -> int:
    return int(datetime.fromisoformat(str(text).replace("Z", "+00:00")).timestamp())


def _rate_limit(response: httpx.Response) -> tuple[bool, float | None]:
    """Whether the answer is a rate limit, and the seconds it asks to wait (None: unsaid)."""
    headers = response.headers
    if response.status_code not in (403, 429):
        return False, None
    retry_after = headers.get("retry-after")
    if retry_after is not None:  # the secondary rate limit
        try:
            return True, float(retry_after)
        except ValueError:
            return True, None
    if headers.get("x-ratelimit-remaining") == "0":  # the primary one
        reset = headers.get("x-ratelimit-reset")
        try:
            return True, max(0.0, float(reset) - time.time()) if reset is not None else None
        except ValueError:
            return True, None
    return response.status_code == 429, None


def _kept_headers(request_headers: Any, guid: str, event: str) -> dict[str, str]:
    headers: dict[str, str] = {"content-type": "application/json"}
    if isinstance(request_headers, dict):
        for name, value in request_headers.items():
            lower = str(name).lower()
            if (lower.startswith("x-github-") or lower in _KEEP) and "signature" not in lower:
                headers[lower] = str(value)
    headers["x-github-delivery"] = guid
    headers["x-github-event"] = event
    return headers


class GitHubDeliveries:
    def __init__(
        self,
        settings: CatchUpSettings,
        api_key: str,
        source: str,
        pacer: Pacer,
        *,
        dry_run: bool = False,
    ) -> None:
        assert settings.hook is not None
        #: A dry run asks for no redelivery and fetches no payload (the ids suffice).
        self._dry_run = dry_run
        hook = "app/hook" if settings.hook == "app" else settings.hook
        self._base = f"{(settings.api_base or API).rstrip('/')}/{hook}/deliveries"
        self._client = httpx.AsyncClient(
            timeout=30,
            headers={
                "authorization": f"Bearer {api_key}",
                "accept": "application/vnd.github+json",
                "x-github-api-version": "2022-11-28",
            },
        )
        self._settings = settings
        self._source = source
        self._pacer = pacer
        #: Events seen delivered in this run: an older failed delivery of one is done.
        self._delivered: set[str] = set()

    async def _call(self, method: str, url: str, **kw: Any) -> httpx.Response:
        while True:
            await self._pacer.turn()
            try:
                response = await self._client.request(method, url, **kw)
            except httpx.HTTPError:
                raise CatchUpFailed("GitHub's API could not be reached") from None
            limited, wait = _rate_limit(response)
            if limited:
                await self._pacer.rate_limited(wait, self._source)
                continue
            if response.status_code in (401, 403):
                raise CatchUpUnauthorized(
                    f"GitHub refused the token of catch_up.api_key_env ({response.status_code})"
                )
            if not response.is_success:
                raise CatchUpFailed(f"GitHub's API answered {response.status_code}")
            return response

    async def page(self, *, floor: int, after: str | None) -> ProviderPage:
        params: dict[str, Any] = {"per_page": self._settings.page_size}
        if after is not None:
            params["cursor"] = after
        response = await self._call("GET", self._base, params=params)
        try:
            listed = orjson.loads(response.content)
            rows = [(int(d["id"]), str(d["guid"]), _unix(d["delivered_at"]), d) for d in listed]
        except (KeyError, TypeError, ValueError):
            raise CatchUpFailed("GitHub's answer is not a list of deliveries") from None
        newest = max((at for _, _, at, _ in rows), default=None)
        in_window = [r for r in rows if r[2] >= floor]
        reached_floor = len(in_window) < len(rows)
        failed: dict[str, tuple[int, int, dict[str, Any]]] = {}
        delivered = 0
        for _, guid, _, data in in_window:
            code = data.get("status_code")
            if isinstance(code, int) and 200 <= code < 300:
                if guid not in self._delivered:
                    delivered += 1
                self._delivered.add(guid)
        for delivery_id, guid, at, data in in_window:
            if guid in self._delivered and self._settings.only_failed:
                continue
            if guid not in failed:  # the newest failed delivery of the event
                failed[guid] = (delivery_id, at, data)
        events: list[PulledEvent] = []
        requested = 0
        for guid, (delivery_id, at, data) in failed.items():
            event = str(data.get("event") or "")
            if self._settings.github_mode == "redeliver":
                if not self._dry_run:
                    await self._call("POST", f"{self._base}/{delivery_id}/attempts")
                requested += 1
                continue
            if self._dry_run:
                events.append(PulledEvent(guid, event, b"", {}, at))
                continue
            detail = await self._call("GET", f"{self._base}/{delivery_id}")
            try:
                request = orjson.loads(detail.content)["request"]
                payload = request["payload"]
                events.append(
                    PulledEvent(
                        event_id=guid,
                        event_type=event,
                        body=orjson.dumps(payload),
                        headers=_kept_headers(request.get("headers"), guid, event),
                        at=at,
                    )
                )
            except (KeyError, TypeError, ValueError):
                raise CatchUpFailed("GitHub's delivery answer has no request payload") from None
        next_after = _next_cursor(response.headers.get("link"))
        done = reached_floor or next_after is None
        return ProviderPage(
            events=events,
            requested=requested,
            delivered=delivered,
            newest_at=newest,
            next_after=None if done else next_after,
            done=done,
        )

    async def aclose(self) -> None:
        await self._client.aclose()
