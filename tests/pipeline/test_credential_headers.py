"""A header that is a credential for one source is a credential for all of them: a real
``hookinbox serve`` stores it with no delivery, keeps it with no rejected delivery and
forwards it to no target, whichever source receives it (both stores)."""

from __future__ import annotations

import contextlib
import sqlite3
import subprocess
import sys
import uuid
from pathlib import Path

import asyncpg
import httpx
import pytest

from tests.support.processes import (
    REPO,
    HookinboxProcess,
    free_port,
    hookinbox_env,
    wait_until,
)
from tests.support.signing import SECRET, SECRET_ENV, delivery
from tests.support.target import RecordingTarget
from tests.support.waiting import wait_for

KEY_ENV = "HB_TEST_KEYED_KEY"


def _config(path: Path, db_url: str, port: int, target: str) -> Path:
    path.write_text(
        f'database = "{db_url}"\n'
        f'[server]\nhost = "127.0.0.1"\nport = {port}\n'
        "[worker]\npoll_interval_seconds = 0.2\n"
        # An api-key source whose key header falls under a prefix deliveries keep.
        f'[sources.keyed]\nscheme = "api-key"\nsecret_env = "{KEY_ENV}"\n'
        '[sources.keyed.credentials]\nheader = "webhook-key"\nid_pointer = "/id"\n'
        f'[sources.test]\nscheme = "standard-webhooks"\nsecret_env = "{SECRET_ENV}"\n'
        f'[[sources.test.routes]]\nevents = ["*"]\naction = "forward"\nforward = "{target}"\n'
    )
    return path


async def _stored_rows(db_url: str) -> dict[str, list[str]]:
    """Every row of the payloads and the rejected deliveries, whole, as text."""
    tables = ("payloads", "rejected_deliveries")
    if db_url.startswith("sqlite"):
        with contextlib.closing(sqlite3.connect(db_url.removeprefix("sqlite:///"))) as conn:
            return {t: [repr(row) for row in conn.execute(f"SELECT * FROM {t}")] for t in tables}
    conn = await asyncpg.connect(db_url)  # ?search_path= selects the test's schema
    try:
        return {t: [r[0] for r in await conn.fetch(f"SELECT t::text FROM {t} t")] for t in tables}
    finally:
        await conn.close()


@pytest.mark.slow
async def test_another_sources_credential_header_is_never_stored_kept_or_forwarded(
    db_url: str, tmp_path: Path
) -> None:
    canary = f"CANARY-{uuid.uuid4().hex}"
    port = free_port()
    with RecordingTarget() as target:
        config = _config(tmp_path / "c.toml", db_url, port, target.url)
        server = HookinboxProcess(
            ["serve", "--config", str(config)],
            hookinbox_env({SECRET_ENV: SECRET, KEY_ENV: "k" * 32}),
            tmp_path / "serve.log",
        ).start()
        base = f"http://127.0.0.1:{port}"
        try:
            server.wait_healthy(base, timeout=30)
            extra = {"webhook-key": canary, "x-api-key": canary}
            async with httpx.AsyncClient(timeout=10) as client:
                body, headers = delivery("evt_cred")
                accepted = await client.post(
                    f"{base}/webhooks/test", content=body, headers={**headers, **extra}
                )
                forged, forged_headers = delivery("evt_forged")
                refused = await client.post(
                    f"{base}/webhooks/test",
                    content=forged.replace(b"evt_forged", b"evt_forgeD"),
                    headers={**forged_headers, **extra},
                )
            wait_until(lambda: len(target.requests) >= 1, 20, "the forward")

            async def both_written() -> bool:
                # The rejected copy is written after the 400, in the background.
                rows = await _stored_rows(db_url)
                return bool(rows["payloads"] and rows["rejected_deliveries"])

            await wait_for(both_written, 10, "the payload and the rejected delivery")
            rows = await _stored_rows(db_url)
        finally:
            server.stop()
    assert accepted.status_code == 200 and accepted.json()["status"] == "accepted"
    assert (refused.status_code, refused.json()) == (400, {"error": "invalid_signature"})
    # The rows hold the provider's headers (so they were searched), never the canary.
    for table, texts in rows.items():
        assert any("webhook-id" in text for text in texts), table
        assert not any(canary in text for text in texts), table
    (forwarded,) = target.requests
    assert forwarded["headers"]["webhook-id"] == "evt_cred"
    assert canary not in repr(forwarded)


def test_a_source_signing_with_another_sources_key_header_stops_serve(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text(
        f'database = "sqlite:///{tmp_path}/h.db"\n[server]\nport = {free_port()}\n'
        f'[sources.keyed]\nscheme = "api-key"\nsecret_env = "{KEY_ENV}"\n'
        '[sources.keyed.credentials]\nheader = "x-partner-key"\nid_pointer = "/id"\n'
        f'[sources.signed]\nscheme = "hmac"\nsecret_env = "{SECRET_ENV}"\n'
        '[sources.signed.hmac]\nheader = "x-partner-key"\nid_pointer = "/id"\n'
    )
    done = subprocess.run(
        [sys.executable, "-m", "hookinbox.cli", "serve", "--config", str(config)],
        env=hookinbox_env({SECRET_ENV: SECRET, KEY_ENV: "k" * 32}),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=20,
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "hookinbox: config_error: sources.signed.hmac: 'x-partner-key' is a credential header "
        "(of a source or a standard one), never kept or forwarded; the signature needs another"
    ]
