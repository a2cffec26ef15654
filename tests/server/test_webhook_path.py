"""The webhook path with or without a trailing slash is one endpoint of ``hookinbox
serve``: no redirect (a provider does not follow one on POST, and behind a TLS proxy the
redirect's absolute URL says http)."""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.server.test_serve_limits import write_config
from tests.support.processes import HookinboxProcess, free_port, hookinbox_env
from tests.support.signing import SECRET, SECRET_ENV, delivery


def test_a_trailing_slash_reaches_the_same_endpoint_without_a_redirect(tmp_path: Path) -> None:
    port = free_port()
    config = write_config(tmp_path / "c.toml", f"sqlite:///{tmp_path}/h.db", port)
    server = HookinboxProcess(
        ["serve", "--config", str(config), "--no-workers"],
        hookinbox_env({SECRET_ENV: SECRET}),
        tmp_path / "serve.log",
    ).start()
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
