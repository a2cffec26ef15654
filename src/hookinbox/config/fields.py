"""Field types and parsers more than one config model uses, each checked the same way."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)?\s*$")
_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}


def parse_duration(value: str | float | int) -> float:
    """Seconds from ``90``, ``"90s"``, ``"15m"``, ``"72h"`` or ``"30d"``."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        if value < 0:
            raise ValueError("a duration cannot be negative")
        return float(value)
    match = _DURATION.match(str(value))
    if not match:
        raise ValueError(f"not a duration: {value!r} (use e.g. 90s, 15m, 72h, 30d)")
    return float(match.group(1)) * _DURATION_UNITS[match.group(2) or "s"]


class Frozen(BaseModel):
    """Every config table: immutable once validated, and an unknown key is an error."""

    model_config = ConfigDict(frozen=True, extra="forbid")


def _handler_path(value: str) -> str:
    if not re.match(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$", value):
        raise ValueError("handler must look like 'package.module:function'")
    return value


def _forward_url(value: str) -> str:
    if not re.match(r"^https?://[^\s/]+", value):
        raise ValueError("forward must be an http:// or https:// URL")
    return value


#: ``package.module:function``, imported at start-up.
HandlerPath = Annotated[str, AfterValidator(_handler_path)]
#: An internal http(s) URL that gets a POST.
ForwardUrl = Annotated[str, AfterValidator(_forward_url)]
