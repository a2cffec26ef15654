"""The mounts a team adopting hookinbox starts from, each driven over HTTP by its example:
FastAPI (lifespan composed with the host's, the host's database injected, a typed
payload) and Django (ASGI, with the workers in a separate ``hookinbox worker`` process).
The store changes nothing here, so each runs once, on SQLite."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.examples.support import run_example

pytestmark = pytest.mark.slow


def test_the_fastapi_example(sqlite_url: str, tmp_path: Path) -> None:
    output, summary = run_example("fastapi", tmp_path, "--database", sqlite_url)
    assert summary["answers"] == ["accepted", "duplicate"]
    assert summary["paid"] == ["completed", "in_1"]
    assert summary["broken"] == ["failed", "payload_invalid", 1]
    assert summary["orders"] == [
        {
            "invoice": "in_1",
            "customer": "cus_7",
            "amount_cents": 4200,
            "paid_by_event": "evt_paid_1",
        }
    ]
    assert summary["health"] == 200
    assert "a dead letter, not retried" in output


def test_the_django_example_with_a_separate_worker_process(sqlite_url: str, tmp_path: Path) -> None:
    output, summary = run_example("django", tmp_path, "--database", sqlite_url)
    assert summary["answers"] == ["accepted", "duplicate"]
    assert summary["shipments"] == [{"order": 4501, "event_id": "shopify-evt-1"}]
    assert summary["exits"][1] == 0  # the worker stopped cleanly on SIGTERM
    assert "GET / -> {'site': 'django'" in output
