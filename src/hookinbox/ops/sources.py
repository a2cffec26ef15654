"""Pause a source when its provider's contract changes; resume it when ready.

The pause is kept in the store, so every receiver process sees it: each one keeps a
:class:`PausedSources` that re-reads the paused set every ``pause_refresh_seconds``
(2 s by default). A paused source answers 503 with Retry-After and stores nothing, so
the provider keeps retrying and nothing is lost. Workers keep running jobs already
accepted: a pause stops intake, not the work in flight.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from typing import Any

from hookinbox.codes import error_code_of
from hookinbox.config import Config
from hookinbox.errors import UnknownSource
from hookinbox.logs import get_logger
from hookinbox.ops.search import clean_term
from hookinbox.store import SourceState, Store, iso

log = get_logger("hookinbox.ops.sources")


#: A source's state, one word for the CLI, the admin and the API: ``receiving`` (its
#: endpoint takes deliveries), ``paused`` (answers 503 until resumed), ``not_configured``
#: (known to the store, e.g. a stale pause, but gone from the config).
SOURCE_STATES = ("receiving", "paused", "not_configured")
#: The longest reason a pause keeps (the API's bound, the admin form's ``maxlength``).
MAX_PAUSE_REASON = 200


@dataclass(frozen=True, slots=True)
class SourceRow:
    name: str
    scheme: str | None
    routes: tuple[str, ...]
    configured: bool
    state: SourceState | None

    @property
    def paused(self) -> bool:
        return self.state is not None and self.state.paused

    @property
    def status(self) -> str:
        """One of :data:`SOURCE_STATES`."""
        if self.paused:
            return "paused"
        return "receiving" if self.configured else "not_configured"

    def as_json(self) -> dict[str, Any]:
        state = self.state
        return {
            "source": self.name,
            "configured": self.configured,
            "scheme": self.scheme,
            "routes": list(self.routes),
            "state": self.status,
            "paused": self.paused,
            "reason": state.reason if state and state.paused else None,
            "changed_at": iso(state.changed_at) if state else None,
            "changed_by": state.changed_by if state else None,
        }


@dataclass(frozen=True, slots=True)
class SourcesReport:
    sources: list[SourceRow]

    def as_json(self) -> dict[str, Any]:
        return {"sources": [row.as_json() for row in self.sources]}


async def list_sources(store: Store, config: Config) -> SourcesReport:
    """Configured sources with their pause state (and any paused source no longer
    configured, so a stale pause is visible)."""
    states = {state.source: state for state in await store.sources.list_source_states()}
    rows = [
        SourceRow(
            name,
            source.scheme,
            tuple(route.action for route in source.routes),
            True,
            states.get(name),
        )
        for name, source in sorted(config.sources.items())
    ]
    rows += [
        SourceRow(name, None, (), False, state)
        for name, state in sorted(states.items())
        if name not in config.sources
    ]
    return SourcesReport(rows)


async def pause_source(
    store: Store, config: Config, name: str, *, actor: str, reason: str | None = None
) -> SourceState:
    if config.source(name) is None:
        raise UnknownSource(f"no source named {name!r} in the config")
    # Checked here, whoever pauses: the reason is a column of ``sources list`` and a line
    # of the audit, where a line break or 100,000 characters would be shown as they came.
    reason = clean_term(reason, "reason", max_length=MAX_PAUSE_REASON)
    state = await store.sources.set_source_paused(name, paused=True, reason=reason, actor=actor)
    log.warning("source_paused", source=name, actor=actor)
    return state


async def resume_source(store: Store, config: Config, name: str, *, actor: str) -> SourceState:
    if config.source(name) is None:
        known = {state.source for state in await store.sources.list_source_states()}
        if name not in known:
            raise UnknownSource(f"no source named {name!r} in the config or the store")
    state = await store.sources.set_source_paused(name, paused=False, reason=None, actor=actor)
    log.info("source_resumed", source=name, actor=actor)
    return state


class PausedSources:
    """What a receiver asks on every request: is this source paused? Answered from
    memory; :meth:`run` refreshes it from the store. If the store cannot be read, the
    last known set stays (a store outage already answers 503 on its own)."""

    def __init__(self, store: Store, refresh_seconds: float = 2.0) -> None:
        self._store = store
        self._refresh = refresh_seconds
        self._paused: frozenset[str] = frozenset()

    def __call__(self, source: str) -> bool:
        return source in self._paused

    @property
    def paused(self) -> frozenset[str]:
        return self._paused

    async def refresh(self) -> None:
        states = await self._store.sources.list_source_states()
        paused = frozenset(state.source for state in states if state.paused)
        if paused != self._paused:
            log.info("paused_sources", sources=sorted(paused))
        self._paused = paused

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                await self.refresh()
            except Exception as exc:  # keep the last known pause state and try again
                log.warning("paused_refresh_failed", error=error_code_of(exc))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self._refresh)
