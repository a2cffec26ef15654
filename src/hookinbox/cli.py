"""The ``hookinbox`` command. The only place where errors become exit codes.

Environment: ``HOOKINBOX_CONFIG`` (config file when ``--config`` is not given; then
``./hookinbox.toml``). Secrets are read from the variables each source names in
``secret_env``.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import signal
import sys
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import click
from rich.console import Console
from rich.table import Table

from hookinbox.config import Config, load_config, resolve_config_path
from hookinbox.errors import HookinboxError, NotFound
from hookinbox.logs import configure_logging
from hookinbox.store import JOB_STATES, DeliveryView, Store, iso, open_store_for

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])

config_option = click.option(
    "--config",
    "config_path",
    envvar="HOOKINBOX_CONFIG",
    default=None,
    help="Config file [env HOOKINBOX_CONFIG, else ./hookinbox.toml].",
)


def fail(message: str, code: int) -> None:
    click.echo(f"hookinbox: {message}", err=True)
    sys.exit(code)


def reports_errors(fn: F) -> F:
    """Every HookinboxError ends the command with one line and its exit code."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except HookinboxError as exc:
            fail(f"{exc.code}: {exc.message}", exc.exit_code)

    return wrapper  # type: ignore[return-value]


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


@asynccontextmanager
async def opened_store(config: Config) -> AsyncIterator[Store]:
    store = open_store_for(config.database)
    await store.open()
    try:
        yield store
    finally:
        await store.close()


def print_json(value: Any) -> None:
    click.echo(json.dumps(value, indent=2, default=str))


@click.group()
@click.version_option(package_name="hookinbox")
def main() -> None:
    """hookinbox: receive webhooks once, process them exactly once."""


# -- serving --------------------------------------------------------------------------
@main.command()
@config_option
@click.option("--host", default=None, help="Bind address [config server.host].")
@click.option("--port", type=int, default=None, help="Port [config server.port].")
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
    from hookinbox.app import Inbox
    from hookinbox.server import ConnectionLimits, run_server

    config = load_config(config_path)
    config.require_secrets()
    configure_logging(log_format, log_level)  # type: ignore[arg-type]
    inbox = Inbox(config, run_workers=not no_workers)
    run(_preflight(config))
    limits = ConnectionLimits.from_config(config.server)
    bind_host = host or config.server.host
    bind_port = port if port is not None else config.server.port
    if processes == 1:
        run_server(inbox.app, limits, host=bind_host, port=bind_port, processes=1)
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
    factory = "hookinbox.app:app_from_environment"
    run_server(factory, limits, host=bind_host, port=bind_port, processes=processes)


async def _preflight(config: Config) -> None:
    """Reach the store and migrate it before binding the port, so an unreachable database
    is one line and exit 3, not a traceback from inside the server's start-up."""
    async with opened_store(config):
        pass


@main.command()
@config_option
@click.option("--log-format", type=click.Choice(["json", "console"]), default="json")
@click.option("--log-level", type=click.Choice(["debug", "info", "warning"]), default="info")
@reports_errors
def worker(config_path: str | None, log_format: str, log_level: str) -> None:
    """Run workers only (start several, on any host, to scale out)."""
    from hookinbox.actions import build_actions
    from hookinbox.outbox import OutboxRelay
    from hookinbox.worker import WorkerPool

    config = load_config(config_path)
    configure_logging(log_format, log_level)  # type: ignore[arg-type]

    async def work() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        async with opened_store(config) as store:
            pool = WorkerPool(config, store)
            # The outbox relay runs beside the workers (a no-op with no [outbox] sender).
            await asyncio.gather(pool.run(stop), OutboxRelay(config.outbox, store).run(stop))

    async def resolve_handlers() -> None:
        # build_actions wants a client for forward routes; this one only lives for the
        # check and is closed here (the workers open their own).
        import httpx

        async with httpx.AsyncClient() as client:
            build_actions(config, client)

    # Resolve handlers before touching the store, so a typo fails fast.
    run(resolve_handlers())
    run(work())


@main.command()
@config_option
@reports_errors
def migrate(config_path: str | None) -> None:
    """Apply pending schema migrations (serve and worker also do this at start-up)."""
    config = load_config(config_path)

    async def go() -> list[str]:
        store = open_store_for(config.database)
        await store.open(migrate=False)
        try:
            return await store.migrate()
        finally:
            await store.close()

    applied = run(go())
    click.echo(f"applied: {', '.join(applied)}" if applied else "schema is up to date")


