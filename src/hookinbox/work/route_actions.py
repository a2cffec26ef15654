"""Every route of the config resolved to the action it runs, once, at start-up.

So a typo in ``handler = "…"`` fails before anything is accepted, and the worker looks up
an action by ``(source, action)`` and knows nothing of how it was made.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx

from hookinbox import outbound
from hookinbox.config import Config, Route
from hookinbox.loading import load_callable
from hookinbox.metrics import Metrics
from hookinbox.resources.machine import build_machines
from hookinbox.store import Store
from hookinbox.tracing import NOOP, Tracing
from hookinbox.verify.registry import credential_headers
from hookinbox.work.actions import Action, ForwardAction, HandlerAction
from hookinbox.work.destination_gate import DestinationGate
from hookinbox.work.handlers import load_services
from hookinbox.work.resource_action import ResourceAction
from hookinbox.work.retry_policy import RetryPolicy


def build_actions(
    config: Config,
    client: httpx.AsyncClient,
    metrics: Metrics,
    services: Mapping[str, Any] | None = None,
    *,
    tracing: Tracing = NOOP,
    store: Store | None = None,
) -> dict[tuple[str, str], Action]:
    """Every (source, action) of the config, resolved now so a typo fails at start-up.
    ``services`` (else the config's ``[worker] services`` factory) are what handlers
    ask for by name. ``store`` holds the destinations' shared state (without one, a
    destination route forwards with no gate: a dry build at start-up)."""
    machines = build_machines(config.machines)
    if services is None:
        services = load_services(config)
    actions: dict[tuple[str, str], Action] = {}
    gates = {
        name: DestinationGate(name, destination, store)
        for name, destination in config.destinations.items()
        if store is not None
    }
    never = credential_headers(config.sources)
    for name, source in config.sources.items():
        for index, route in enumerate(source.routes):
            where = f"sources.{name}.routes.{index}"
            if route.resource is not None:
                machine = machines[route.resource.kind]
                actions[(name, route.action)] = ResourceAction(
                    name, route.resource, machine, metrics
                )
                continue
            if route.destination is not None:
                destination = config.destinations[route.destination]
                actions[(name, route.action)] = ForwardAction(
                    destination.url,
                    destination.timeout_seconds,
                    client,
                    tracing=tracing,
                    gate=gates.get(route.destination),
                    never=never,
                )
                continue
            actions[(name, route.action)] = _build(route, where, client, services, tracing, never)
    return actions


def _build(
    route: Route,
    where: str,
    client: httpx.AsyncClient,
    services: Mapping[str, Any],
    tracing: Tracing,
    never: frozenset[str],
) -> Action:
    if route.handler is not None:
        where = f"{where}.handler"
        return HandlerAction(load_callable(route.handler, where), services, where=where)
    assert route.forward is not None
    return ForwardAction(
        route.forward, route.forward_timeout_seconds, client, tracing=tracing, never=never
    )


def build_retry_policies(config: Config) -> dict[tuple[str, str], RetryPolicy]:
    """Each (source, action)'s retry policy: its schedule, or ``[worker]``'s backoff."""
    return {
        (name, route.action): RetryPolicy.build(config.worker, route)
        for name, source in config.sources.items()
        for route in source.routes
    }


def build_targets(config: Config) -> dict[tuple[str, str], str]:
    """What each (source, action)'s attempts record as their target: a forward's host and
    path (never its query), a handler's ``module:function``, a resource route's kind."""
    targets: dict[tuple[str, str], str] = {}
    for name, source in config.sources.items():
        for route in source.routes:
            if route.destination is not None:
                target = outbound.target_of(config.destinations[route.destination].url)
            elif route.forward is not None:
                target = outbound.target_of(route.forward)
            elif route.handler is not None:
                target = route.handler
            else:
                target = f"resource:{route.resource.kind if route.resource else '?'}"
            targets[(name, route.action)] = target
    return targets
