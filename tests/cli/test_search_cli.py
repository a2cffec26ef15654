"""``hookinbox deliveries list|show`` run the one delivery search: what is typed there
finds what the admin page and the API find, and a shared event id is never guessed."""

from __future__ import annotations

from pathlib import Path

import pytest

from hookinbox.store import Store
from tests.cli.test_ops_cli import COUNT, hookinbox, ok_json, refused
from tests.support.configs import write_config
from tests.support.journal import add_delivery


@pytest.fixture
def config_file(tmp_path: Path, db_url: str) -> Path:
    return write_config(tmp_path / "hookinbox.toml", db_url, routes=[COUNT])


async def test_list_takes_globs_pasted_ids_relative_times_and_a_payload_field(
    config_file: Path, store: Store
) -> None:
    paid = await add_delivery(store, "evt_paid", event_type="Order.Paid", data={"c": "cus_1"})
    await add_delivery(store, "evt_new", event_type="order.created", data={"c": "cus_2"})
    await add_delivery(store, "evt_inv", event_type="invoice.paid")
    listed = ok_json(config_file, "deliveries", "list", "--type", "ORDER.*", "--since", "24h")
    assert sorted(d["event_id"] for d in listed) == ["evt_new", "evt_paid"]
    (by_job,) = ok_json(config_file, "deliveries", "list", "--id", f" {paid}:count ")
    assert by_job["event_id"] == "evt_paid"
    (by_field,) = ok_json(config_file, "deliveries", "list", "--where", "data.c = cus_1")
    assert by_field["delivery_id"] == paid
    human = hookinbox(config_file, "deliveries", "list", "--type", "*.paid", "--limit", "1")
    assert human.returncode == 0 and "2 matching; older: --before" in human.stdout
    refused(config_file, "deliveries", "list", "--where", "c", code=2, says="payload filter")


async def test_show_refuses_to_guess_between_two_sources(config_file: Path, store: Store) -> None:
    await add_delivery(store, "evt_both", source="test")
    other = await add_delivery(store, "evt_both", source="other")
    refused(config_file, "deliveries", "show", "evt_both", code=2, says="ambiguous_id: event id")
    shown = ok_json(config_file, "deliveries", "show", "evt_both", "--source", "other")
    assert shown["delivery_id"] == other


async def test_dlq_retry_by_filter_previews_then_retries_exactly_the_expected(
    config_file: Path, store: Store
) -> None:
    from tests.support.journal import settle_all

    for n in range(3):
        await add_delivery(store, f"evt_c{n}")
    await settle_all(store, "failed", error="connect_error")
    await add_delivery(store, "evt_h")
    await settle_all(store, "failed", error="http_503")
    args = ("dlq", "retry", "--all", "--source", "TEST", "--reason", "connect_error")
    preview = hookinbox(config_file, *args, "--since", "1h", "--limit", "2", "--dry-run")
    assert preview.returncode == 0, preview.stderr
    assert "3 dead letters match; the limit selects 2" in preview.stdout
    assert "add --expect 2" in preview.stdout
    refused(config_file, *args, "--limit", "2", "--expect", "1", code=5, says="preview again")
    done = ok_json(config_file, *args, "--limit", "2", "--expect", "2")
    assert (done["matched"], done["requeued"]) == (3, 2)
    left = ok_json(config_file, "dlq", "list")
    assert sorted(d["last_error"] for d in left["dead_letters"]) == ["connect_error", "http_503"]
    refused(config_file, "dlq", "retry", "x:y", "--reason", "r", code=2, says="go with --all")
