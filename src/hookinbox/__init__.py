"""hookinbox: receive webhooks once, process them exactly once.

The public surface: :class:`Inbox` (the ASGI app with its store and workers),
:func:`load_config`, the handler's :class:`Event` and :class:`JobContext`, and the error
root :class:`HookinboxError`.
"""

from hookinbox.actions import Event
from hookinbox.app import Inbox
from hookinbox.config import Config, load_config
from hookinbox.effects import JobContext
from hookinbox.errors import HookinboxError

__all__ = ["Config", "Event", "HookinboxError", "Inbox", "JobContext", "load_config"]
