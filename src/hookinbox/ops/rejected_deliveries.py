"""Rejected deliveries as operators see them: a keyset page of what is kept, with totals.

A rejected delivery is a refusal for a signature or a timestamp, kept for a while
(``[rejected]``) so that, after a secret is fixed, ``hookinbox rejected retry`` can check
it again through the normal path (:mod:`hookinbox.receive.rejected_retry`). Pages show
ids, codes, sizes, times and header names; never a body or a header's value.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hookinbox.ops.search import REJECTED_CURSOR, page_cursor
from hookinbox.store import RejectedDelivery, Store


@dataclass(frozen=True, slots=True)
class RejectedPage:
    rejected: list[RejectedDelivery]
    #: Per source and reason: rows kept, refusals seen, bytes kept.
    totals: list[dict[str, Any]]

    def as_json(self) -> dict[str, Any]:
        return {"rejected": [r.as_json() for r in self.rejected], "totals": self.totals}


async def rejected_page(
    store: Store,
    *,
    source: str | None = None,
    include_settled: bool = False,
    before: str | None = None,
    limit: int = 50,
) -> RejectedPage:
    """Kept rejected deliveries, newest first; without ``include_settled`` only those a
    retry has not accepted yet."""
    found = await store.rejected.list_rejected(
        source=source,
        include_settled=include_settled,
        before=page_cursor(before, REJECTED_CURSOR, "a rejected delivery id (rej_...)"),
        limit=limit,
    )
    return RejectedPage(found, await store.rejected.rejected_totals())
