"""Encryption at rest, through the real receiver, workers, admin, API and CLI, on both
stores: a body's canary is nowhere in the database's files (SQLite's WAL, PostgreSQL's
relation files and WAL segments) nor the logs; the handler, the forward, replay, the
admin's payload view and a payload search see the plaintext; a sealed body moved to
another row, or a key missing from the ring, is ``key_unavailable`` and never garbage."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import os
import sys
import uuid
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
import structlog

from hookinbox import ops
from hookinbox.config import Config
from hookinbox.errors import KeyUnavailable
from hookinbox.ops.search import DeliveryQuery
from hookinbox.sealing import MAGIC, Sealer, key_id_of
from hookinbox.store import open_store_for
from tests.admin.support import TOKEN, login
from tests.support import handlers
from tests.support.configs import write_config
from tests.support.database import raw_payload_body
from tests.support.inbox import make_config, running_inbox
from tests.support.processes import hookinbox_env, run_hookinbox
from tests.support.signing import WRONG_SECRET, delivery
from tests.support.target import RecordingTarget
from tests.support.waiting import wait_for, wait_for_status

RING_ENV = "HOOKINBOX_ENCRYPTION_KEYS"
KEY1 = base64.b64encode(b"1" * 32).decode()
KEY2 = base64.b64encode(b"2" * 32).decode()
API_TOKEN = "reader-token-0123456789abcdef-0123456789"


def _config(db_url: str, *, forward: str | None, encrypted: bool = True, **more: Any) -> Config:
    routes: list[dict[str, Any]] = [
        {"events": ["*"], "action": "record", "handler": "tests.support.handlers:record"}
    ]
    if forward is not None:
        routes.append(
            {"events": ["*"], "action": "relay", "forward": forward, "forward_timeout_seconds": 2}
        )
    return make_config(
        db_url,
        routes=routes,
        encryption={"enabled": encrypted},
        worker={"max_attempts": 3, "backoff_base_seconds": 0.1},
        **more,
    )


async def _files_and_columns(db_url: str) -> dict[str, bytes]:
    """What someone with the database's files reads: SQLite's file and WAL; PostgreSQL's
    sealed columns as stored and as text, the tables' relation files after a checkpoint,
    and the two newest WAL segments."""
    if db_url.startswith("sqlite"):
        path = Path(db_url.removeprefix("sqlite:///"))
        return {
            name: file.read_bytes()
            for name, file in (("file", path), ("wal", Path(f"{path}-wal")))
            if file.exists()
        }
    base, _, query = db_url.partition("?")
    schema = query.removeprefix("search_path=")
    places: dict[str, bytes] = {}
    conn = await asyncpg.connect(base)
    try:
        for table, column in (
            ("payloads", "body"),
            ("rejected_deliveries", "body"),
            ("attempts", "response_snippet"),
        ):
            values = await conn.fetch(f"SELECT {column} FROM {schema}.{table}")
            places[f"{table} column"] = b"".join(
                v[0] if isinstance(v[0], bytes) else str(v[0]).encode() for v in values
            )
            rows = await conn.fetch(f"SELECT t::text FROM {schema}.{table} t")
            places[f"{table} as text"] = "".join(r[0] for r in rows).encode()
        await conn.execute("CHECKPOINT")
        for table in ("payloads", "rejected_deliveries", "attempts"):
            # A partitioned table (payloads on PostgreSQL) has no file: its partitions do.
            leaves = await conn.fetch(
                "SELECT pg_relation_filepath(relid) AS path FROM pg_partition_tree($1::regclass)"
                " WHERE isleaf",
                f"{schema}.{table}",
            )
            paths = [leaf["path"] for leaf in leaves] or [
                await conn.fetchval("SELECT pg_relation_filepath($1)", f"{schema}.{table}")
            ]
            contents = [
                await conn.fetchval("SELECT pg_read_binary_file($1)", path) for path in paths
            ]
            places[f"{table} file"] = b"".join(contents)
        segments = await conn.fetch(
            "SELECT name FROM pg_ls_waldir() WHERE name ~ '^[0-9A-F]{24}$'"
            " ORDER BY modification DESC LIMIT 2"
        )
        for segment in segments:
            places[f"wal {segment['name']}"] = await conn.fetchval(
                "SELECT pg_read_binary_file($1)", f"pg_wal/{segment['name']}"
            )
    finally:
        await conn.close()
    return places


@pytest.mark.parametrize("encrypted", [True, False], ids=["sealed", "plaintext"])
async def test_a_canary_in_a_body_a_refusal_and_an_answer_is_nowhere_at_rest_when_sealed(
    db_url: str,
    client: httpx.AsyncClient,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    encrypted: bool,
) -> None:
    monkeypatch.setenv(RING_ENV, f"k1:{KEY1}")
    canary = f"CANARY{uuid.uuid4().hex}"
    body, headers = delivery("evt_canary", note=canary)
    forged, forged_headers = delivery("evt_forged", secret=WRONG_SECRET, note=canary)
    answer = json.dumps({"id": "internal-1", "echo": canary}).encode()
    with (
        RecordingTarget(statuses=[(200, {}, answer)]) as target,
        structlog.testing.capture_logs() as lines,
        caplog.at_level(logging.DEBUG),
    ):
        config = _config(db_url, forward=target.url, encrypted=encrypted)
        async with running_inbox(config) as inbox:
            accepted = await client.post(inbox.url(), content=body, headers=headers)
            refused = await client.post(inbox.url(), content=forged, headers=forged_headers)
            assert (accepted.status_code, refused.status_code) == (200, 400)
            await wait_for_status(inbox.store, "evt_canary", "completed")
            await inbox.inbox.receiver.rejected.drain()
            (kept,) = await inbox.store.rejected.rejected_totals()
            assert kept["rows"] == 1
            found = await inbox.store.journal.get_delivery("evt_canary")
            assert found is not None
            attempts = await inbox.store.queue.list_attempts(f"{found.id}:relay")
            running = await _files_and_columns(db_url)
        stopped = await _files_and_columns(db_url)
    # What the target and the operator see is the plaintext, sealed or not.
    assert target.requests[0]["body"] == body
    assert handlers.PAYLOADS["evt_canary"]["data"]["note"] == canary
    assert attempts[0].response_snippet is not None and canary in attempts[0].response_snippet
    places = {f"running {k}": v for k, v in running.items()}
    places.update({f"stopped {k}": v for k, v in stopped.items()})
    assert any(places.values())
    holding = sorted(name for name, data in places.items() if canary.encode() in data)
    if encrypted:
        assert holding == []
    else:
        # The same bytes with encryption off: the reading above would have seen it.
        assert holding, "the canary should be readable at rest when nothing is sealed"
        if db_url.startswith("postgresql"):
            assert "stopped payloads file" in holding
            assert "stopped rejected_deliveries file" in holding
            assert "stopped attempts file" in holding
    logged = json.dumps(lines, default=str) + "".join(r.getMessage() for r in caplog.records)
    assert canary not in logged


async def test_handler_forward_replay_admin_and_search_see_the_plaintext_of_a_sealed_row(
    db_url: str, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(RING_ENV, f"k1:{KEY1}")
    monkeypatch.setenv("HOOKINBOX_ADMIN_TOKEN", TOKEN)
    monkeypatch.setenv("HOOKINBOX_API_TOKENS", f"ci:read:{API_TOKEN}")
    body, headers = delivery("evt_sealed", customer="cus_sealed_42")
    other, other_headers = delivery("evt_other", customer="cus_other")
    with RecordingTarget() as target:
        config = _config(db_url, forward=target.url)
        async with running_inbox(config) as inbox:
            for content, sent in ((body, headers), (other, other_headers)):
                assert (await client.post(inbox.url(), content=content, headers=sent)).is_success
            await wait_for_status(inbox.store, "evt_sealed", "completed")
            await wait_for_status(inbox.store, "evt_other", "completed")
            found = await inbox.store.journal.get_delivery("evt_sealed")
            assert found is not None
            # Sealed at rest, opened for whoever reads it.
            raw = await raw_payload_body(db_url, found.id)
            assert raw.startswith(MAGIC) and key_id_of(raw) == "k1"
            assert await inbox.store.journal.read_payload(found.id) == body
            # Replay runs the forward again from the sealed row, byte for byte.
            await ops.replay(
                inbox.store, config, found.id, actor="test", force_effects=True, wait_seconds=10
            )
            assert [r["body"] for r in target.requests].count(body) == 2
            # A payload filter finds the sealed row (opened in Python), and only it.
            page = await ops.search_deliveries(
                inbox.store, config, DeliveryQuery(payload="data.customer = cus_sealed_42")
            )
            assert [d.id for d in page.deliveries] == [found.id] and page.count == 1
            api = await client.get(
                f"{inbox.base_url}/api/v1/deliveries",
                params={"where": "data.customer = cus_sealed_42"},
                headers={"authorization": f"Bearer {API_TOKEN}"},
            )
            assert api.status_code == 200, api.text
            assert [d["delivery_id"] for d in api.json()["deliveries"]] == [found.id]
            # The admin's "show payload" shows the plaintext.
            async with httpx.AsyncClient() as admin:
                await login(admin, inbox.base_url)
                page_html = (await admin.get(f"{inbox.base_url}/admin/deliveries/{found.id}")).text
                csrf = page_html.split('name="csrf" value="', 1)[1].split('"', 1)[0]
                shown = await admin.post(
                    f"{inbox.base_url}/admin/deliveries/{found.id}/payload", data={"csrf": csrf}
                )
                view = await admin.get(inbox.base_url + shown.headers["location"])
                assert "cus_sealed_42" in view.text
    assert handlers.PAYLOADS["evt_sealed"]["data"]["customer"] == "cus_sealed_42"


async def test_a_sealed_body_moved_to_another_row_does_not_open(
    db_url: str, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(RING_ENV, f"k1:{KEY1}")
    config = _config(db_url, forward=None)
    async with running_inbox(config, run_workers=False) as inbox:
        ids = []
        for event_id in ("evt_a", "evt_b"):
            content, sent = delivery(event_id, note=event_id)
            ids.append((await client.post(inbox.url(), content=content, headers=sent)).json())
        first, second = (answer["delivery_id"] for answer in ids)
        store = inbox.store
        # Someone with write access copies row a's sealed body into row b.
        await _copy_body(db_url, first, second)
        assert b"evt_a" in (await store.journal.read_payload(first) or b"")
        with pytest.raises(KeyUnavailable, match="does not open for this row"):
            await store.journal.read_payload(second)


async def _copy_body(db_url: str, source: str, target: str) -> None:
    if db_url.startswith("sqlite"):
        import sqlite3

        with sqlite3.connect(db_url.removeprefix("sqlite:///")) as conn:
            conn.execute(
                "UPDATE payloads SET body = (SELECT body FROM payloads WHERE delivery_id = ?)"
                " WHERE delivery_id = ?",
                (source, target),
            )
        return
    base, _, query = db_url.partition("?")
    schema = query.removeprefix("search_path=")
    conn = await asyncpg.connect(base)
    try:
        await conn.execute(
            f"UPDATE {schema}.payloads SET body = (SELECT body FROM {schema}.payloads"
            " WHERE delivery_id = $1) WHERE delivery_id = $2",
            source,
            target,
        )
    finally:
        await conn.close()


async def test_a_missing_key_is_key_unavailable_never_a_garbled_forward(
    db_url: str, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(RING_ENV, f"k1:{KEY1}")
    monkeypatch.setenv("HOOKINBOX_API_TOKENS", f"ci:read:{API_TOKEN}")
    body, headers = delivery("evt_lost_key", customer="cus_lost")
    with RecordingTarget() as target:
        config = _config(db_url, forward=target.url)
        async with running_inbox(config, run_workers=False) as inbox:
            assert (await client.post(inbox.url(), content=body, headers=headers)).is_success
        # The ring loses k1 (a new key k2 only): nothing sealed under k1 opens.
        monkeypatch.setenv(RING_ENV, f"k2:{KEY2}")
        async with running_inbox(config) as inbox:
            found = await inbox.store.journal.get_delivery("evt_lost_key")
            assert found is not None

            async def failed_on_the_key() -> bool:
                job = await inbox.store.queue.get_job(f"{found.id}:relay")
                return job is not None and job.last_error == "key_unavailable"

            await wait_for(failed_on_the_key, 15, "the forward to fail as key_unavailable")
            answer = await client.get(
                f"{inbox.base_url}/api/v1/deliveries/{found.id}",
                headers={"authorization": f"Bearer {API_TOKEN}"},
            )
            assert (answer.status_code, answer.json()) == (503, {"error": "key_unavailable"})
            search = await client.get(
                f"{inbox.base_url}/api/v1/deliveries",
                params={"where": "data.customer = cus_lost"},
                headers={"authorization": f"Bearer {API_TOKEN}"},
            )
            assert search.status_code == 503
    assert target.requests == []  # nothing garbled was ever sent
    assert "evt_lost_key" not in handlers.PAYLOADS
    path = write_config(
        tmp_path / "hookinbox.toml",
        db_url,
        routes=[{"events": ["*"], "action": "relay", "forward": "http://127.0.0.1:9/x"}],
        extra="[encryption]\nenabled = true",
    )
    shown = run_hookinbox(path, "deliveries", "list", "--where", "data.customer = cus_lost")
    assert shown.returncode == 7, shown.stderr
    assert shown.stderr.strip().splitlines() == [
        "hookinbox: key_unavailable: key 'k1' is not in the encryption key ring"
    ]


async def test_keys_rotate_rewraps_to_the_new_key_and_the_old_one_can_go(
    db_url: str, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(RING_ENV, f"k1:{KEY1}")
    answer = b'{"id": "internal-1", "echo": "snippet-sealed"}'
    events = [f"evt_rot_{n}" for n in range(5)]
    with RecordingTarget(statuses=[(200, {}, answer)] * len(events)) as target:
        config = _config(db_url, forward=target.url)
        async with running_inbox(config) as inbox:
            for event_id in events:
                content, sent = delivery(event_id, note=event_id)
                assert (await client.post(inbox.url(), content=content, headers=sent)).is_success
            forged, forged_headers = delivery("evt_rot_forged", secret=WRONG_SECRET)
            await client.post(inbox.url(), content=forged, headers=forged_headers)
            for event_id in events:
                await wait_for_status(inbox.store, event_id, "completed")
            await inbox.inbox.receiver.rejected.drain()
    path = write_config(
        tmp_path / "hookinbox.toml",
        db_url,
        routes=[{"events": ["*"], "action": "relay", "forward": target.url}],
        extra="[encryption]\nenabled = true",
    )
    monkeypatch.setenv(RING_ENV, f"k2:{KEY2},k1:{KEY1}")
    before = run_hookinbox(path, "keys", "status", "--json")
    assert before.returncode == 0, before.stderr
    sealed = {(c["table"], c["key_id"]): c["rows"] for c in json.loads(before.stdout)["sealed"]}
    assert sealed == {
        ("payloads", "k1"): 5,
        ("rejected_deliveries", "k1"): 1,
        ("attempts", "k1"): 5,
    }
    dry = run_hookinbox(path, "keys", "rotate", "--batch", "2", "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    assert [t["rewrapped"] for t in json.loads(dry.stdout)["tables"]] == [5, 1, 5]
    rotated = run_hookinbox(path, "keys", "rotate", "--batch", "2")
    assert rotated.returncode == 0, rotated.stderr
    assert "payloads: 5 sealed, 5 re-wrapped" in rotated.stdout
    assert "attempts: 5 sealed, 5 re-wrapped" in rotated.stdout
    after = run_hookinbox(path, "keys", "status", "--json")
    assert {c["key_id"] for c in json.loads(after.stdout)["sealed"]} == {"k2"}
    # k1 leaves the ring: everything still opens with k2 alone.
    store = open_store_for(db_url, sealer=Sealer([("k2", base64.b64decode(KEY2))]))
    await store.open()
    try:
        for event_id in events:
            found = await store.journal.get_delivery(event_id)
            assert found is not None
            assert f'"note": "{event_id}"'.encode() in (await store.journal.read_payload(found.id))
            (attempt,) = await store.queue.list_attempts(f"{found.id}:relay")
            assert attempt.response_snippet == answer.decode()
        (kept,) = await store.rejected.list_rejected(limit=5)
        again = await store.rejected.get_rejected(kept.id)
        assert again is not None and again.body == forged
    finally:
        await store.close()


def test_a_config_that_seals_without_a_key_ring_is_refused_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_config(
        tmp_path / "hookinbox.toml",
        f"sqlite:///{tmp_path}/h.db",
        routes=[{"events": ["*"], "action": "relay", "forward": "http://127.0.0.1:9/x"}],
        extra="[encryption]\nenabled = true",
    )
    monkeypatch.delenv(RING_ENV, raising=False)
    missing = run_hookinbox(path, "config", "check")
    assert missing.returncode == 2
    assert "HOOKINBOX_ENCRYPTION_KEYS is not set or empty" in missing.stderr
    monkeypatch.setenv(RING_ENV, "k1:" + base64.b64encode(os.urandom(16)).decode())
    short = run_hookinbox(path, "config", "check")
    assert short.returncode == 2 and "must be 32 bytes" in short.stderr
    assert base64.b64encode(b"x").decode() not in short.stderr


async def test_deliveries_keep_being_accepted_while_keys_rotate_runs(
    db_url: str, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(RING_ENV, f"k1:{KEY1}")
    config = _config(db_url, forward=None)
    async with running_inbox(config, run_workers=False) as inbox:
        for n in range(30):
            content, sent = delivery(f"evt_old_{n}", note=str(n))
            assert (await client.post(inbox.url(), content=content, headers=sent)).is_success
    path = write_config(
        tmp_path / "hookinbox.toml",
        db_url,
        routes=[{"events": ["*"], "action": "count", "handler": "tests.support.handlers:count"}],
        extra="[encryption]\nenabled = true",
    )
    monkeypatch.setenv(RING_ENV, f"k2:{KEY2},k1:{KEY1}")
    async with running_inbox(config, run_workers=False) as inbox:
        rotation = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "hookinbox.cli",
            "keys",
            "rotate",
            "--batch",
            "1",
            "--json",
            "--config",
            str(path),
            env=hookinbox_env(),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        answers = []
        n = 0
        while rotation.returncode is None or n < 10:
            content, sent = delivery(f"evt_new_{n}", note=str(n))
            answers.append(
                (await client.post(inbox.url(), content=content, headers=sent)).status_code
            )
            n += 1
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(rotation.wait()), 0.01)
        out, err = await asyncio.wait_for(rotation.communicate(), 60)
        assert rotation.returncode == 0, err.decode()
        assert set(answers) == {200} and len(answers) >= 10
        (payloads,) = [t for t in json.loads(out)["tables"] if t["table"] == "payloads"]
        assert payloads["rewrapped"] == 30
        counts = await inbox.store.sealed_rows.count_by_key()
        assert [(c.table, c.key_id, c.rows) for c in counts] == [("payloads", "k2", 30 + n)]
