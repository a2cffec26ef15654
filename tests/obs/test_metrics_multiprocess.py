"""With PROMETHEUS_MULTIPROC_DIR, the /metrics of a receiving process adds up the counts
of separate worker processes (prometheus-client's multiprocess mode)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.configs import write_config
from tests.support.processes import HookinboxProcess, free_port, hookinbox_env, wait_until
from tests.support.signing import delivery

ROUTE = {"events": ["*"], "action": "count", "handler": "tests.support.handlers:count"}


def sample(text: str, name: str, **labels: str) -> float:
    for family in text_string_to_metric_families(text):
        for found in family.samples:
            if found.name == name and found.labels == labels:
                return float(found.value)
    return 0.0


@pytest.mark.slow
def test_receiver_metrics_include_the_separate_workers_counts(db_url: str, tmp_path: Path) -> None:
    port = free_port()
    config = write_config(tmp_path / "hookinbox.toml", db_url, routes=[ROUTE], port=port)
    shared = tmp_path / "prometheus"
    shared.mkdir()
    env = hookinbox_env({"PROMETHEUS_MULTIPROC_DIR": str(shared)})
    receiver = HookinboxProcess(
        ["serve", "--no-workers", "--config", str(config)], env, tmp_path / "serve.log"
    )
    workers = [
        HookinboxProcess(["worker", "--config", str(config)], env, tmp_path / f"worker{n}.log")
        for n in (1, 2)
    ]
    base = f"http://127.0.0.1:{port}"
    try:
        receiver.start()
        receiver.wait_healthy(base)
        for worker in workers:
            worker.start()
        with httpx.Client(timeout=10) as client:
            for n in range(6):
                body, headers = delivery(f"evt_mp_{n}")
                answer = client.post(f"{base}/webhooks/test", content=body, headers=headers)
                assert answer.json()["status"] == "accepted"

            def all_completed() -> bool:
                text = client.get(f"{base}/metrics").text
                done = sample(text, "hookinbox_jobs_completed_total", source="test", action="count")
                return done == 6

            wait_until(all_completed, 30, "the workers' completions to show in /metrics")
            text = client.get(f"{base}/metrics").text
    finally:
        for process in (*workers, receiver):
            process.stop()
    accepted = sample(text, "hookinbox_deliveries_total", source="test", outcome="accepted")
    assert accepted == 6
    assert sample(text, "hookinbox_jobs_started_total", source="test", action="count") == 6
    assert sample(text, "hookinbox_handler_seconds_count", source="test", action="count") == 6
    # Each process wrote its own file; the receiver's scrape added them up.
    assert len(list(shared.glob("counter_*.db"))) >= 2


def test_a_values_file_created_but_not_yet_sized_is_no_500_from_metrics(
    db_url: str, tmp_path: Path
) -> None:
    """prometheus-client opens a process's values file empty and sizes it a moment later;
    a scrape between the two read an empty file, and /metrics answered 500 whenever a
    worker started or met a new label. Here that moment is held still: an empty file."""
    port = free_port()
    config = write_config(tmp_path / "hookinbox.toml", db_url, routes=[ROUTE], port=port)
    shared = tmp_path / "prometheus"
    shared.mkdir()
    (shared / "counter_999999.db").touch()
    env = hookinbox_env({"PROMETHEUS_MULTIPROC_DIR": str(shared)})
    receiver = HookinboxProcess(
        ["serve", "--no-workers", "--config", str(config)], env, tmp_path / "serve.log"
    )
    base = f"http://127.0.0.1:{port}"
    try:
        receiver.start()
        receiver.wait_healthy(base)
        with httpx.Client(timeout=10) as client:
            body, headers = delivery("evt_mp_empty_file")
            answer = client.post(f"{base}/webhooks/test", content=body, headers=headers)
            assert answer.json()["status"] == "accepted"
            scraped = client.get(f"{base}/metrics")
    finally:
        receiver.stop()
    assert scraped.status_code == 200, scraped.text
    accepted = sample(scraped.text, "hookinbox_deliveries_total", source="test", outcome="accepted")
    assert accepted == 1
