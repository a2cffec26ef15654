"""Notifications: dead letters, paused sources and rejected deliveries told to a team.

:class:`NoticeSweeper` runs beside the outbox relay (in ``serve`` and in ``hookinbox
worker``). Every ``SWEEP_SECONDS`` it reads, for each ``[notify.NAME]``, the facts of the
kinds it wants over a lookback of two windows (at least half an hour), folds them per
window, and writes one outbox row per (kind, source, subject, reason, window) under the
key ``notify:{name}:{kind}:{source}:{subject}:{reason}:{window}``: a later sweep over the
same facts finds the key and writes nothing, so a notice is never repeated; once written,
the relay sends it with bounded retries and that key as ``Idempotency-Key``, so it is
never lost (a destination that stays down makes it an outbox dead letter, which
``hookinbox outbox retry`` sends again). Past ``max_per_hour`` notices wait for the next
hour's budget while their facts are within the lookback; older ones are dropped, and
logged.

:class:`NotifySender` is what the relay uses for ``notify:*`` rows: a POST of the notice
as JSON, or as Slack-compatible ``{"text": ...}``. Notices hold ids, codes, counts and
times, never a payload.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import httpx

from hookinbox import outbound
from hookinbox.config.notify import NotifierConfig
from hookinbox.errors import ActionError
from hookinbox.logs import get_logger
from hookinbox.store import FactGroup, NewNotice, Store

log = get_logger("hookinbox.notify")

#: How often a sweeper looks for new facts.
SWEEP_SECONDS = 10.0
#: The prefix of a notice's outbox kind (``notify:ops``) and key.
PREFIX = "notify:"
_MIN_LOOKBACK = 1800.0

_TITLES = {
    "dead_letter": "dead letters",
    "source_paused": "source paused",
    "rejected_delivery": "deliveries refused",
    "circuit_open": "circuit open",
}


def outbox_kind(name: str) -> str:
    return PREFIX + name


def notice_key(name: str, kind: str, group: FactGroup, window: int) -> str:
    return f"{PREFIX}{name}:{kind}:{group.source}:{group.subject}:{group.reason}:{window}"


def fold(
    name: str, notifier: NotifierConfig, kind: str, groups: list[FactGroup]
) -> list[NewNotice]:
    """Minute groups of one kind into one notice per (source, subject, reason, window)."""
    minutes = int(notifier.window // 60)
    folded: dict[tuple[str, str, str, int], dict[str, Any]] = {}
    for group in groups:
        # A circuit belongs to a destination, not a source: every notifier that asks for
        # circuit_open gets it.
        if group.source and not notifier.takes(group.source):
            continue
        window = group.minute // minutes
        key = (group.source, group.subject, group.reason, window)
        entry = folded.get(key)
        if entry is None:
            entry = folded[key] = {
                "key": notice_key(name, kind, group, window),
                "kind": kind,
                "source": group.source,
                "subject": group.subject,
                "reason": group.reason,
                "count": 0,
                "window_start_minute": window * minutes,
                "window_minutes": minutes,
                "first_minute": group.minute,
            }
            if group.actor:
                entry["actor"] = group.actor
        entry["count"] += group.count
    return [NewNotice(e["key"], kind, e["source"], e) for e in folded.values()]


class NoticeSweeper:
    def __init__(self, notify: Mapping[str, NotifierConfig], store: Store) -> None:
        self._notify = dict(notify)
        self._store = store

    @property
    def enabled(self) -> bool:
        return bool(self._notify)

    async def sweep(self) -> int:
        """One pass over every notifier and kind; how many notices were written."""
        total = 0
        for name, notifier in self._notify.items():
            lookback = max(2 * notifier.window, _MIN_LOOKBACK)
            for kind in notifier.on:
                groups = await self._store.notices.fact_groups(kind, lookback)
                notices = fold(name, notifier, kind, groups)
                written, held = await self._store.notices.write_notices(
                    outbox_kind(name), notices, notifier.max_per_hour
                )
                total += written
                if written:
                    log.info("notices_written", notifier=name, kind=kind, notices=written)
                if held:
                    log.warning("notices_held", notifier=name, kind=kind, notices=held)
        return total


def slack_text(notice: Mapping[str, Any]) -> str:
    """One line a person reads in a channel."""
    title = _TITLES.get(str(notice.get("kind")), str(notice.get("kind")))
    subject = notice.get("subject", "")
    reason = notice.get("reason", "")
    parts = [f":rotating_light: hookinbox: {title} in *{notice.get('source')}*"]
    if notice.get("kind") == "dead_letter":
        parts.append(f"action `{subject}`, reason `{reason}`: {notice.get('count')} job(s)")
        parts.append("(`hookinbox dlq list --source ...`)")
    elif notice.get("kind") == "rejected_delivery":
        parts.append(f"`{reason}`: {notice.get('count')} delivery(ies)")
        parts.append("(`hookinbox rejected list`)")
    elif notice.get("kind") == "source_paused":
        parts.append(f"by {notice.get('actor') or 'an operator'}")
    elif notice.get("kind") == "circuit_open":
        parts = [
            f":rotating_light: hookinbox: circuit open for destination *{subject}*",
            "after failures in a row; its jobs are held until a probe succeeds",
        ]
    return " ".join(parts)


class NotifySender:
    """The relay's sender for ``notify:NAME`` rows: POST to that notifier's URL."""

    def __init__(self, notify: Mapping[str, NotifierConfig], client: httpx.AsyncClient) -> None:
        self._notify = dict(notify)
        self._client = client

    def _url(self, notifier: NotifierConfig) -> str:
        if notifier.url is not None:
            return notifier.url
        assert notifier.url_env is not None
        url = os.environ.get(notifier.url_env, "")
        if not url.startswith(("http://", "https://")):
            raise ActionError("notify_url_unset")
        return url

    async def send(self, message: Any) -> None:
        name = str(message.kind).removeprefix(PREFIX)
        notifier = self._notify.get(name)
        if notifier is None:
            raise ActionError("unknown_notifier")
        body: dict[str, Any] = dict(message.body)
        if notifier.format == "slack":
            body = {"text": slack_text(message.body)}
        headers = {
            "idempotency-key": message.key,
            "x-hookinbox-notice-kind": str(message.body.get("kind", "")),
            "x-hookinbox-attempt": str(message.attempt),
        }
        await outbound.post(
            self._client,
            self._url(notifier),
            json=body,
            headers=headers,
            timeout=notifier.timeout_seconds,
        )


__all__ = [
    "PREFIX",
    "SWEEP_SECONDS",
    "NoticeSweeper",
    "NotifySender",
    "fold",
    "outbox_kind",
    "slack_text",
]
