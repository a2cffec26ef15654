"""The operator commands through the real entry point (``python -m hookinbox.cli``), on both
stores: empty stores, bad ids and arguments, limits, dry runs, and that nothing is lost or
duplicated. Rows are put in place with the store's own methods; workers, where a scenario
needs them, are real ``hookinbox worker`` processes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from hookinbox.store import Store
from tests.support.configs import write_config
from tests.support.external import ExternalSystem
from tests.support.inbox import make_config, running_inbox
from tests.support.journal import add_delivery, settle_all
from tests.support.processes import REPO, HookinboxProcess, hookinbox_env
from tests.support.signing import delivery
from tests.support.waiting import wait_for

COUNT = {"events": ["*"], "action": "count", "handler": "tests.support.handlers:count"}
CRM = {"events": ["*"], "action": "crm", "handler": "tests.support.handlers:crm_task_via_external"}


def hookinbox(
    config: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hookinbox.cli", *args, "--config", str(config)],
        env=hookinbox_env({"HOOKINBOX_ACTOR": "cli:tester", **(env or {})}),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=90,
        stdin=subprocess.DEVNULL,
    )


def ok_json(config: Path, *args: str) -> Any:
    done = hookinbox(config, *args, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def refused(config: Path, *args: str, code: int, says: str) -> None:
    """A refusal is one line on stderr, nothing on stdout, and its exit code."""
    done = hookinbox(config, *args)
    assert done.returncode == code, (done.stdout, done.stderr)
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("hookinbox: "), done.stderr
    assert says in lines[0], lines[0]
    assert done.stdout == ""


@pytest.fixture
def config_file(tmp_path: Path, db_url: str) -> Path:
    return write_config(tmp_path / "hookinbox.toml", db_url, routes=[COUNT])


async def test_every_command_on_an_empty_store(config_file: Path, store: Store) -> None:
    assert ok_json(config_file, "dlq", "list") == {
        "count": 0,
        "review_days": 7.0,
        "dead_letters": [],
    }
    assert ok_json(config_file, "dlq", "retry", "--all", "--limit", "5")["items"] == []
    purge = ok_json(config_file, "purge", "--dry-run")
    assert [(s["kind"], s["candidates"]) for s in purge["steps"]] == [
        ("payloads", 0),
        ("deliveries", 0),
        ("rejected", 0),
    ]
    report = ok_json(config_file, "reconcile")
    assert report["clean"] and report["total"] == 0
    assert ok_json(config_file, "sources", "list")["sources"][0]["paused"] is False
    refused(config_file, "trace", "evt_nothing", code=4, says="not_found")
    refused(config_file, "replay", "dlv_nothing", code=4, says="not_found")
    refused(config_file, "dlq", "retry", "dlv_nothing:count", code=4, says="no job")
    assert (await store.count_rows())["deliveries"] == 0


async def test_bad_arguments_are_one_line_and_non_zero(config_file: Path, store: Store) -> None:
    refused(config_file, "dlq", "retry", "--all", code=5, says="needs --limit")
    refused(config_file, "dlq", "retry", code=2, says="either JOB_ID or --all")
    refused(config_file, "dlq", "retry", "--all", "--limit", "0", code=2, says="--limit")
    refused(config_file, "dlq", "list", "--since", "last tuesday", code=2, says="--since")
    refused(config_file, "purge", "--older-than", "1h", code=5, says="redelivery window")
    refused(config_file, "purge", "--older-than", "soon", code=2, says="--older-than")
    refused(config_file, "purge", "--batch", "0", code=2, says="--batch")
    refused(config_file, "replay", code=2, says="give a DELIVERY_ID or --outbox KEY")
    refused(config_file, "sources", "pause", "nope", code=4, says="unknown_source")
    delivery_id = await add_delivery(store, "evt_1")
    await settle_all(store, "completed")
    refused(config_file, "replay", delivery_id, "--force-effects", code=5, says="--yes")
    refused(config_file, "replay", delivery_id, "--action", "nope", code=4, says="has: count")


async def test_dead_letters_limits_dry_run_and_retry(config_file: Path, store: Store) -> None:
    for n in range(3):
        await add_delivery(store, f"evt_{n}")
    failed = await settle_all(store, "failed")
    before = await store.count_rows()

    listed = ok_json(config_file, "dlq", "list", "--limit", "2")
    assert listed["count"] == 2
    first = listed["dead_letters"][0]
    assert first["last_error"] == "crm_unavailable" and first["attempts"] == 1
    assert first["first_failed_at"] and first["review_deadline"] > first["failed_at"]
    assert ok_json(config_file, "dlq", "list", "--source", "other")["count"] == 0
    assert ok_json(config_file, "dlq", "list", "--since", "1h")["count"] == 3
    # At 80 columns every job id and reason is whole, so it can be copied into a retry.
    narrow = hookinbox(config_file, "dlq", "list", env={"COLUMNS": "80"})
    assert narrow.returncode == 0 and all(job_id in narrow.stdout for job_id in failed)
    assert narrow.stdout.count("crm_unavailable") == 3

    dry = ok_json(config_file, "dlq", "retry", "--all", "--limit", "2", "--dry-run")
    assert [i["outcome"] for i in dry["items"]] == ["would_requeue"] * 2
    assert ok_json(config_file, "dlq", "list")["count"] == 3

    done = hookinbox(config_file, "dlq", "retry", "--all", "--limit", "2")
    assert done.returncode == 0 and "requeued 2 of 2" in done.stdout, done.stderr
    left = ok_json(config_file, "dlq", "list")["dead_letters"]
    assert [d["job_id"] for d in left] == [failed[2]]
    refused(config_file, "dlq", "retry", failed[0], code=5, says="accepted, not failed")

    one = ok_json(config_file, "dlq", "retry", failed[2])
    assert one["requeued"] == 1
    assert ok_json(config_file, "dlq", "list")["count"] == 0
    # Nothing lost or duplicated: the same rows, every job waiting once more.
    assert await store.count_rows() == before
    claimed = await store.queue.claim_due_jobs("w", 10, 30)
    assert sorted(c.id for c in claimed) == sorted(failed)
    assert {c.trigger for c in claimed} == {"dlq-retry"}
    audit = await store.audit.list_operator_actions()
    assert [(a.actor, a.command) for a in audit] == [("cli:tester", "dlq-retry")] * 3


async def test_purge_in_batches_keeps_dead_letters(
    tmp_path: Path, db_url: str, store: Store
) -> None:
    config = write_config(
        tmp_path / "hookinbox.toml",
        db_url,
        routes=[COUNT],
        extra='[operations]\nredelivery_window = 0\nkey_retention = "1s"\npayload_retention = 0',
    )
    for n in range(5):
        await add_delivery(store, f"evt_done_{n}")
    await settle_all(store, "completed")
    await add_delivery(store, "evt_failed")
    await settle_all(store, "failed")

    dry = ok_json(config, "purge", "--payloads-only", "--dry-run")
    assert dry["steps"][0]["candidates"] == 5 and (await store.count_rows())["payloads"] == 6
    done = hookinbox(config, "purge", "--payloads-only", "--batch", "2")
    assert done.returncode == 0, done.stderr
    assert "payloads: deleted 5" in done.stdout and "3 batch(es)" in done.stdout
    assert (await store.count_rows())["payloads"] == 1

    import asyncio

    await asyncio.sleep(1.1)
    report = ok_json(config, "purge", "--older-than", "1s", "--batch", "2")
    keys = report["steps"][1]
    assert (keys["deleted"], keys["held"], keys["batches"]) == (5, 1, 3)
    rows = await store.count_rows()
    assert (rows["deliveries"], rows["jobs"], rows["payloads"]) == (1, 1, 1)
    assert ok_json(config, "dlq", "list")["count"] == 1


async def test_reconcile_exits_1_when_something_is_found(
    tmp_path: Path, db_url: str, store: Store
) -> None:
    config = write_config(
        tmp_path / "hookinbox.toml",
        db_url,
        routes=[COUNT],
        extra="[operations]\ndlq_review_days = 0.000001",
    )
    await add_delivery(store, "evt_dead")
    (job_id,) = await settle_all(store, "failed", error="http_500")
    import asyncio

    await asyncio.sleep(0.2)
    done = hookinbox(config, "reconcile", "--json")
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    (finding,) = [f for f in report["findings"] if f["count"]]
    assert finding["check"] == "failed_past_review"
    assert finding["items"][0]["id"] == job_id and finding["items"][0]["detail"] == "http_500"
    human = hookinbox(config, "reconcile")
    assert human.returncode == 1 and job_id in human.stdout and "found 1" in human.stdout


async def test_pause_reaches_a_running_receiver_within_seconds(
    tmp_path: Path, db_url: str, client: httpx.AsyncClient
) -> None:
    config_file = write_config(
        tmp_path / "hookinbox.toml",
        db_url,
        routes=[COUNT],
        extra="[operations]\npause_refresh_seconds = 0.2",
    )
    config = make_config(db_url, operations={"pause_refresh_seconds": 0.2})
    async with running_inbox(config, run_workers=False) as inbox:
        paused = ok_json(config_file, "sources", "pause", "test", "--reason", "contract v2")
        assert paused["paused"] and paused["changed_by"] == "cli:tester"
        body, headers = delivery("evt_paused")

        async def receiver_sees(paused: bool) -> bool:
            return inbox.inbox.paused("test") is paused

        await wait_for(lambda: receiver_sees(True), 5, "the receiver to see the pause")
        for _ in range(3):
            answer = await client.post(inbox.url(), content=body, headers=headers)
            assert answer.status_code == 503 and answer.headers["retry-after"] == "5"
            assert answer.json() == {"error": "source_paused"}
        assert await inbox.store.journal.get_delivery("evt_paused") is None
        listed = ok_json(config_file, "sources", "list")["sources"]
        assert listed[0]["paused"] and listed[0]["reason"] == "contract v2"

        assert not ok_json(config_file, "sources", "resume", "test")["paused"]
        await wait_for(lambda: receiver_sees(False), 5, "the receiver to see the resume")
        answer = await client.post(inbox.url(), content=body, headers=headers)
        assert answer.status_code == 200 and answer.json()["status"] == "accepted"
        found = await inbox.store.journal.get_delivery("evt_paused")
        assert found is not None and found.delivery_count == 1


@pytest.mark.slow
async def test_replay_makes_no_second_effect_unless_forced(
    tmp_path: Path, db_url: str, store: Store
) -> None:
    config = write_config(tmp_path / "hookinbox.toml", db_url, routes=[CRM])
    with ExternalSystem() as external:
        worker = HookinboxProcess(
            ["worker", "--config", str(config)],
            hookinbox_env({"HB_TEST_EXTERNAL_URL": external.url}),
            tmp_path / "worker.log",
        ).start()
        try:
            delivery_id = await add_delivery(store, "evt_replay", actions=("crm",))

            async def completed() -> bool:
                found = await store.journal.get_delivery(delivery_id)
                return found is not None and found.status == "completed"

            await wait_for(completed, 20, "the worker to complete the job")
            assert external.count() == 1

            dry = ok_json(config, "replay", delivery_id, "--dry-run")
            assert dry["jobs"][0]["outcome"] == "would_run" and external.count() == 1

            again = ok_json(config, "replay", delivery_id, "--wait", "20s")
            (job,) = again["jobs"]
            assert again["delivery"]["status"] == "completed"
            assert job["outcome"] == "ran" and job["state_after"] == "completed"
            assert job["effects_skipped"] == ["crm-task:evt_replay:create"]
            assert job["effects_made"] == []
            assert external.count() == 1

            human = hookinbox(config, "replay", delivery_id)
            assert human.returncode == 0, human.stderr
            assert "effect skipped, the ledger already holds it" in human.stdout
            assert external.count() == 1

            forced = ok_json(config, "replay", delivery_id, "--force-effects", "--yes")
            (job,) = forced["jobs"]
            assert job["effects_superseded"] == ["crm-task:evt_replay:create"]
            assert job["effects_made"] == ["crm-task:evt_replay:create"]
            assert external.count() == 2
        finally:
            worker.stop()

    traced = ok_json(config, "trace", "evt_replay")
    (one,) = traced["deliveries"]
    triggers = [a["trigger"] for a in one["jobs"][0]["attempt_history"]]
    assert triggers == ["delivery", "replay", "replay", "replay"]
    commands = [a["command"] for a in one["operator_actions"]]
    assert commands == ["replay", "replay", "force-effects", "replay"]
    assert [e["state"] for e in one["effects"]] == ["recorded"]
    assert one["effects"][0]["result"]["id"] == "ext-2"


@pytest.mark.slow
async def test_dlq_retry_after_the_external_system_recovers_makes_one_effect(
    tmp_path: Path, db_url: str, store: Store
) -> None:
    config = write_config(
        tmp_path / "hookinbox.toml", db_url, routes=[CRM], worker={"max_attempts": 2}
    )
    with ExternalSystem() as external:
        external.status = 503
        worker = HookinboxProcess(
            ["worker", "--config", str(config)],
            hookinbox_env({"HB_TEST_EXTERNAL_URL": external.url}),
            tmp_path / "worker.log",
        ).start()
        try:
            await add_delivery(store, "evt_down", actions=("crm",), max_attempts=2)

            async def dead() -> bool:
                return bool(await store.queue.list_dead_letters(order="newest_failure"))

            await wait_for(dead, 20, "the job to be dead-lettered")
            (letter,) = ok_json(config, "dlq", "list")["dead_letters"]
            assert letter["attempts"] == 2 and letter["last_error"] == "HTTPStatusError"
            assert external.count() == 0

            external.status = 200
            assert ok_json(config, "dlq", "retry", letter["job_id"])["requeued"] == 1

            async def completed() -> bool:
                job = await store.queue.get_job(letter["job_id"])
                return job is not None and job.state == "completed"

            await wait_for(completed, 20, "the retried job to complete")
        finally:
            worker.stop()
    assert external.count() == 1
    traced = ok_json(config, "trace", "evt_down")
    attempts = traced["deliveries"][0]["jobs"][0]["attempt_history"]
    assert [(a["trigger"], a["outcome"]) for a in attempts] == [
        ("delivery", "retry"),
        ("delivery", "failed"),
        ("dlq-retry", "completed"),
    ]
    human = hookinbox(config, "trace", "evt_down")
    assert human.returncode == 0 and "dlq-retry" in human.stdout and "receipts" in human.stdout


async def test_replay_of_a_purged_payload_is_refused_and_says_why(
    config_file: Path, store: Store
) -> None:
    delivery_id = await add_delivery(store, "evt_purged")
    await settle_all(store, "completed")
    purged = ok_json(config_file, "purge", "--payloads-only", "--older-than", "0s")
    assert purged["steps"][0]["deleted"] == 1
    before = await store.count_rows()
    for ref in (delivery_id, "evt_purged"):
        refused(config_file, "replay", ref, code=5, says="payload_purged")
        refused(config_file, "replay", ref, "--dry-run", code=5, says="cannot be replayed")
    assert await store.count_rows() == before
    # The purge is audited with its actor; the refused replays are not.
    audit = await store.audit.list_operator_actions()
    assert [(a.actor, a.command, a.detail) for a in audit] == [
        ("cli:tester", "purge", "payloads:1")
    ]


async def test_resuming_an_unknown_source_is_refused(config_file: Path, store: Store) -> None:
    refused(config_file, "sources", "resume", "nope", code=4, says="unknown_source")
    assert ok_json(config_file, "sources", "list")["sources"][0]["paused"] is False


async def test_trace_narrows_to_one_source(config_file: Path, store: Store) -> None:
    await add_delivery(store, "evt_shared")
    await add_delivery(store, "evt_shared", source="other")
    both = ok_json(config_file, "trace", "evt_shared")
    assert sorted(d["journal"]["source"] for d in both["deliveries"]) == ["other", "test"]
    narrowed = ok_json(config_file, "trace", "evt_shared", "--source", "test")
    assert narrowed["source"] == "test"
    (one,) = narrowed["deliveries"]
    assert (one["journal"]["source"], one["journal"]["event_id"]) == ("test", "evt_shared")
    assert [job["action"] for job in one["jobs"]] == ["count"]
    refused(config_file, "trace", "evt_shared", "--source", "nope", code=4, says="not_found")


async def test_deliveries_list_by_status_with_a_limit(config_file: Path, store: Store) -> None:
    for n in range(3):
        await add_delivery(store, f"evt_failed_{n}")
    await settle_all(store, "failed")
    await add_delivery(store, "evt_done")
    await settle_all(store, "completed")
    await add_delivery(store, "evt_waiting")

    (newest,) = ok_json(config_file, "deliveries", "list", "--status", "failed", "--limit", "1")
    assert (newest["event_id"], newest["status"]) == ("evt_failed_2", "failed")
    failed = ok_json(config_file, "deliveries", "list", "--status", "failed")
    assert [d["event_id"] for d in failed] == ["evt_failed_2", "evt_failed_1", "evt_failed_0"]
    (done,) = ok_json(config_file, "deliveries", "list", "--status", "completed", "--limit", "5")
    assert done["event_id"] == "evt_done"
    assert hookinbox(config_file, "deliveries", "list", "--limit", "0").returncode == 2
