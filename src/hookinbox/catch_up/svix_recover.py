"""Svix (Standard Webhooks senders built on it): ``POST /api/v1/app/{app_id}/endpoint/
{endpoint_id}/recover`` through Svix's own SDK (https://api.svix.com/docs#tag/Endpoint/
operation/v1.endpoint.recover).

Recover resends every message that failed to the endpoint since a time; the sender then
delivers them as signed webhooks, which the receiver checks and reserves as usual (an
event already received is a duplicate there). So a run is one request, and reports
``requested`` (one recovery), not events: Svix answers with a background task, not the
messages.
"""

from __future__ import annotations

from datetime import UTC, datetime

from svix.api import SvixAsync, SvixOptions
from svix.api.errors.http_error import HttpError
from svix.models import RecoverIn

from hookinbox.catch_up.provider import Pacer, ProviderPage
from hookinbox.config.catch_up import CatchUpSettings
from hookinbox.errors import CatchUpFailed, CatchUpUnauthorized


class SvixRecover:
    def __init__(
        self,
        settings: CatchUpSettings,
        api_key: str,
        source: str,
        pacer: Pacer,
        *,
        dry_run: bool = False,
    ) -> None:
        assert settings.app_id is not None and settings.endpoint_id is not None
        self._dry_run = dry_run
        options = SvixOptions(server_url=settings.api_base, retry_schedule=[], timeout=30)
        self._svix = SvixAsync(api_key, options)
        self._settings = settings
        self._source = source
        self._pacer = pacer

    async def page(self, *, floor: int, after: str | None) -> ProviderPage:
        since = RecoverIn(since=datetime.fromtimestamp(floor, UTC))
        app_id, endpoint_id = self._settings.app_id, self._settings.endpoint_id
        assert app_id is not None and endpoint_id is not None
        while not self._dry_run:
            await self._pacer.turn()
            try:
                await self._svix.endpoint.recover(app_id, endpoint_id, since)
            except HttpError as exc:
                if exc.status_code == 429:
                    await self._pacer.rate_limited(None, self._source)
                    continue
                if exc.status_code in (401, 403):
                    raise CatchUpUnauthorized(
                        f"Svix refused the key of catch_up.api_key_env ({exc.status_code})"
                    ) from None
                raise CatchUpFailed(f"Svix's API answered {exc.status_code}") from None
            except Exception as exc:  # the SDK's transport errors (httpx), a bad answer
                name = type(exc).__name__
                raise CatchUpFailed(f"Svix's API could not be read ({name})") from None
            break
        return ProviderPage(requested=1, done=True)

    async def aclose(self) -> None:
        # The SDK opens an httpx client and offers no close of its own.
        await self._svix._httpx_client.aclose()
