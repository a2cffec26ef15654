"""The overview's last-hour counts come from the store, on both stores: what one
``hookinbox serve`` answered shows on another process's overview, and after a restart,
duplicates and refusals included (a refusal the Rejected page lists is counted too)."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest

from hookinbox.store import open_store_for
from tests.admin.support import TOKEN, login
from tests.support.configs import write_config
from tests.support.processes import HookinboxProcess, free_port, hookinbox_env
from tests.support.signing import SECRET, SECRET_ENV, WRONG_SECRET, delivery
from tests.support.waiting import wait_for

pytestmark = pytest.mark.slow

NOOP = {"events": ["*"], "action": "noop", "handler": "hookinbox.examples:noop"}


def _serve(tmp_path: Path, config: Path, name: str) -> tuple[HookinboxProcess, str]:
    """A ``hookinbox serve`` started (not yet healthy: start several, then wait)."""
    port = free_port()
    server = HookinboxProcess(
        ["serve", "--config", str(config), "--port", str(port)],
        hookinbox_env({SECRET_ENV: SECRET, "HOOKINBOX_ADMIN_TOKEN": TOKEN}),
        tmp_path / f"{name}.log",
    ).start()
    return server, f"http://127.0.0.1:{port}"


async def _counts(base: str) -> dict[str, int]:
    """The overview's row of source ``test``: its last-hour cells by class."""
    async with httpx.AsyncClient(timeout=10) as client:
        await login(client, base)
        page = (await client.get(f"{base}/admin/")).text
    row = re.search(r'<tr data-source="test">(.*?)</tr>', page, re.S)
    assert row is not None, page[-2000:]
    cells = dict(re.findall(r'<td class="(accepted|duplicate|rejected)"[^>]*>(.*?)</td>', row[1]))
    return {k: int(re.sub(r"<[^>]+>", "", v)) for k, v in cells.items()}


async def test_last_hour_counts_hold_across_processes_and_a_restart(
    db_url: str, tmp_path: Path
) -> None:
    store = open_store_for(db_url)  # the schema, whatever serve's policy for a new store
    await store.open()
    await store.close()
    config = write_config(tmp_path / "c.toml", db_url, routes=[NOOP], port=free_port())
    first, first_base = _serve(tmp_path, config, "first")
    other, other_base = _serve(tmp_path, config, "other")
    try:
        first.wait_healthy(first_base, timeout=30)
        other.wait_healthy(other_base, timeout=30)
        async with httpx.AsyncClient(timeout=10) as client:
            for n in range(3):
                body, headers = delivery(f"evt_{n}")
                for _ in range(1 + n):  # 3 accepted, 0 + 1 + 2 duplicates
                    await client.post(f"{first_base}/webhooks/test", content=body, headers=headers)
            body, headers = delivery("evt_forged", secret=WRONG_SECRET)
            refused = await client.post(
                f"{first_base}/webhooks/test", content=body, headers=headers
            )
            assert refused.status_code == 400
        expected = {"accepted": 3, "duplicate": 3, "rejected": 1}
        assert await _counts(first_base) == expected

        # Another process on the same store sees them (within the first's flush interval).
        async def other_sees_them() -> bool:
            return await _counts(other_base) == expected

        await wait_for(other_sees_them, 10, "the other process's overview")
    finally:
        first.stop()
        other.stop()
    # A restart forgets nothing of the last hour.
    again, again_base = _serve(tmp_path, config, "again")
    try:
        again.wait_healthy(again_base, timeout=30)
        assert await _counts(again_base) == expected
    finally:
        again.stop()
