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
    """The ``hookinbox`` group: under ``--json`` a usage error (an unknown option, a value
    that is not a number) is a JSON object with its code as well, not click's text."""

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        words = list(sys.argv[1:] if args is None else args)
        if not standalone_mode or not asks_for_json(words):
            return super().main(words, prog_name, complete_var, standalone_mode, **extra)
        try:
            result = super().main(words, prog_name, complete_var, False, **extra)
        except click.ClickException as exc:
            fail(InvalidArgument.code, exc.format_message(), exc.exit_code, as_json=True)
        except click.Abort:
            fail("aborted", "aborted", 1, as_json=True)
        sys.exit(result if isinstance(result, int) else 0)


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
