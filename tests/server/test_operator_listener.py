"""``[server] admin_port``: the webhook port answers deliveries and health checks only, the
operator port answers /metrics and /admin (and not deliveries), in one process and in
several."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from hookinbox.config import config_from_mapping
from hookinbox.errors import ConfigError
from tests.server.support import write_config
from tests.support.processes import HookinboxProcess, free_port, hookinbox_env
from tests.support.signing import SECRET, SECRET_ENV, delivery


@pytest.mark.slow
@pytest.mark.parametrize("processes", [1, 2])
async def test_operators_and_providers_each_have_their_own_port(
    tmp_path: Path, processes: int
) -> None:
    port, admin_port = free_port(), free_port()
    config = write_config(
        tmp_path / "c.toml",
        f"sqlite:///{tmp_path}/h.db",
        port,
        server=f"admin_port = {admin_port}\n",
    )
    config.write_text(
        config.read_text()
        + '[[sources.test.routes]]\nevents = ["*"]\naction = "noop"\n'
        + 'handler = "hookinbox.examples:noop"\n'
    )
    server = HookinboxProcess(
        ["serve", "--config", str(config), "--no-workers", "--processes", str(processes)],
        hookinbox_env({SECRET_ENV: SECRET, "HOOKINBOX_ADMIN_TOKEN": "t" * 32}),
        tmp_path / "serve.log",
    ).start()
    public, operator = f"http://127.0.0.1:{port}", f"http://127.0.0.1:{admin_port}"
    try:
        server.wait_healthy(public, timeout=30)
        async with httpx.AsyncClient(timeout=10) as client:
            body, headers = delivery("evt_port")
            accepted = await client.post(f"{public}/webhooks/test", content=body, headers=headers)
            on_operator = await client.post(
                f"{operator}/webhooks/test", content=body, headers=headers
            )
            public_metrics = await client.get(f"{public}/metrics")
            public_admin = await client.get(f"{public}/admin/login")
            metrics = await client.get(f"{operator}/metrics")
            admin = await client.get(f"{operator}/admin/login")
            health = [await client.get(f"{base}/healthz") for base in (public, operator)]
    finally:
        server.stop()
    assert accepted.status_code == 200 and accepted.json()["status"] == "accepted"
    assert (on_operator.status_code, on_operator.json()) == (404, {"error": "not_found"})
    assert public_metrics.status_code == 404 and public_admin.status_code == 404
    assert metrics.status_code == 200 and "hookinbox_deliveries_total" in metrics.text
    assert admin.status_code == 200
    assert [h.status_code for h in health] == [200, 200]


def test_the_operator_port_must_differ_from_the_webhook_port() -> None:
    with pytest.raises(ConfigError, match=r"^server: admin_port must differ from port"):
        config_from_mapping({"server": {"port": 8080, "admin_port": 8080}})
