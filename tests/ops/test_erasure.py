"""Erasure by data subject on both stores, through the real surfaces: deliveries received
over HTTP by the real receiver (the subject's keyed hash stored, never the value), then
``hookinbox erase`` as a real process and ``POST /api/v1/erasures`` over HTTP under its
own scope. What must hold: the subject's payloads, answer snippets and kept refusals'
bodies are gone and nothing of the value is left in any row, other subjects keep theirs,
the journal keeps deduplicating (a later redelivery of an erased event is a duplicate),
a dry run changes nothing, and the one audit row holds the hash, not the value."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
import structlog

from hookinbox import ops
from hookinbox.api import parse_tokens
from hookinbox.config import Config
from hookinbox.redaction import keyed_hash
from hookinbox.store import Store, open_store_for
from tests.support.configs import write_config
from tests.support.inbox import make_config, running_inbox
from tests.support.processes import REPO, hookinbox_env
from tests.support.rows import tables_holding
from tests.support.signing import WRONG_SECRET, signed
from tests.support.target import RecordingTarget
from tests.support.waiting import wait_for, wait_for_status

HASH_KEY = "erasure-test-key-0123456789abcdef-0123456789"
ERASER = "eraser-token-0123456789abcdef-0123456789"
OPERATOR = "operator-token-0123456789abcdef-0123456789"
SOURCE = {"subject": "/data/object/customer"}


@pytest.fixture(autouse=True)
def _hash_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOOKINBOX_HASH_KEY", HASH_KEY)


def subject_body(event_id: str, customer: str) -> bytes:
    obj = {"customer": customer, "note": f"call {customer} tomorrow", "amount": 5}
    return json.dumps({"id": event_id, "type": "invoice.paid", "data": {"object": obj}}).encode()


def forward_routes(target: str) -> list[dict[str, Any]]:
    return [{"events": ["*"], "action": "relay", "forward": target}]


def erase_cli(config: Path, *args: str, subject: str) -> subprocess.CompletedProcess[str]:
    """``hookinbox erase --subject - ...`` as a real process, the value on its stdin."""
    return subprocess.run(
        [sys.executable, "-m", "hookinbox.cli", "erase", "--subject", "-", *args],
        env=hookinbox_env({"HOOKINBOX_ACTOR": "cli:dpo", "HOOKINBOX_CONFIG": str(config)}),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=90,
        input=subject + "\n",
    )


async def receive_subjects(
    db_url: str, client: httpx.AsyncClient, target: RecordingTarget, subject: str
) -> None:
    """Two deliveries of ``subject`` and one of another customer, forwarded (the target's
    answer quotes the customer: a snippet holding the value), and a refusal of
    ``subject`` kept for a retry."""
    config = make_config(db_url, routes=forward_routes(target.url), source=SOURCE)
    async with running_inbox(config) as inbox:
        for event_id, customer in (("evt_a", subject), ("evt_b", subject), ("evt_c", "cus_x")):
            body, headers = signed(subject_body(event_id, customer), event_id=event_id)
            answer = await client.post(inbox.url(), content=body, headers=headers)
            assert answer.status_code == 200, answer.text
            await wait_for_status(inbox.store, event_id, "completed")
        forged, headers = signed(subject_body("evt_r", subject), secret=WRONG_SECRET)
        assert (await client.post(inbox.url(), content=forged, headers=headers)).status_code == 400

        async def kept() -> bool:
            return bool(await inbox.store.rejected.list_rejected())

        await wait_for(kept, 10, "the refusal to be kept")


def echoing_target(subject: str) -> RecordingTarget:
    """Answers each forward with a body that names the customer, as some services do."""
    answer = json.dumps({"id": "t1", "customer": subject}).encode()
    return RecordingTarget(statuses=[(200, {}, answer)] * 2)


async def test_erase_through_the_cli_leaves_nothing_of_the_subject_and_deduplication_holds(
    db_url: str, client: httpx.AsyncClient, tmp_path: Path, store: Store
) -> None:
    subject = f"cus_{uuid.uuid4().hex}"
    with echoing_target(subject) as target:
        await receive_subjects(db_url, client, target, subject)
    config_file = write_config(tmp_path / "hookinbox.toml", db_url, routes=[], source=SOURCE)
    assert await tables_holding(db_url, subject), "the search must find the value before"

    dry = erase_cli(config_file, "--dry-run", "--json", subject=subject)
    assert dry.returncode == 0, dry.stderr
    preview = json.loads(dry.stdout)
    assert preview["found"] == {
        "deliveries": 2,
        "payloads": 2,
        "snippets": 2,
        "rejected_bodies": 1,
    }
    assert preview["erased"] == {"payloads": 0, "snippets": 0, "rejected_bodies": 0}
    assert (await store.count_rows())["payloads"] == 3  # the dry run changed nothing
    assert await store.audit.list_operator_actions() == []

    done = erase_cli(config_file, "--json", "--batch", "1", subject=subject)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["erased"] == {"payloads": 2, "snippets": 2, "rejected_bodies": 1}
    assert report["subject_hash"] == keyed_hash(HASH_KEY.encode(), subject)
    assert subject not in done.stdout + done.stderr

    assert await tables_holding(db_url, subject) == []
    a = await store.journal.get_delivery("evt_a")
    c = await store.journal.get_delivery("evt_c")
    assert a is not None and c is not None  # the journal rows stay
    assert await store.journal.read_payload(a.id) is None
    assert await store.journal.read_payload(c.id) is not None  # another customer's stays
    (audit,) = await store.audit.list_operator_actions()
    assert (audit.actor, audit.command) == ("cli:dpo", "erase")
    assert report["subject_hash"] in (audit.detail or "")
    assert subject not in json.dumps(audit.as_json(), default=str)

    # The provider retries an erased event: still a duplicate, and no payload comes back.
    config = make_config(db_url, routes=forward_routes("http://127.0.0.1:9/none"), source=SOURCE)
    async with running_inbox(config, run_workers=False) as inbox:
        body, headers = signed(subject_body("evt_a", subject), event_id="evt_a")
        again = await client.post(inbox.url(), content=body, headers=headers)
        assert again.json() == {"status": "duplicate", "delivery_id": a.id}
        assert await inbox.store.journal.read_payload(a.id) is None

    second = erase_cli(config_file, "--json", subject=subject)
    assert json.loads(second.stdout)["found"]["payloads"] == 0  # nothing left to find


async def test_erase_over_the_api_needs_its_own_scope_and_previews_by_default(
    db_url: str, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch, store: Store
) -> None:
    subject = f"cus_{uuid.uuid4().hex}"
    with echoing_target(subject) as target:
        await receive_subjects(db_url, client, target, subject)
    monkeypatch.setenv("HOOKINBOX_API_TOKENS", f"oncall:read+operate:{OPERATOR} dpo:erase:{ERASER}")
    config = make_config(db_url, routes=forward_routes(target.url), source=SOURCE)
    with structlog.testing.capture_logs() as lines:
        await erase_over_http(client, config, subject, store)
    assert subject not in json.dumps(lines, default=str)
    assert [line["route"] for line in lines if line["event"] == "api_write"] == ["eraseSubject"] * 2
    assert await tables_holding(db_url, subject) == []
    actions = await store.audit.list_operator_actions()
    assert [(a.actor, a.command, a.source) for a in actions] == [("api:dpo", "erase", "test")]
    assert subject not in json.dumps([a.as_json() for a in actions], default=str)


async def erase_over_http(
    client: httpx.AsyncClient, config: Config, subject: str, store: Store
) -> None:
    async with running_inbox(config, run_workers=False) as inbox:
        url = f"{inbox.base_url}/api/v1/erasures"

        async def post(token: str, body: dict[str, Any]) -> httpx.Response:
            return await client.post(url, json=body, headers={"authorization": f"Bearer {token}"})

        forbidden = await post(OPERATOR, {"subject": subject, "dry_run": False})
        assert (forbidden.status_code, forbidden.json()) == (403, {"error": "forbidden"})
        eraser_reads = await client.get(
            f"{inbox.base_url}/api/v1/deliveries", headers={"authorization": f"Bearer {ERASER}"}
        )
        assert eraser_reads.status_code == 403  # erase includes no other scope
        preview = await post(ERASER, {"subject": subject})
        assert preview.status_code == 200
        assert preview.json()["dry_run"] is True
        assert preview.json()["found"]["payloads"] == 2
        assert (await store.count_rows())["payloads"] == 3
        # A source neither configured nor holding the subject: refused, not "erased 0".
        other_source = await post(ERASER, {"subject": subject, "source": "other", "dry_run": False})
        assert (other_source.status_code, other_source.json()) == (
            404,
            {"error": "unknown_source"},
        )
        assert (await store.count_rows())["payloads"] == 3
        erased = await post(ERASER, {"subject": subject, "source": "test", "dry_run": False})
        assert erased.status_code == 200
        assert erased.json()["erased"] == {"payloads": 2, "snippets": 2, "rejected_bodies": 1}
        bad = await post(ERASER, {"subject": ""})
        assert (bad.status_code, bad.json()) == (400, {"error": "invalid_argument"})


async def test_erase_without_the_key_is_one_line_naming_the_variable(
    tmp_path: Path, sqlite_url: str, monkeypatch: pytest.MonkeyPatch, store_sqlite: None
) -> None:
    monkeypatch.delenv("HOOKINBOX_HASH_KEY")
    config_file = write_config(tmp_path / "hookinbox.toml", sqlite_url, routes=[])
    done = erase_cli(config_file, subject="cus_1")
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        "hookinbox: config_error: privacy.hash_key_env: environment variable "
        "HOOKINBOX_HASH_KEY is not set or empty (redact_hash and subject need it)"
    ]
    assert done.stdout == ""


async def test_erase_of_a_source_neither_configured_nor_stored_is_refused_not_done(
    tmp_path: Path, sqlite_url: str, store_sqlite: None
) -> None:
    # A mistyped source would erase nothing and print "erased 0": it must say so instead.
    config_file = write_config(tmp_path / "hookinbox.toml", sqlite_url, routes=[])
    done = erase_cli(config_file, "--source", "tset", subject="cus_1")
    assert done.returncode == 4, done.stderr
    assert done.stderr.strip().splitlines() == [
        "hookinbox: unknown_source: no source named 'tset' in the config, and nothing of it"
        " stored holds this subject"
    ]
    assert done.stdout == ""
    audit = await _audit_rows(sqlite_url)
    assert audit == 0  # refused: nothing recorded as an erasure


async def _audit_rows(sqlite_url: str) -> int:
    store = open_store_for(sqlite_url)
    await store.open()
    try:
        return len(await store.audit.list_operator_actions())
    finally:
        await store.close()


def test_config_check_names_the_missing_key_of_a_source_with_a_subject(
    tmp_path: Path, sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HOOKINBOX_HASH_KEY")
    config_file = write_config(tmp_path / "hookinbox.toml", sqlite_url, routes=[], source=SOURCE)
    done = subprocess.run(
        [sys.executable, "-m", "hookinbox.cli", "config", "check", "--config", str(config_file)],
        env=hookinbox_env(),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert "HOOKINBOX_HASH_KEY is not set" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


@pytest.fixture
async def store_sqlite(sqlite_url: str) -> None:
    opened = open_store_for(sqlite_url)
    await opened.open()
    await opened.close()


def test_the_erase_scope_is_its_own() -> None:
    (token,) = parse_tokens(f"dpo:erase:{ERASER}")
    assert token.allows("erase") and not token.allows("read") and not token.allows("operate")
    (operator,) = parse_tokens(f"oncall:read+operate:{OPERATOR}")
    assert not operator.allows("erase")


async def test_an_erasure_while_the_subjects_deliveries_keep_arriving_refuses_none_of_them(
    db_url: str, client: httpx.AsyncClient, store: Store
) -> None:
    """The erasure's batches and the receiver's reservations run at once on their own
    connections: every delivery is accepted, the erasure ends, and a second one takes
    what arrived during the first."""
    subject = f"cus_{uuid.uuid4().hex}"
    config = make_config(db_url, routes=[], source=SOURCE)
    async with running_inbox(config, run_workers=False) as inbox:
        for n in range(40):
            body, headers = signed(subject_body(f"evt_early_{n}", subject), event_id=f"e{n}")
            assert (await client.post(inbox.url(), content=body, headers=headers)).is_success

        async def keep_sending() -> list[int]:
            statuses = []
            for n in range(40):
                body, headers = signed(subject_body(f"evt_late_{n}", subject), event_id=f"l{n}")
                sent = await client.post(inbox.url(), content=body, headers=headers)
                statuses.append(sent.status_code)
            return statuses

        sending = asyncio.create_task(keep_sending())
        first = await ops.erase_subject(
            store, config, subject=subject, batch=5, actor="test:erasure"
        )
        statuses = await asyncio.wait_for(sending, 60)
    assert statuses == [200] * 40
    assert first.payloads >= 40
    second = await ops.erase_subject(store, config, subject=subject, actor="test:erasure")
    assert first.payloads + second.payloads == 80
    after = await store.erasure.find_subject(first.subject_hash)
    assert (after.deliveries, after.payloads) == (80, 0)
