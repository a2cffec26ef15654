"""``hookinbox serve``, ``hookinbox worker`` and ``hookinbox migrate``: running hookinbox."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import tempfile
from collections.abc import Iterator

import click

from hookinbox.cli.common import (
    NON_EMPTY,
    config_option,
    opened_store,
    reports_errors,
    run,
)
from hookinbox.cli.configuration import check_config, checked_inbox
from hookinbox.config import Config, load_config, resolve_config_path
from hookinbox.errors import StoreSchemaNewer
from hookinbox.logs import configure_logging, get_logger
from hookinbox.store import (
    SchemaVersions,
    open_store_for,
)

log = get_logger("hookinbox.cli.serve")


@click.command()
@config_option
@click.option("--host", type=NON_EMPTY, help="Bind address [config server.host].")
@click.option(
    "--port", type=click.IntRange(1, 65535), default=None, help="Port [config server.port]."
)
@click.option("--no-workers", is_flag=True, help="Receive only; run workers elsewhere.")
@click.option(
    "--processes",
    type=click.IntRange(1, 64),
    default=1,
    show_default=True,
    help="Server processes sharing the port (each with its own batcher and workers).",
)
@click.option("--log-format", type=click.Choice(["json", "console"]), default="json")
@click.option("--log-level", type=click.Choice(["debug", "info", "warning"]), default="info")
@reports_errors
def serve(
    config_path: str | None,
    host: str | None,
    port: int | None,
    no_workers: bool,
    processes: int,
    log_format: str,
    log_level: str,
) -> None:
    """Receive webhooks (and run workers, unless --no-workers)."""
    from hookinbox.server import ConnectionLimits, ensure_open_files, listen, run_server

    config = load_config(config_path)
    # The ports first: one taken by another process is one line, before anything starts.
    bind_host = host or config.server.host
    bind_port = port if port is not None else config.server.port
    host_key = "--host" if host else "server.host"
    port_key = "--port" if port is not None else "server.port"
    sockets = [listen(bind_host, bind_port, host_key, port_key)]
    operator = None
    if config.server.admin_port is not None:
        operator = (config.server.admin_host, config.server.admin_port)
        sockets.append(listen(*operator, "server.admin_host", "server.admin_port"))
    limits = ConnectionLimits.from_config(config.server)
    ensure_open_files(limits, listeners=len(sockets))
    configure_logging(log_format, log_level, capture_libraries=True)  # type: ignore[arg-type]
    inbox = checked_inbox(config, run_workers=not no_workers)
    run(_preflight(config))
    log.info("serve_urls", **serve_urls(bind_host, bind_port, operator))
    if processes == 1:
        run_server(inbox.app, limits, sockets, processes=1)
        return
    # Each process builds its own inbox from the same settings (see app_from_environment).
    os.environ.update(
        {
            "HOOKINBOX_CONFIG": str(resolve_config_path(config_path).resolve()),
            "HOOKINBOX_LOG_FORMAT": log_format,
            "HOOKINBOX_LOG_LEVEL": log_level,
            "HOOKINBOX_NO_WORKERS": "1" if no_workers else "0",
        }
    )
    with shared_metrics_dir():
        run_server("hookinbox.app:app_from_environment", limits, sockets, processes=processes)


#: prometheus-client's multiprocess mode: each process writes its values to files in this
#: directory, and whichever process answers /metrics adds them all up.
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"


@contextlib.contextmanager
def shared_metrics_dir() -> Iterator[str]:
    """The directory the server processes share their metrics through. Without one, each
    process would answer /metrics with its own counts only, and consecutive scrapes would
    alternate between processes. One the operator set (to share it with ``hookinbox
    worker`` processes too) is theirs and kept; otherwise one of our own, set before the
    processes start (prometheus-client reads it at import) and removed at exit."""
    given = os.environ.get(MULTIPROC_ENV)
    if given:
        yield given
        return
    path = tempfile.mkdtemp(prefix="hookinbox-metrics-")
    os.environ[MULTIPROC_ENV] = path
    try:
        yield path
    finally:
        os.environ.pop(MULTIPROC_ENV, None)
        shutil.rmtree(path, ignore_errors=True)


def serve_urls(host: str, port: int, operator: tuple[str, int] | None) -> dict[str, str]:
    """Where each surface answers: the webhooks on the main listener, the operator
    surfaces there too or on ``[server] admin_port``; the admin and the API say how they
    are turned on when they are off (a bare 404 explains nothing)."""
    from hookinbox.admin.auth import ADMIN_TOKEN_ENV
    from hookinbox.api import TOKENS_ENV

    def url(where: tuple[str, int], path: str) -> str:
        bound = f"[{where[0]}]" if ":" in where[0] else where[0]
        return f"http://{bound}:{where[1]}{path}"

    ops = operator or (host, port)
    admin = (
        url(ops, "/admin/") if os.environ.get(ADMIN_TOKEN_ENV) else f"off (set {ADMIN_TOKEN_ENV})"
    )
    api = url(ops, "/api/v1/") if os.environ.get(TOKENS_ENV) else f"off (set {TOKENS_ENV})"
    return {
        "webhooks": url((host, port), "/webhooks/{source}"),
        "admin": admin,
        "api": api,
        "metrics": url(ops, "/metrics"),
    }


async def _preflight(config: Config) -> None:
    """Reach the store and migrate it before binding the port, so an unreachable database
    is one line and exit 3, not a traceback from inside the server's start-up."""
    async with opened_store(config, create=True):
        pass