# -- sending test deliveries ------------------------------------------------------------
@main.command()
@config_option
@click.option("--url", default=None, help="Server base URL [from config server.host/port].")
@click.option("--source", default=None, help="Source name [the only source, if one].")
@click.option("--type", "event_type", default="test.event", show_default=True)
@click.option("--id", "event_id", default=None, help="Event id [a new one].")
@click.option("--data", default="{}", help="JSON object for the event's data.")
@click.option("--repeat", default=1, type=click.IntRange(1, 10000), show_default=True)
@click.option("--concurrent", is_flag=True, help="Send the repeats at the same time.")
@click.option("--tamper", is_flag=True, help="Change the body after signing it.")
@click.option("--scheme", default=None, help="Sign with this scheme [the source's].")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per answer.")
@reports_errors
def send(
    config_path: str | None,
    url: str | None,
    source: str | None,
    event_type: str,
    event_id: str | None,
    data: str,
    repeat: int,
    concurrent: bool,
    tamper: bool,
    scheme: str | None,
    as_json: bool,
) -> None:
    """Sign and send test deliveries to a running server; print each answer."""
    from hookinbox.send import SendOptions, send_deliveries

    config = load_config(config_path)
    try:
        parsed = json.loads(data)
    except ValueError:
        fail("--data is not valid JSON", 2)
    if not isinstance(parsed, dict):
        fail("--data must be a JSON object", 2)
    options = SendOptions(
        url=url,
        source=source,
        event_type=event_type,
        event_id=event_id,
        data=parsed,
        repeat=repeat,
        concurrent=concurrent,
        tamper=tamper,
        scheme=scheme,
    )
    answers = run(send_deliveries(config, options))
    for answer in answers:
        if as_json:
            click.echo(json.dumps(answer))
        else:
            challenge = "challenge" if "challenge" in answer else ""
            detail = answer.get("status") or answer.get("error") or challenge
            extra = " conflict" if answer.get("conflict") else ""
            click.echo(
                f"#{answer['n']:<3} {answer['http_status']} {detail}{extra} "
                f"{answer.get('delivery_id') or ''}".rstrip()
            )
    unreached = [a for a in answers if a["http_status"] == 0]
    if unreached:
        first = unreached[0]
        fail(
            f"connection_failed: {len(unreached)} of {len(answers)} deliveries could not reach "
            f"{first['url']} ({first['error'].removeprefix('connection failed: ')}); "
            "is `hookinbox serve` running there (--url, or server.host/port in the config)?",
            1,
        )


# -- the journal --------------------------------------------------------------------------
@main.group()
def deliveries() -> None:
    """Read the journal."""


@deliveries.command("list")
@config_option
@click.option("--status", type=click.Choice(JOB_STATES), default=None)
@click.option("--source", default=None)
@click.option("--limit", type=click.IntRange(1, 10000), default=50, show_default=True)
@click.option("--before", default=None, help="Page: deliveries older than this delivery id.")
@click.option("--json", "as_json", is_flag=True)
@reports_errors
def deliveries_list(
    config_path: str | None,
    status: Any,
    source: str | None,
    limit: int,
    before: str | None,
    as_json: bool,
) -> None:
    """Newest deliveries first."""
    config = load_config(config_path)

    async def go() -> list[DeliveryView]:
        async with opened_store(config) as store:
            return await store.list_deliveries(
                status=status, source=source, limit=limit, before=before
            )

    rows = run(go())
    if as_json:
        print_json([{k: v for k, v in r.as_json().items() if k != "jobs"} for r in rows])
        return
    table = Table("delivery_id", "source", "event_id", "type", "status", "count", "last_seen")
    for r in rows:
        table.add_row(
            r.id,
            r.source,
            r.event_id,
            r.event_type,
            r.status,
            str(r.delivery_count),
            iso(r.last_seen_at),
        )
    Console().print(table)


@deliveries.command("show")
@config_option
@click.argument("ref")
@click.option("--source", default=None, help="When the event id exists in several sources.")
@click.option("--json", "as_json", is_flag=True)
@reports_errors
def deliveries_show(config_path: str | None, ref: str, source: str | None, as_json: bool) -> None:
    """One delivery by internal id (dlv_...) or event id, with its jobs."""
    config = load_config(config_path)

    async def go() -> DeliveryView | None:
        async with opened_store(config) as store:
            return await store.get_delivery(ref, source)

    found = run(go())
    if found is None:
        raise NotFound(f"no delivery with id or event id {ref!r}")
    data = found.as_json()
    if as_json:
        print_json(data)
        return
    console = Console()
    for key in (
        "delivery_id",
        "source",
        "event_id",
        "type",
        "status",
        "first_seen_at",
        "last_seen_at",
        "delivery_count",
        "conflicts",
        "body_sha256",
        "payload_retained",
    ):
        console.print(f"[bold]{key:>16}[/bold]  {data[key]}")
    table = Table("action", "state", "attempts", "last_error", "next_attempt_at", "business_id")
    for job in data["jobs"]:
        table.add_row(
            job["action"],
            job["state"],
            f"{job['attempts']}/{job['max_attempts']}",
            job["last_error"] or "",
            job["next_attempt_at"] or "",
            job["business_id"] or "",
        )
    console.print(table)


import hookinbox.cli_ops  # noqa: E402  (registers dlq, replay, purge, reconcile, sources, trace)
import hookinbox.cli_resources  # noqa: E402, F401  (registers resources, outbox)

if __name__ == "__main__":  # pragma: no cover
    # `python -m hookinbox.cli`: the commands other modules register live on the imported
    # module's group, not on this __main__ copy's.
    from hookinbox.cli import main as registered_main

    registered_main()
