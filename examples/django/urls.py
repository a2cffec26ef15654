"""The Django site's own pages: a home page and the shipments the handler recorded."""

from __future__ import annotations

import json
import os

from django.http import HttpRequest, JsonResponse
from django.urls import path


def home(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"site": "django", "webhooks": "/hooks/webhooks/shopify"})


def shipments(request: HttpRequest) -> JsonResponse:
    """What the handler (in the worker process) wrote, one JSON line per shipment."""
    lines = []
    file = os.environ["SHIPMENTS_FILE"]
    if os.path.exists(file):
        with open(file) as fh:
            lines = [json.loads(line) for line in fh if line.strip()]
    return JsonResponse({"shipments": lines})


urlpatterns = [path("", home), path("shipments/", shipments)]
