"""``hookinbox serve --processes N``: several receivers on one port, one journal."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest

from hookinbox.store import open_store_for
from tests.support.configs import write_config
from tests.support.processes import HookinboxProcess, free_port, hookinbox_env
from tests.support.signing import SECRET, SECRET_ENV, delivery

ROUTES = [{"events": ["*"], "action": "count", "handler": "tests.support.handlers:count"}]


@pytest.mark.slow
async def test_two_server_processes_accept_an_event_once(db_url: str, tmp_path: Path) -> None:
    port = free_port()
    config = write_config(tmp_path / "c.toml", db_url, routes=ROUTES, port=port)
    server = HookinboxProcess(
        ["serve", "--config", str(config), "--processes", "2"],
        hookinbox_env({SECRET_ENV: SECRET}),
        tmp_path / "serve.log",
    ).start()
    url = f"http://127.0.0.1:{port}/webhooks/test"
    try:
        server.wait_healthy(f"http://127.0.0.1:{port}", timeout=30)
        body, headers = delivery("evt_many_processes")
        distinct = [delivery(f"evt_distinct_{n}") for n in range(20)]
        limits = httpx.Limits(max_connections=40, max_keepalive_connections=0)
        async with httpx.AsyncClient(timeout=20, limits=limits) as client:
            same = await asyncio.gather(
                *(client.post(url, content=body, headers=headers) for _ in range(30))
            )
            others = await asyncio.gather(
                *(client.post(url, content=b, headers=h) for b, h in distinct)
            )
    finally:
        server.stop()
    assert [a.json()["status"] for a in same].count("accepted") == 1
    assert {a.json()["status"] for a in others} == {"accepted"}
    store = open_store_for(db_url)
    await store.open()
    try:
        counts = await store.count_rows()
        found = await store.journal.get_delivery("evt_many_processes")
    finally:
        await store.close()
    assert counts["deliveries"] == 21
    assert found is not None and found.delivery_count == 30
