"""hookinbox: receive webhooks once, process them exactly once.

The public surface: :class:`Inbox` (the ASGI app with its store and workers),
:func:`load_config` and :class:`Config`, what a handler receives (:class:`Event`, and
:class:`JobContext` or, for a sync handler, :class:`SyncJobContext`), the error a handler
raises to fail an attempt with its own code (:class:`ActionError`, or
:class:`PayloadInvalid` for a body it can never process), and the errors the library API
raises, rooted in :class:`HookinboxError` (the tree is drawn in :mod:`hookinbox.errors`).
Helpers for testing handlers are in :mod:`hookinbox.testing`.

``__version__`` comes from :mod:`hookinbox.version`, the one place it is written.
"""

import importlib
from typing import TYPE_CHECKING, Any

from hookinbox.errors import (
    ActionError,
    ConfigError,
    HookinboxError,
    NotFound,
    OperationRefused,
    StoreUnavailable,
)
from hookinbox.version import __version__ as __version__

if TYPE_CHECKING:
    from hookinbox.app import Inbox
    from hookinbox.config import Config, load_config
    from hookinbox.work.actions import Event
    from hookinbox.work.effects import JobContext, SyncJobContext
    from hookinbox.work.handlers import PayloadInvalid

#: Where each name of the public surface is defined. They are imported when first asked
#: for (PEP 562): a process that imports one module of the package (the command line,
#: a handler's module) does not pay for the app, the admin and every operation.
_DEFINED_IN = {
    "Inbox": "hookinbox.app",
    "Config": "hookinbox.config",
    "load_config": "hookinbox.config",
    "Event": "hookinbox.work.actions",
    "JobContext": "hookinbox.work.effects",
    "SyncJobContext": "hookinbox.work.effects",
    "PayloadInvalid": "hookinbox.work.handlers",
}


def __getattr__(name: str) -> Any:
    module = _DEFINED_IN.get(name)
    if module is None:
        raise AttributeError(f"module 'hookinbox' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


__all__ = [
    "ActionError",
    "Config",
    "ConfigError",
    "Event",
    "HookinboxError",
    "Inbox",
    "JobContext",
    "NotFound",
    "OperationRefused",
    "PayloadInvalid",
    "StoreUnavailable",
    "SyncJobContext",
    "load_config",
]
