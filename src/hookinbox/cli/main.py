"""The ``hookinbox`` command: one group, each command group in a module of its own.

Environment: ``HOOKINBOX_CONFIG`` (config file when ``--config`` is not given; then
``./hookinbox.toml``). Secrets are read from the variables each source names in
``secret_env``. Who ran an operator command is recorded as ``cli:$USER``
(``HOOKINBOX_ACTOR`` overrides).
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Sequence
from typing import Any

import click

from hookinbox.cli.catch_up import catch_up
from hookinbox.cli.common import fail
from hookinbox.cli.configuration import config_group
from hookinbox.cli.deliveries import deliveries
from hookinbox.cli.dlq import dlq
from hookinbox.cli.erase import erase
from hookinbox.cli.keys import keys
from hookinbox.cli.maintenance import purge, reconcile
from hookinbox.cli.outbox import outbox
from hookinbox.cli.rejected import rejected
from hookinbox.cli.replay import replay
from hookinbox.cli.resources import resources
from hookinbox.cli.reviews import reviews
from hookinbox.cli.send import send
from hookinbox.cli.serve import migrate, serve, worker
from hookinbox.cli.sources import sources
from hookinbox.cli.trace import trace
from hookinbox.errors import InvalidArgument
from hookinbox.version import __version__


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


@click.group(cls=Commands)
@click.version_option(version=__version__, prog_name="hookinbox")
def main() -> None:
    """hookinbox: receive webhooks once, process them exactly once."""


for command in (
    serve,
    worker,
    migrate,
    config_group,
    send,
    deliveries,
    dlq,
    replay,
    purge,
    erase,
    reconcile,
    sources,
    trace,
    resources,
    reviews,
    outbox,
    rejected,
    catch_up,
    keys,
):
    main.add_command(command)
