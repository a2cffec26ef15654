"""Outbound HTTP: one POST to an internal service, every failure a short code.

Forwards (a route's ``forward``) and outbox sends (``[outbox] forward``) both go through
:func:`post`, so a target that times out, refuses, does not resolve or answers non-2xx
fails the attempt the same way everywhere: :class:`~hookinbox.errors.ActionError` with
``timeout``, ``connect_error``, ``dns_error``, ``http_error`` or ``http_<status>``, which
the worker or the relay retries with backoff. The code never carries the answer's body.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx

from hookinbox.codes import JobCode, http_status_code
from hookinbox.errors import ActionError


async def post(
    client: httpx.AsyncClient,
    url: str,
    *,
    headers: Mapping[str, str],
    timeout: float,
    content: bytes | None = None,
    json: Any = None,
) -> httpx.Response:
    """POST and return the 2xx answer; raise ActionError with the failure's code."""
    try:
        response = await client.post(
            url, content=content, json=json, headers=dict(headers), timeout=timeout
        )
    except httpx.TimeoutException:
        raise ActionError(JobCode.TIMEOUT) from None
    except httpx.ConnectError as exc:
        dns = "name" in str(exc).lower()
        raise ActionError(JobCode.DNS_ERROR if dns else JobCode.CONNECT_ERROR) from None
    except httpx.HTTPError as exc:
        raise ActionError(JobCode.HTTP_ERROR, type(exc).__name__) from None
    if not 200 <= response.status_code < 300:
        raise ActionError(http_status_code(response.status_code))
    return response
