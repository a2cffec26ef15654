"""``[sources.NAME.catch_up]``: pulling what a provider's API still holds, bounded.

::

    [sources.stripe.catch_up]
    api_key_env = "STRIPE_API_KEY"     # read at the edge, never stored or logged
    every = "10m"                      # the worker runs it on a schedule (off if unset)
    window = "3d"                      # never look further back than this
    max_pages = 10                     # pages per run (each up to page_size events)

    [sources.github.catch_up]
    api_key_env = "GITHUB_TOKEN"
    hook = "repos/acme/shop/hooks/12345"   # or "app" (a GitHub App's own webhook)
    github_mode = "inject"                 # or "redeliver": GitHub sends it again, signed

    [sources.billing.catch_up]              # a Svix-based sender (standard-webhooks)
    api_key_env = "SVIX_API_KEY"
    app_id = "app_..."
    endpoint_id = "ep_..."

The provider is the scheme's (``stripe``, ``github``; ``standard-webhooks`` is Svix's
recover) unless ``provider`` names it. See docs/operations/catch-up.md.
"""

from __future__ import annotations

import os
import re
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from hookinbox.config.fields import Frozen, parse_duration

CatchUpProvider = Literal["stripe", "github", "svix"]
#: The provider a scheme implies when ``provider`` is not set.
SCHEME_PROVIDERS: dict[str, CatchUpProvider] = {
    "stripe": "stripe",
    "github": "github",
    "standard-webhooks": "svix",
}
_NAME = r"[A-Za-z0-9_.\-]+"
_HOOK = re.compile(rf"^(app|repos/{_NAME}/{_NAME}/hooks/\d+|orgs/{_NAME}/hooks/\d+)$")
_ID = re.compile(r"^[A-Za-z0-9_\-]{1,128}$")


class CatchUpSettings(Frozen):
    """How one source catches up from its provider's API."""

    #: ``stripe``, ``github`` or ``svix``; unset, the source's scheme decides.
    provider: CatchUpProvider | None = None
    #: The environment variable holding the API key (a Stripe restricted key with read
    #: access to events; a GitHub token; a Svix API key). Never in the file.
    api_key_env: str = Field(min_length=1, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    #: The API's base URL (an enterprise host, a stand-in); unset, the provider's own.
    api_base: str | None = Field(default=None, pattern=r"^https?://[^\s/]+")
    #: How often the worker runs it; unset, only ``hookinbox catch-up`` and the API do.
    every: float | None = None
    #: The furthest back a run looks (the first run, and after a long outage).
    window: float = 3 * 86400.0
    #: Pages one run reads at most; the rest waits for the next run (the cursor says where).
    max_pages: int = Field(default=10, ge=1, le=1000)
    #: Events per page asked of the provider (Stripe and GitHub take up to 100).
    page_size: int = Field(default=100, ge=1, le=100)
    #: Requests per second to the provider, at most.
    rate: float = Field(default=5.0, gt=0, le=100)
    #: A 429 (or GitHub's rate-limit headers) asking to wait longer than this ends the run
    #: (``catch_up_rate_limited``) instead of waiting.
    max_wait: float = 60.0
    #: Waits for rate limits in one run, at most, before it ends the same way.
    max_retries: int = Field(default=5, ge=0, le=50)
    #: Only events the provider says were not delivered (Stripe's
    #: ``delivery_success=false``, GitHub's failed deliveries); false: every event of the
    #: window, the journal deciding what is new.
    only_failed: bool = True
    #: GitHub: ``app`` (``GET /app/hook/deliveries``, a GitHub App's JWT in the variable)
    #: or ``repos/OWNER/REPO/hooks/ID`` / ``orgs/ORG/hooks/ID`` (a token).
    hook: str | None = None
    #: GitHub: ``inject`` (fetch each failed delivery's payload and reserve it here) or
    #: ``redeliver`` (ask GitHub to send it again, signed, to the webhook URL).
    github_mode: Literal["inject", "redeliver"] = "inject"
    #: Svix: the application and endpoint to recover.
    app_id: str | None = None
    endpoint_id: str | None = None

    @field_validator("every", "window", "max_wait", mode="before")
    @classmethod
    def _durations(cls, value: Any) -> float | None:
        return None if value is None else parse_duration(value)

    @field_validator("every")
    @classmethod
    def _every(cls, value: float | None) -> float | None:
        if value is not None and value < 10:
            raise ValueError("every must be at least 10s (each run costs API requests)")
        return value

    @field_validator("window")
    @classmethod
    def _window(cls, value: float) -> float:
        if not 60 <= value <= 30 * 86400:
            raise ValueError("window must be between 1m and 30d (Stripe keeps events 30 days)")
        return value

    @field_validator("hook")
    @classmethod
    def _hook(cls, value: str | None) -> str | None:
        if value is not None and not _HOOK.match(value):
            raise ValueError("hook is 'app', 'repos/OWNER/REPO/hooks/ID' or 'orgs/ORG/hooks/ID'")
        return value

    @field_validator("app_id", "endpoint_id")
    @classmethod
    def _svix_id(cls, value: str | None) -> str | None:
        if value is not None and not _ID.match(value):
            raise ValueError("an id of letters, digits, _ and -")
        return value

    @model_validator(mode="after")
    def _provider_options(self) -> CatchUpSettings:
        if self.provider == "github" and self.hook is None:
            raise ValueError("provider 'github' needs hook ('app' or 'repos/OWNER/REPO/hooks/ID')")
        if self.provider == "svix" and (self.app_id is None or self.endpoint_id is None):
            raise ValueError("provider 'svix' needs app_id and endpoint_id")
        return self

    def api_key(self) -> str:
        """The API key, read from the environment now ('' when unset)."""
        return os.environ.get(self.api_key_env, "").strip()


def resolve_catch_up(
    settings: CatchUpSettings | None, scheme: str | None
) -> CatchUpSettings | None:
    """The settings with their provider decided by the scheme when not given; ValueError
    when neither says."""
    if settings is None or settings.provider is not None:
        return settings
    provider = SCHEME_PROVIDERS.get(scheme or "")
    if provider is None:
        known = ", ".join(f"{s} ({p})" for s, p in SCHEME_PROVIDERS.items())
        raise ValueError(f"set provider: scheme {scheme!r} implies none (known: {known})")
    return CatchUpSettings.model_validate({**settings.model_dump(), "provider": provider})
