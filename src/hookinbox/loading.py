"""Importing the user's code named in the config (``package.module:function``).

Resolved at start-up, so a typo in ``handler = "…"`` fails before anything is accepted.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from hookinbox.errors import ConfigError


def load_callable(path: str, where: str) -> Callable[..., Any]:
    """The callable at ``path``; a ConfigError naming the key ``where`` otherwise."""
    module_name, _, attr = path.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"{where}: cannot import module {module_name!r} ({exc})") from None
    fn = getattr(module, attr, None)
    if not callable(fn):
        raise ConfigError(f"{where}: {module_name!r} has no callable {attr!r}")
    return fn  # type: ignore[no-any-return]
