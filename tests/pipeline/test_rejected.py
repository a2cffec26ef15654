"""Rejected deliveries kept and retried, through the real receiver, on both stores: a bad
secret rotation loses nothing; a still-invalid one stays refused; a flood of forgeries
writes a bounded number of rows; credentials are never kept."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from hookinbox.app import build_receiver
from hookinbox.receive.rejected_retry import retry_rejected_many
from tests.support import handlers
from tests.support.configs import write_config
from tests.support.inbox import make_config, running_inbox
from tests.support.processes import REPO, hookinbox_env
from tests.support.signing import OLD_SECRET, SECRET, SECRET_ENV, WRONG_SECRET, delivery
from tests.support.waiting import wait_for_status

COUNT = [{"events": ["*"], "action": "count", "handler": "tests.support.handlers:count"}]


async def test_a_bad_rotation_loses_nothing_once_the_secret_is_fixed(
    db_url: str, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The provider already signs with a secret hookinbox was not given yet.
    body, headers = delivery("evt_rot_1", secret=WRONG_SECRET)
    sent = {
        **headers,
        "authorization": "Bearer leaked",
        "cookie": "s=1",
        "x-forwarded-for": "1.2.3.4",
    }
    config = make_config(db_url, routes=COUNT)
    async with running_inbox(config) as inbox:
        refused = await client.post(inbox.url(), content=body, headers=sent)
        again = await client.post(inbox.url(), content=body, headers=sent)
        assert refused.json() == again.json() == {"error": "invalid_signature"}
        await inbox.inbox.receiver.rejected.drain()
        (kept,) = await inbox.store.rejected.list_rejected()
        assert (kept.source, kept.reason, kept.seen, kept.body_kept) == (
            "test",
            "invalid_signature",
            2,
            True,
        )
        assert set(kept.headers) == {
            "webhook-id",
            "webhook-timestamp",
            "webhook-signature",
            "content-type",
        }

        # Still the old secret: the retry is refused again and the row stays.
        (still,) = await retry_rejected_many(
            build_receiver(config, inbox.store), inbox.store, ids=[kept.id], actor="test"
        )
        assert (still.outcome, still.delivery_id) == ("invalid_signature", None)
        assert [r.id for r in await inbox.store.rejected.list_rejected()] == [kept.id]

        # The fix: the new secret next to the old one. Checked as of its receipt, so the
        # signed timestamp of then is within the tolerance, minutes later.
        monkeypatch.setenv(SECRET_ENV, f"{SECRET} {WRONG_SECRET}")
        (fixed,) = await retry_rejected_many(
            build_receiver(config, inbox.store), inbox.store, ids=[kept.id], actor="test"
        )
        assert fixed.outcome == "accepted" and fixed.delivery_id is not None
        await wait_for_status(inbox.store, "evt_rot_1", "completed")
        assert await inbox.store.rejected.list_rejected() == []
        (settled,) = await inbox.store.rejected.list_rejected(include_settled=True)
        assert (settled.retry_outcome, settled.retry_delivery_id) == ("accepted", fixed.delivery_id)
        audit = await inbox.store.audit.list_operator_actions(delivery_id=fixed.delivery_id)
        assert [a.command for a in audit] == ["rejected-retry"]
    assert handlers.CALLS["evt_rot_1"] == 1


async def test_a_timestamp_stale_on_arrival_stays_refused(
    db_url: str, client: httpx.AsyncClient
) -> None:
    body, headers = delivery("evt_stale_1", timestamp=time.time() - 3600)
    config = make_config(db_url, routes=COUNT)
    async with running_inbox(config) as inbox:
        answer = await client.post(inbox.url(), content=body, headers=headers)
        assert answer.json() == {"error": "timestamp_out_of_tolerance"}
        await inbox.inbox.receiver.rejected.drain()
        (kept,) = await inbox.store.rejected.list_rejected()
        (result,) = await retry_rejected_many(
            build_receiver(config, inbox.store), inbox.store, ids=[kept.id], actor="test"
        )
        assert result.outcome == "timestamp_out_of_tolerance"
        assert (await inbox.store.count_rows())["deliveries"] == 0


async def test_a_flood_of_forgeries_writes_a_bounded_number_of_rows(
    db_url: str, client: httpx.AsyncClient
) -> None:
    config = make_config(
        db_url,
        routes=COUNT,
        rejected={"per_minute": 5, "max_rows_per_source": 3, "max_body_bytes": 64},
    )
    async with running_inbox(config) as inbox:
        started = time.monotonic()
        for n in range(60):
            body, headers = delivery(
                f"evt_forged_{n}", secret=WRONG_SECRET, pad="x" * (n % 2) * 100
            )
            answer = await client.post(inbox.url(), content=body, headers=headers)
            assert answer.status_code == 400
        # The bucket refills 5 a minute: one more token per 12 s the flood took.
        refilled = int((time.monotonic() - started) / 12)
        await inbox.inbox.receiver.rejected.drain()
        kept = await inbox.store.rejected.list_rejected()
        assert len(kept) == 3
        exposition = inbox.inbox.metrics.exposition().decode()
    counted = {
        line.split("kept=")[1].split('"')[1]: float(line.rsplit(" ", 1)[1])
        for line in exposition.splitlines()
        if line.startswith("hookinbox_rejected_deliveries_total{")
    }
    written = counted.get("kept", 0) + counted.get("kept_without_body", 0)
    assert 5 <= written <= 5 + refilled
    assert counted["rate_limited"] == 60 - written
    assert counted["kept_without_body"] >= 2  # the padded bodies are over 64 bytes


def test_the_cli_lists_and_retries(db_url: str, tmp_path: Path) -> None:
    import asyncio

    config_path = write_config(tmp_path / "h.toml", db_url, routes=COUNT)

    async def refuse_one() -> None:
        config = make_config(db_url, routes=COUNT)
        async with running_inbox(config, run_workers=False) as inbox, httpx.AsyncClient() as c:
            body, headers = delivery("evt_cli_rej", secret=OLD_SECRET)
            assert (await c.post(inbox.url(), content=body, headers=headers)).status_code == 400
            await inbox.inbox.receiver.rejected.drain()

    asyncio.run(refuse_one())

    def cli(*args: str, secret: str = SECRET) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [
                sys.executable,
                "-m",
                "hookinbox.cli",
                "rejected",
                *args,
                "--config",
                str(config_path),
            ],
            env=hookinbox_env({SECRET_ENV: secret, "HOOKINBOX_ACTOR": "cli:tester"}),
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=90,
            stdin=subprocess.DEVNULL,
        )

    listed = cli("list", "--json")
    assert listed.returncode == 0, listed.stderr
    (row,) = json.loads(listed.stdout)["rejected"]
    assert row["reason"] == "invalid_signature" and "webhook-signature" in row["header_names"]
    still = cli("retry", row["id"])
    assert still.returncode == 1 and "invalid_signature" in still.stdout
    fixed = cli("retry", "--all", "--limit", "10", "--json", secret=f"{SECRET} {OLD_SECRET}")
    assert fixed.returncode == 0, fixed.stderr
    (result,) = json.loads(fixed.stdout)
    assert result["outcome"] == "accepted"
    assert json.loads(cli("list", "--json").stdout)["rejected"] == []
    bad = cli("retry")
    assert bad.returncode == 2 and "invalid_argument" in bad.stderr
