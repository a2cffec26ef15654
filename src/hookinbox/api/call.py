"""One API request as its handler sees it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hookinbox import ops
from hookinbox.api.tokens import ApiToken
from hookinbox.config import Config
from hookinbox.receive.receiver import Receiver
from hookinbox.store import Store


@dataclass(frozen=True, slots=True)
class Call:
    """One request as a handler sees it: validated query and body, the path's
    parameters (checked for length and control characters) and who is calling."""

    store: Store
    config: Config
    views: ops.OperatorViews
    #: The inbox's receiver: a rejected delivery is retried through the normal path.
    receiver: Receiver
    token: ApiToken
    path: Mapping[str, str]
    query: Any
    body: Any

    @property
    def actor(self) -> str:
        return f"api:{self.token.name}"