@click.command()
@config_option
@click.option("--log-format", type=click.Choice(["json", "console"]), default="json")
@click.option("--log-level", type=click.Choice(["debug", "info", "warning"]), default="info")
@reports_errors
def worker(config_path: str | None, log_format: str, log_level: str) -> None:
    """Run workers only (start several, on any host, to scale out)."""
    from hookinbox.app import (
        build_receiver,
        build_worker_pool,
        check_store_clock,
        check_store_schema,
        default_metrics,
    )
    from hookinbox.catch_up import run_catch_up_schedule, scheduled_sources
    from hookinbox.resources.relay import OutboxRelay
    from hookinbox.tracing import build_tracing
    from hookinbox.work.route_actions import build_actions

    config = load_config(config_path)
    configure_logging(log_format, log_level, capture_libraries=True)  # type: ignore[arg-type]

    async def work() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        tracing = build_tracing(config)
        try:
            async with opened_store(config, create=True) as store:
                await check_store_schema(store)
                await check_store_clock(store, config)
                metrics = default_metrics(config)
                pool = build_worker_pool(config, store, tracing=tracing, metrics=metrics)
                # The outbox relay runs beside the workers (a no-op with no [outbox] sender),
                # and scheduled catch-up ([sources.NAME.catch_up] every; off by default).
                relay = OutboxRelay(config.outbox, store, notify=config.notify)
                running = [pool.run(stop), relay.run(stop)]
                if scheduled_sources(config):
                    # Only then: a receiver needs every source's secrets, workers do not.
                    receiver = build_receiver(config, store, metrics=metrics, tracing=tracing)
                    running.append(run_catch_up_schedule(config, store, receiver, metrics, stop))
                await asyncio.gather(*running)
        finally:
            tracing.shutdown()  # flushes the spans still batched

    async def resolve_handlers() -> None:
        # build_actions wants a client for forward routes; this one only lives for the
        # check and is closed here (the workers open their own).
        import httpx

        async with httpx.AsyncClient() as client:
            build_actions(config, client, default_metrics(config))

    # Resolve handlers before touching the store, so a typo fails fast.
    run(resolve_handlers())
    run(work())


@click.command()
@config_option
@click.option(
    "--create", is_flag=True, help="Make the SQLite file's directory when it does not exist."
)
@reports_errors
def migrate(config_path: str | None, create: bool) -> None:
    """Check the config as serve does, then apply pending schema migrations (serve and
    worker also do this at start-up)."""
    config = load_config(config_path)
    check_config(config)

    async def go() -> tuple[list[str], SchemaVersions]:
        store = open_store_for(config.database)
        await store.open(migrate=False, make_dirs=create)
        try:
            return await store.migrate(), await store.schema_versions()
        finally:
            await store.close()

    applied, versions = run(go())
    if versions.store_is_newer:
        raise StoreSchemaNewer(
            f"the store's schema is at version {versions.store}, newer than this"
            f" hookinbox's {versions.code}: a newer release migrated it; run that release"
        )
    click.echo(
        f"applied: {', '.join(applied)} (schema version {versions.store})"
        if applied
        else f"schema is up to date (version {versions.store})"
    )
