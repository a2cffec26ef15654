"""``GET /metrics``: the Prometheus text format, with the store gauges read at most once
per their interval however often it is scraped."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import Response

from hookinbox.metrics import CONTENT_TYPE_LATEST, Metrics, StoreGauges
from hookinbox.store import Store


def metrics_endpoint(
    metrics: Metrics, gauges: StoreGauges, store: Store
) -> Callable[[Request], Awaitable[Response]]:
    async def serve_metrics(request: Request) -> Response:
        await gauges.refresh(store)
        return Response(metrics.exposition([gauges]), media_type=CONTENT_TYPE_LATEST)

    return serve_metrics
