"""What every command shares: loading the config, opening the store, one-line errors.

The CLI is the only place where errors become exit codes: every
:class:`~hookinbox.errors.HookinboxError` ends a command with one line on stderr and its
``exit_code`` (2 config or bad argument, 3 store, 4 not found, 5 refused, 6 a port in
use, 7 a key of the encryption key ring missing or a provider's API failed catch-up). Exit
1 is a command's own finding, not an error of hookinbox's: ``reconcile`` found something,
``send``'s deliveries got no answer or one other than the one wanted. The line is
``hookinbox: <code>: <message>``, or, when the command was asked for JSON (``--json``,
``--format json``), the object ``{"error": "<code>", "message": "<message>"}``: a
program reading JSON gets JSON, with the code the HTTP API would answer.
"""

from __future__ import annotations

import asyncio
import functools
import json
import sys
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any, NoReturn, TypeVar

import click

from hookinbox.cli.output import json_requested
from hookinbox.config import Config, load_config, parse_duration
from hookinbox.errors import HookinboxError, InvalidArgument
from hookinbox.logs import configure_logging
from hookinbox.ops.search import parse_when
from hookinbox.store import Store, open_store_for
from hookinbox.verify.edge import storable_text

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])

config_option = click.option(
    "--config",
    "config_path",
    envvar="HOOKINBOX_CONFIG",
    default=None,
    help="Config file [env HOOKINBOX_CONFIG, else ./hookinbox.toml].",
)
json_option = click.option(
    "--json", "as_json", is_flag=True, help="Print JSON (errors too: one JSON object on stderr)."
)


class NonEmpty(click.types.StringParamType):
    """Text that says something. An empty or blank value (``--source ''``, often a shell
    variable that was never set) would read as the option left out: a filter widened to
    everything, a send to the config's server. It is a usage error instead."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        text = super().convert(value, param, ctx)
        if not text.strip():
            self.fail("empty: give a value or leave the option out", param, ctx)
        return text


NON_EMPTY = NonEmpty()


class EventText(NonEmpty):
    """An event's id or type as the receiver stores it (printable, at most 255 bytes): a
    line break would be refused by the server, or cut a header that carries it, instead
    of named here."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        text = super().convert(value, param, ctx)
        if not storable_text(text):
            self.fail("not printable text of at most 255 bytes", param, ctx)
        return text


EVENT_TEXT = EventText()


class Duration(click.types.FloatParamType):
    """Seconds, written as the config writes a duration (``90s``, ``15m``), from 0 to
    ``most`` (a duration too): bounded as an IntRange is, so a slip (``30d`` for ``30s``)
    is refused instead of waited out."""

    name = "duration"

    def __init__(self, most: str) -> None:
        self.most_text = most
        self.most = parse_duration(most)

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        if isinstance(value, float):
            return value
        try:
            seconds = parse_duration(value)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)
        if seconds > self.most:
            self.fail(f"longer than {self.most_text}, the most it takes", param, ctx)
        return seconds


def bulk_needs_limit(command: str) -> str:
    return f"{command} needs --limit N: a bulk command is always bounded"


def fail(code: str, message: str, exit_code: int, *, as_json: bool | None = None) -> NoReturn:
    """End the command: one line on stderr (a JSON object when JSON was asked for)."""
    if json_requested() if as_json is None else as_json:
        click.echo(json.dumps({"error": code, "message": message}), err=True)
    else:
        click.echo(f"hookinbox: {code}: {message}", err=True)
    sys.exit(exit_code)


def reports_errors(fn: F) -> F:
    """Every HookinboxError ends the command with one line and its exit code."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except HookinboxError as exc:
            fail(exc.code, exc.message, exc.exit_code)

    return wrapper  # type: ignore[return-value]


def run(coro: Coroutine[Any, Any, T]) -> T:
    """On uvloop where it is installed (uvicorn[standard] brings it, as ``serve`` uses it):
    a ``hookinbox worker`` spends about a third less CPU per job on it than on asyncio's
    own loop, whose socket writes and loop turns were a quarter of its profile."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - a platform uvloop does not build on
        return asyncio.run(coro)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(coro)


@asynccontextmanager
async def opened_store(config: Config, *, create: bool = False) -> AsyncIterator[Store]:
    """The configured store, open. Operator commands open only one that exists
    (``store_not_found``, exit 3, otherwise); ``serve`` and ``worker`` pass ``create=True``
    and make and migrate it."""
    store = open_store_for(config.database, sealer=config.sealer())
    await store.open(create=create)
    try:
        yield store
    finally:
        await store.close()


def quiet_config(path: str | None) -> Config:
    """Load the config; keep log lines (to stderr) for errors only, so ``--json`` output
    and the one-line refusals stay clean. The audit of every change is in the store."""
    configure_logging("console", "error")
    return load_config(path)


def parse_since(value: str | None, flag: str = "--since") -> datetime | None:
    """``--since 24h`` (that long ago), an ISO time (``2025-01-31T12:00Z``, UTC if bare) or
    unix seconds: the same reading as the admin page and the API (:func:`ops.parse_when`)."""
    return parse_when(value, flag)


def duration_flag(flag: str, value: str | None) -> float | None:
    if value is None:
        return None
    try:
        return parse_duration(value)
    except ValueError as exc:
        raise InvalidArgument(f"{flag}: {exc}") from None
