"""Stripe: ``GET /v1/events`` through Stripe's own SDK (https://docs.stripe.com/api/events/list).

Events come newest first, up to 100 a page, paged by ``starting_after`` (the last event's
id) while ``has_more``; ``created[gte]`` bounds the walk at the cursor, and
``delivery_success=false`` (``only_failed``) lists only events whose webhooks are still
pending or failed. Each event object is what the webhook carries: its ``id`` is the
event id, its ``type`` the type, the object itself the body. Stripe keeps events for 30
days. The SDK's own retries are off: this module waits out a 429 by the run's bounds.
"""

from __future__ import annotations

from typing import Any

import orjson
import stripe

from hookinbox.catch_up.provider import Pacer, ProviderPage, PulledEvent
from hookinbox.config.catch_up import CatchUpSettings
from hookinbox.errors import CatchUpFailed, CatchUpUnauthorized

_HEADERS = {"content-type": "application/json"}


def _retry_after(exc: stripe.StripeError) -> float | None:
    headers = exc.headers or {}
    value = headers.get("retry-after") or headers.get("Retry-After")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


class StripeEvents:
    def __init__(self, settings: CatchUpSettings, api_key: str, source: str, pacer: Pacer) -> None:
        addresses: dict[str, str] = {}
        if settings.api_base:
            addresses["api"] = settings.api_base.rstrip("/")
        self._http = stripe.HTTPXClient(timeout=30)
        self._client = stripe.StripeClient(
            api_key,
            base_addresses=addresses,  # type: ignore[arg-type]
            max_network_retries=0,
            http_client=self._http,
        )
        self._settings = settings
        self._source = source
        self._pacer = pacer

    async def _list(self, params: dict[str, Any]) -> Any:
        while True:
            await self._pacer.turn()
            try:
                return await self._client.v1.events.list_async(params)  # type: ignore[arg-type]
            except stripe.RateLimitError as exc:
                await self._pacer.rate_limited(_retry_after(exc), self._source)
            except (stripe.AuthenticationError, stripe.PermissionError) as refused:
                raise CatchUpUnauthorized(
                    f"Stripe refused the key of catch_up.api_key_env ({refused.http_status})"
                ) from None
            except stripe.APIConnectionError:
                raise CatchUpFailed("Stripe's API could not be reached") from None
            except stripe.StripeError as answered:
                raise CatchUpFailed(f"Stripe's API answered {answered.http_status}") from None

    async def page(self, *, floor: int, after: str | None) -> ProviderPage:
        params: dict[str, Any] = {"limit": self._settings.page_size, "created": {"gte": floor}}
        if self._settings.only_failed:
            params["delivery_success"] = False
        if after is not None:
            params["starting_after"] = after
        listed = await self._list(params)
        try:
            raw = orjson.loads(listed.last_response.body)
            objects = raw["data"]
            has_more = bool(raw["has_more"])
            events = [
                PulledEvent(
                    event_id=str(obj["id"]),
                    event_type=str(obj.get("type") or ""),
                    body=orjson.dumps(obj),
                    headers=dict(_HEADERS),
                    at=int(obj["created"]),
                )
                for obj in objects
            ]
        except (KeyError, TypeError, ValueError, AttributeError):
            raise CatchUpFailed("Stripe's answer is not a list of events") from None
        return ProviderPage(
            events=events,
            newest_at=max((e.at for e in events), default=None),
            next_after=events[-1].event_id if has_more and events else None,
            done=not (has_more and events),
        )

    async def aclose(self) -> None:
        await self._http.close_async()  # type: ignore[no-untyped-call]
