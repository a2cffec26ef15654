"""Who is acting: recorded with every operator change (the audit and each attempt's trigger)."""

from __future__ import annotations

import getpass
import os


def default_actor(surface: str = "cli") -> str:
    """``cli:alice``: the surface and the OS user (``HOOKINBOX_ACTOR`` overrides), so the
    audit says who ran a replay or a retry without any login machinery."""
    override = os.environ.get("HOOKINBOX_ACTOR")
    if override:
        return override[:100]
    try:
        user = getpass.getuser()
    except (OSError, KeyError):
        user = "unknown"
    return f"{surface}:{user}"[:100]
