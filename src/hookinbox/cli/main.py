"""The ``hookinbox`` command: one group, each command group in a module of its own.

Environment: ``HOOKINBOX_CONFIG`` (config file when ``--config`` is not given; then
``./hookinbox.toml``). Secrets are read from the variables each source names in
``secret_env``. Who ran an operator command is recorded as ``cli:$USER``
(``HOOKINBOX_ACTOR`` overrides).
"""

from __future__ import annotations

import click

from hookinbox.cli.configuration import config_group
from hookinbox.cli.deliveries import deliveries
from hookinbox.cli.dlq import dlq
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
from hookinbox.version import __version__


@click.group()
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
    reconcile,
    sources,
    trace,
    resources,
    reviews,
    outbox,
    rejected,
):
    main.add_command(command)
