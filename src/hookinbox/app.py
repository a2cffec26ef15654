"""The inbox: one store, one receiver and (optionally) the workers, as an ASGI app.

Standalone, ``hookinbox serve`` runs :attr:`Inbox.app` under uvicorn. As a library, mount
it in your own Starlette or FastAPI app and give that app the inbox's lifespan (a mounted
app's own lifespan is not run by Starlette)::

    inbox = Inbox(load_config("hookinbox.toml"))
    app = Starlette(routes=[Mount("/hooks", inbox.app)], lifespan=inbox.lifespan)
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.routing import Route
from starlette.types import ASGIApp

from hookinbox.admin.views import admin_routes
from hookinbox.api import api_routes
from hookinbox.catch_up import run_catch_up_schedule
from hookinbox.config import Config
from hookinbox.errors import ConfigError, HookinboxError
from hookinbox.http.health import healthz, readyz_endpoint
from hookinbox.http.listeners import SplitByPort
from hookinbox.http.metrics import StoreGauges, metrics_endpoint
from hookinbox.logs import get_logger
from hookinbox.metrics import Metrics
from hookinbox.ops.purge import run_purge_loop
from hookinbox.ops.reads import run_receipt_flush
from hookinbox.ops.reconcile import PIPELINE_CHECKS
from hookinbox.ops.sources import PausedSources
from hookinbox.ops.views import OperatorViews
from hookinbox.receive.endpoint import WebhookEndpoint, WebhookFastPath
from hookinbox.receive.receiver import Receiver
from hookinbox.resources.checks import CHECKS as RESOURCE_CHECKS
from hookinbox.resources.machine import build_machines
from hookinbox.resources.relay import OutboxRelay
from hookinbox.resources.service import Resources
from hookinbox.resources.trace import TRACE_LAYERS
from hookinbox.sealing import Sealer
from hookinbox.store import Store, open_store_for
from hookinbox.tracing import NOOP, Tracing, build_tracing
from hookinbox.work.actions import Action
from hookinbox.work.handlers import load_services
from hookinbox.work.route_actions import build_actions
from hookinbox.work.worker import WorkerPool

log = get_logger("hookinbox.app")


def standard_operator_views() -> OperatorViews:
    """The pipeline's trace and checks plus those of tracked resources: what an inbox,
    its admin page and the CLI show unless told otherwise."""
    return OperatorViews(
        trace_layers=dict(TRACE_LAYERS), checks=(*PIPELINE_CHECKS, *RESOURCE_CHECKS)
    )


def build_sealer(config: Config) -> Sealer:
    """What seals bodies and snippets at rest (``[encryption]``): :meth:`Config.sealer`,
    for a store opened apart from the app (``open_store_for(url, sealer=...)``)."""
    return config.sealer()


def default_metrics(config: Config) -> Metrics:
    """The counters and histograms of one process."""
    return Metrics(config.sources, slowest_job_seconds=config.worker.job_timeout_seconds)


async def check_store_clock(store: Store, config: Config) -> None:
    """Warn when this host's clock is off the store's by more than a quarter of
    ``[worker] order_grace_seconds``: ordered routes compare ids made by receivers'
    clocks with a horizon from workers' clocks, so two hosts off in opposite directions
    eat into the grace twice (docs/concepts/ordering.md). Only with an ordered route;
    once per process start."""
    grace = config.worker.order_grace_seconds
    ordered = any(route.order_key for source in config.sources.values() for route in source.routes)
    if grace <= 0 or not ordered:
        return
    try:
        offset, uncertainty = await store.clock_offset()
    except HookinboxError:
        return  # an unreachable store says so on its own
    if abs(offset) - uncertainty > grace / 4:
        log.warning(
            "clock_offset",
            seconds=round(offset, 3),
            uncertainty=round(uncertainty, 3),
            order_grace_seconds=grace,
        )


async def check_store_schema(store: Store) -> None:
    """Warn when a newer hookinbox has migrated the store: expected for a moment during a
    rolling upgrade, a problem if this process stays behind (a rollback, a stale image).
    Once per process start; the process runs on."""
    try:
        versions = await store.schema_versions()
    except HookinboxError:
        return  # an unreachable store says so on its own
    if versions.store_is_newer:
        log.warning("store_schema_newer", store_version=versions.store, code_version=versions.code)


def build_receiver(
    config: Config,
    store: Store,
    *,
    metrics: Metrics | None = None,
    tracing: Tracing | None = None,
    paused: Callable[[str], bool] = lambda source: False,
) -> Receiver:
    """A receiver with its collaborators: the inbox's, or (for a command that only
    receives) its own metrics and the no-op tracing."""
    return Receiver(
        config,
        store,
        metrics=metrics if metrics is not None else default_metrics(config),
        tracing=tracing if tracing is not None else NOOP,
        paused=paused,
    )


def build_worker_pool(
    config: Config,
    store: Store,
    *,
    metrics: Metrics | None = None,
    tracing: Tracing | None = None,
    services: Mapping[str, Any] | None = None,
    actions: Mapping[tuple[str, str], Action] | None = None,
    name: str | None = None,
) -> WorkerPool:
    """A worker pool with its collaborators: the HTTP client its forwards use (the pool
    closes it when it stops), the actions of the config's routes (unless given), the
    services handlers ask for (the config's ``[worker] services`` factory unless given),
    and the caller's metrics and tracing (its own metrics and the no-op tracing unless
    given: whoever builds a tracing shuts it down)."""
    metrics = metrics if metrics is not None else default_metrics(config)
    tracing = tracing if tracing is not None else NOOP
    services = load_services(config) if services is None else services
    client = httpx.AsyncClient()
    if actions is None:
        actions = build_actions(config, client, metrics, services, tracing=tracing, store=store)
    return WorkerPool(
        config,
        store,
        actions=actions,
        client=client,
        metrics=metrics,
        services=services,
        tracing=tracing,
        name=name,
    )


class Inbox:
    """``services``: objects of the application that handlers ask for by parameter name
    (``async def handle(event, ctx, db): ...``), also on ``ctx.services``; checked against
    every handler's signature here, so a missing one fails now. Unset, the config's
    ``[worker] services`` factory (if any) gives them."""

    def __init__(
        self,
        config: Config,
        *,
        run_workers: bool = True,
        store: Store | None = None,
        metrics: Metrics | None = None,
        views: OperatorViews | None = None,
        services: Mapping[str, Any] | None = None,
    ) -> None:
        self.config = config
        self.store = store or open_store_for(config.database, sealer=build_sealer(config))
        unsealed = sorted(s for s in config.sealed_sources() if not self.store.sealer.seals(s))
        if unsealed:
            raise ConfigError(
                f"encryption: the store given does not seal source {unsealed[0]!r}; open it "
                "with open_store_for(url, sealer=build_sealer(config))"
            )
        self.metrics = metrics or default_metrics(config)
        #: The trace layers and reconcile checks operators see (admin, CLI, API).
        self.views = views or standard_operator_views()
        self.store_gauges = StoreGauges(config.sources, destinations=config.destinations)
        #: Paused sources, re-read from the store in the background (answers 503 meanwhile).
        self.paused = PausedSources(self.store, config.operations.pause_refresh_seconds)
        #: OpenTelemetry spans, or a no-op (``[otel]``): one for the receiver and workers.
        self.tracing = build_tracing(config)
        self.receiver = build_receiver(
            config, self.store, metrics=self.metrics, tracing=self.tracing, paused=self.paused
        )
        self.workers = (
            build_worker_pool(
                config, self.store, metrics=self.metrics, tracing=self.tracing, services=services
            )
            if run_workers
            else None
        )
        #: Tracked resources (``await inbox.resources.create(...)``) and the outbox relay.
        self.resources = Resources(self.store, build_machines(config.machines), config.sources)
        self.outbox = (
            OutboxRelay(config.outbox, self.store, notify=config.notify) if run_workers else None
        )
        self._relay_task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()
        self._worker_task: asyncio.Task[None] | None = None
        self._ops_tasks: list[asyncio.Task[None]] = []
        webhooks = WebhookEndpoint(self.receiver)
        routes_app = Starlette(
            routes=[
                Route("/webhooks/{source}", webhooks, methods=["POST"]),
                Route("/healthz", healthz, methods=["GET"]),
                Route("/readyz", readyz_endpoint(self.store), methods=["GET"]),
                Route(
                    "/metrics",
                    metrics_endpoint(self.metrics, self.store_gauges, self.store),
                    methods=["GET"],
                ),
                *admin_routes(config, self.store, self.metrics, self.views, self.receiver),
                *api_routes(config, self.store, self.views, receiver=self.receiver),
            ],
            lifespan=self.lifespan,
        )
        #: The ASGI app: deliveries take the fast path, the rest goes through Starlette.
        #: With ``[server] admin_port``, each path answers on its own listener only.
        self.app: ASGIApp = WebhookFastPath(webhooks, routes_app)
        if config.server.admin_port is not None:
            self.app = SplitByPort(self.app, config.server.admin_port)

    async def start(self) -> None:
        await self.store.open()
        await check_store_schema(self.store)
        await check_store_clock(self.store, self.config)
        self._stop.clear()
        if self.workers is not None:
            self._worker_task = asyncio.create_task(self.workers.run(self._stop))
        if self.outbox is not None:
            self._relay_task = asyncio.create_task(self.outbox.run(self._stop))
        with contextlib.suppress(HookinboxError):
            await self.paused.refresh()  # a pause holds from the first request on
        self._ops_tasks = [
            asyncio.create_task(self.paused.run(self._stop)),
            asyncio.create_task(run_purge_loop(self.store, self.config, self._stop)),
            asyncio.create_task(run_receipt_flush(self.store, self.metrics.receipts, self._stop)),
        ]
        if self.workers is not None:
            # [sources.NAME.catch_up] every: beside the workers, off unless configured.
            self._ops_tasks.append(
                asyncio.create_task(
                    run_catch_up_schedule(
                        self.config, self.store, self.receiver, self.metrics, self._stop
                    )
                )
            )
        log.info("inbox_started", sources=sorted(self.config.sources), workers=bool(self.workers))

    async def stop(self) -> None:
        self._stop.set()
        if self._worker_task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._worker_task
            self._worker_task = None
        if self._relay_task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._relay_task
            self._relay_task = None
        for task in self._ops_tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._ops_tasks = []
        await self.receiver.rejected.drain()  # copies of refusals on their way to the store
        await self.store.close()
        self.tracing.shutdown()  # flushes the spans still batched

    @contextlib.asynccontextmanager
    async def lifespan(self, app: Any = None) -> AsyncIterator[None]:
        await self.start()
        try:
            yield
        finally:
            await self.stop()


def app_from_environment() -> Any:
    """The ASGI app of one process of ``hookinbox serve --processes N``, built from the
    settings that command put in the environment (HOOKINBOX_CONFIG, HOOKINBOX_LOG_FORMAT,
    HOOKINBOX_LOG_LEVEL, HOOKINBOX_NO_WORKERS)."""
    from hookinbox.config import load_config
    from hookinbox.logs import configure_logging

    configure_logging(
        os.environ.get("HOOKINBOX_LOG_FORMAT", "json"),  # type: ignore[arg-type]
        os.environ.get("HOOKINBOX_LOG_LEVEL", "info"),
        capture_libraries=True,
    )
    config = load_config(os.environ.get("HOOKINBOX_CONFIG"))
    return Inbox(config, run_workers=os.environ.get("HOOKINBOX_NO_WORKERS") != "1").app
