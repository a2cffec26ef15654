"""The TOML configuration: frozen value objects validated once, at start-up.

One module per concept: :mod:`~hookinbox.config.model` (the file, sources, routes,
worker, server), :mod:`~hookinbox.config.schemes` (scheme options and fingerprint
policies), :mod:`~hookinbox.config.resources` (state machine tables, resource routes,
the outbox relay), :mod:`~hookinbox.config.operations` (retention, review, purge, pause)
and :mod:`~hookinbox.config.fields` (types and parsers they share). Nothing here imports
another hookinbox package but :mod:`hookinbox.errors`: everything else reads the config.
"""

from hookinbox.config.fields import parse_duration
from hookinbox.config.model import (
    CONFIG_ENV,
    DEFAULT_CONFIG_PATH,
    ORDER_HEADER,
    Config,
    Route,
    Server,
    Source,
    StoreKind,
    Worker,
    config_from_mapping,
    load_config,
    resolve_config_path,
    store_kind,
)

__all__ = [
    "CONFIG_ENV",
    "DEFAULT_CONFIG_PATH",
    "ORDER_HEADER",
    "Config",
    "Route",
    "Server",
    "Source",
    "StoreKind",
    "Worker",
    "config_from_mapping",
    "load_config",
    "parse_duration",
    "resolve_config_path",
    "store_kind",
]
