"""The webhook path with or without a trailing slash is one endpoint of ``hookinbox
serve``: no redirect (a provider does not follow one on POST, and behind a TLS proxy the
redirect's absolute URL says http)."""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.server.support import serving_sqlite
from tests.support.signing import delivery


def test_a_trailing_slash_reaches_the_same_endpoint_without_a_redirect(tmp_path: Path) -> None:
    server, port = serving_sqlite(tmp_path)
    base = f"http://127.0.0.1:{port}"
    try:
        server.wait_healthy(base)
        body, headers = delivery("evt_slash")
        with httpx.Client(timeout=10, follow_redirects=False) as client:
            slashed = client.post(f"{base}/webhooks/test/", content=body, headers=headers)
            again = client.post(f"{base}/webhooks/test", content=body, headers=headers)
            unknown = client.post(f"{base}/webhooks/nosuch/", content=body, headers=headers)
    finally:
        server.stop()
    assert slashed.status_code == 200, (slashed.status_code, slashed.headers)
    assert "location" not in slashed.headers
    assert slashed.json()["status"] == "accepted"
    assert again.json()["status"] == "duplicate"
    # An unknown source is the endpoint's own answer too, not a redirect.
    assert unknown.status_code == 404 and "location" not in unknown.headers
