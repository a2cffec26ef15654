"""``hookinbox config check``: everything ``serve`` refuses a config for, without serving.

``serve``, ``migrate`` and ``config check`` run the one check below, so a config that
passes it is one ``serve`` starts with: secrets present and decoded by their scheme,
handlers importable with the services they ask for, destinations, filters, machines,
notifiers and operator tokens valid.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from hookinbox.cli.common import config_option, json_option, reports_errors
from hookinbox.cli.output import print_json
from hookinbox.config import Config, load_config

if TYPE_CHECKING:
    from hookinbox.app import Inbox


def checked_inbox(config: Config, *, run_workers: bool = True) -> Inbox:
    """The inbox ``serve`` runs, built (which checks everything) but not started: no
    store is opened, no port bound."""
    from hookinbox.app import Inbox

    config.require_secrets()
    return Inbox(config, run_workers=run_workers)


def check_config(config: Config) -> None:
    """Raise the ConfigError ``serve`` would stop with; build nothing that outlives it."""
    checked_inbox(config).tracing.shutdown()


@click.group("config")
def config_group() -> None:
    """The config file."""


@config_group.command("check")
@config_option
@json_option
@reports_errors
def check(config_path: str | None, as_json: bool) -> None:
    """Check the config as serve does (secrets, handlers, destinations, filters,
    machines, tokens) without opening the store; exit 2 with one line naming the key."""
    config = load_config(config_path)
    check_config(config)
    routes = sum(len(source.routes) for source in config.sources.values())
    if as_json:
        print_json({"ok": True, "sources": len(config.sources), "routes": routes})
    else:
        click.echo(f"config ok: {len(config.sources)} sources, {routes} routes")
