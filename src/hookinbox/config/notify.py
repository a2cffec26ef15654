"""``[notify.NAME]``: tell a team when something needs a person, without Alertmanager.

::

    [notify.ops]
    url_env = "OPS_SLACK_WEBHOOK_URL"   # or url = "https://alerts.internal/hookinbox"
    format = "slack"                    # "json" (default) or Slack-compatible {"text": ...}
    on = ["dead_letter", "source_paused", "rejected_delivery"]
    sources = ["stripe", "github"]      # default: every source
    window = "15m"                      # one notice per source/subject/reason per window
    max_per_hour = 30                   # then notices wait (or, past the lookback, drop)

A notice is written to the outbox under a stable key,
``notify:{name}:{kind}:{source}:{subject}:{reason}:{window}``, so the relay sends it with
bounded retries and the same ``Idempotency-Key``, and a second sweep over the same facts
writes nothing new: never lost once written, never repeated.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from hookinbox.config.fields import ForwardUrl, Frozen, parse_duration

#: What a notice can be about. ``circuit_open``: a ``[destinations.NAME]`` circuit
#: opened (the destination is the subject; no source, so a notifier's ``sources`` does
#: not filter it).
NoticeKind = Literal["dead_letter", "source_paused", "rejected_delivery", "circuit_open"]
NOTICE_KINDS: tuple[NoticeKind, ...] = (
    "dead_letter",
    "source_paused",
    "rejected_delivery",
    "circuit_open",
)

_NAME = re.compile(r"^[A-Za-z0-9_\-]{1,64}$")


class NotifierConfig(Frozen):
    """One destination of notices (``[notify.NAME]``)."""

    #: Where notices are POSTed, or
    url: ForwardUrl | None = None
    #: the environment variable holding that URL (a Slack webhook URL is a secret).
    url_env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    #: ``json``: the notice as a JSON object; ``slack``: ``{"text": ...}`` for a Slack
    #: (or Mattermost, Rocket.Chat ...) incoming webhook.
    format: Literal["json", "slack"] = "json"
    #: The kinds of notice this destination gets.
    on: tuple[NoticeKind, ...] = ("dead_letter", "source_paused", "rejected_delivery")
    #: Only these sources (default: all).
    sources: tuple[str, ...] = ()
    #: One notice per (kind, source, subject, reason) per window; a whole number of minutes.
    window: float = Field(default=900.0, ge=60, le=86400)
    #: At most this many notices per hour to this destination.
    max_per_hour: int = Field(default=30, ge=1, le=10_000)
    #: A POST that takes longer is a failed attempt, retried by the relay.
    timeout_seconds: float = Field(default=10.0, gt=0, le=120)

    @field_validator("window", mode="before")
    @classmethod
    def _duration(cls, value: Any) -> float:
        return parse_duration(value)

    @field_validator("window")
    @classmethod
    def _minutes(cls, value: float) -> float:
        if value % 60:
            raise ValueError("window must be a whole number of minutes")
        return value

    @field_validator("on")
    @classmethod
    def _some(cls, value: tuple[NoticeKind, ...]) -> tuple[NoticeKind, ...]:
        if not value:
            raise ValueError("on must name at least one kind of notice")
        return value

    @model_validator(mode="after")
    def _one_url(self) -> NotifierConfig:
        if (self.url is None) == (self.url_env is None):
            raise ValueError("a notifier needs exactly one of 'url' or 'url_env'")
        return self

    def takes(self, source: str) -> bool:
        return not self.sources or source in self.sources


def check_notifiers(notify: dict[str, NotifierConfig], sources: dict[str, Any]) -> None:
    for name, notifier in notify.items():
        if not _NAME.match(name):
            raise ValueError(f"notify.{name}: a name may hold only letters, digits, _ and -")
        for source in notifier.sources:
            if source not in sources:
                raise ValueError(f"notify.{name}.sources: no source named {source!r}")
