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

from hookinbox.app import Inbox
from hookinbox.config import Config, load_config
from hookinbox.errors import (
    ActionError,
    ConfigError,
    HookinboxError,
    NotFound,
    OperationRefused,
    StoreUnavailable,
)
from hookinbox.version import __version__ as __version__
from hookinbox.work.actions import Event
from hookinbox.work.effects import JobContext, SyncJobContext
from hookinbox.work.handlers import PayloadInvalid

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
