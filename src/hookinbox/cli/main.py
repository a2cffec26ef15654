"""The ``hookinbox`` command: one group, each command group in a module of its own.

Environment: ``HOOKINBOX_CONFIG`` (config file when ``--config`` is not given; then
``./hookinbox.toml``). Secrets are read from the variables each source names in
``secret_env``. Who ran an operator command is recorded as ``cli:$USER``
(``HOOKINBOX_ACTOR`` overrides).
"""

from __future__ import annotations

import importlib
import itertools
import sys
from collections.abc import Iterator, MutableMapping, Sequence
from typing import Any

import click

from hookinbox.cli.common import fail
from hookinbox.errors import InvalidArgument
from hookinbox.version import __version__

#: Each command of ``hookinbox``: the module that defines it and its name there. A run
#: imports the module of the command it runs only (``hookinbox --help`` imports them all).
COMMANDS: dict[str, tuple[str, str]] = {
    "serve": ("hookinbox.cli.serve", "serve"),
    "worker": ("hookinbox.cli.serve", "worker"),
    "migrate": ("hookinbox.cli.serve", "migrate"),
    "config": ("hookinbox.cli.configuration", "config_group"),
    "send": ("hookinbox.cli.send", "send"),
    "deliveries": ("hookinbox.cli.deliveries", "deliveries"),
    "dlq": ("hookinbox.cli.dlq", "dlq"),
    "replay": ("hookinbox.cli.replay", "replay"),
    "purge": ("hookinbox.cli.maintenance", "purge"),
    "erase": ("hookinbox.cli.erase", "erase"),
    "reconcile": ("hookinbox.cli.maintenance", "reconcile"),
    "sources": ("hookinbox.cli.sources", "sources"),
    "trace": ("hookinbox.cli.trace", "trace"),
    "resources": ("hookinbox.cli.resources", "resources"),
    "reviews": ("hookinbox.cli.reviews", "reviews"),
    "outbox": ("hookinbox.cli.outbox", "outbox"),
    "rejected": ("hookinbox.cli.rejected", "rejected"),
    "catch-up": ("hookinbox.cli.catch_up", "catch_up"),
    "keys": ("hookinbox.cli.keys", "keys"),
}


class LazyCommands(MutableMapping[str, click.Command]):
    """A group's commands by name, each imported from its module when first looked up.

    Every command module imports what its command needs (the store, the app, the
    providers' clients); importing all of them cost each run of the command line most of
    a second of a core before it did anything, a cron ``reconcile`` and a purge under
    load alike. The names are known without importing, so a mistyped command is still
    answered with the names it could have been."""

    def __init__(self, where: dict[str, tuple[str, str]]) -> None:
        self._where = dict(where)
        self._loaded: dict[str, click.Command] = {}

    def __getitem__(self, name: str) -> click.Command:
        command = self._loaded.get(name)
        if command is None:
            module, attribute = self._where[name]
            command = getattr(importlib.import_module(module), attribute)
            if not isinstance(command, click.Command) or command.name != name:
                raise LookupError(f"{module}.{attribute} is not the command {name!r}")
            self._loaded[name] = command
        return command

    def __setitem__(self, name: str, command: click.Command) -> None:
        self._loaded[name] = command

    def __delitem__(self, name: str) -> None:
        if name not in self:
            raise KeyError(name)
        self._where.pop(name, None)
        self._loaded.pop(name, None)

    def __contains__(self, name: object) -> bool:
        return name in self._where or name in self._loaded

    def __iter__(self) -> Iterator[str]:
        yield from self._where
        yield from (name for name in self._loaded if name not in self._where)

    def __len__(self) -> int:
        return len(self._where.keys() | self._loaded.keys())


def asks_for_json(args: Sequence[str]) -> bool:
    """``--json`` or ``--format json`` among the arguments, read before click parses them
    (a usage error is found while parsing)."""
    words = list(args)
    return (
        "--json" in words
        or "--format=json" in words
        or any(pair == ("--format", "json") for pair in itertools.pairwise(words))
    )


class Commands(click.Group):
    """The ``hookinbox`` group: a usage error (an unknown option, a value that is not a
    number) is one line with its code, as every other error (a JSON object under
    ``--json``), naming the command's ``--help``; a group run without its command shows
    its help. An argument that is not UTF-8 is refused before anything reads it."""

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        words = list(sys.argv[1:] if args is None else args)
        if not standalone_mode:
            return super().main(words, prog_name, complete_var, standalone_mode, **extra)
        as_json = asks_for_json(words)
        for place, word in enumerate(words, 1):
            if not is_utf8(word):
                fail(
                    InvalidArgument.code, f"argument {place} is not UTF-8 text", 2, as_json=as_json
                )
        try:
            result = super().main(words, prog_name, complete_var, False, **extra)
        except click.exceptions.NoArgsIsHelpError as exc:
            if not as_json:
                exc.show()
                sys.exit(exc.exit_code)
            fail(InvalidArgument.code, exc.format_message(), exc.exit_code, as_json=True)
        except click.UsageError as exc:
            message = exc.format_message()
            if exc.ctx is not None and not as_json:
                message += f" (see {exc.ctx.command_path} --help)"
            fail(InvalidArgument.code, message, exc.exit_code, as_json=as_json)
        except click.ClickException as exc:
            fail(InvalidArgument.code, exc.format_message(), exc.exit_code, as_json=as_json)
        except click.Abort:
            fail("aborted", "aborted", 1, as_json=as_json)
        sys.exit(result if isinstance(result, int) else 0)


def is_utf8(word: str) -> bool:
    """Whether an argument came as UTF-8 (Python hands other bytes over as surrogates)."""
    try:
        word.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


@click.group(cls=Commands, commands=LazyCommands(COMMANDS))
@click.version_option(version=__version__, prog_name="hookinbox")
def main() -> None:
    """hookinbox: receive webhooks once, process them exactly once."""
