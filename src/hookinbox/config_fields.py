"""Field types more than one config model uses, each checked the same way everywhere."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator


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
