"""``serve --processes 2`` without ``PROMETHEUS_MULTIPROC_DIR``: every scrape of /metrics,
whichever process answers it, counts the deliveries of both; the directory the processes
shared is gone after they stop."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.obs.test_metrics_multiprocess import sample
from tests.server.test_serve_limits import write_config
from tests.support.processes import HookinboxProcess, free_port, hookinbox_env
from tests.support.signing import SECRET, SECRET_ENV, delivery

DELIVERIES = 8


@pytest.mark.slow
def test_every_scrape_of_two_processes_counts_both(tmp_path: Path) -> None:
    port = free_port()
    config = write_config(tmp_path / "c.toml", f"sqlite:///{tmp_path}/h.db", port)
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = hookinbox_env({SECRET_ENV: SECRET, "TMPDIR": str(temp)})
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    server = HookinboxProcess(
        ["serve", "--config", str(config), "--no-workers", "--processes", "2"],
        env,
        tmp_path / "serve.log",
    ).start()
    base = f"http://127.0.0.1:{port}"
    try:
        server.wait_healthy(base, timeout=30)
        shared = list(temp.iterdir())
        # A connection of its own per request, so both processes take some.
        for n in range(DELIVERIES):
            body, headers = delivery(f"evt_proc_{n}")
            answer = httpx.post(f"{base}/webhooks/test", content=body, headers=headers)
            assert answer.json()["status"] == "accepted"
        scrapes = [httpx.get(f"{base}/metrics", timeout=10).text for _ in range(6)]
    finally:
        server.stop()
    counted = [
        sample(text, "hookinbox_deliveries_total", source="test", outcome="accepted")
        for text in scrapes
    ]
    assert counted == [DELIVERIES] * len(scrapes), server.output()[-2000:]
    assert [p.name.startswith("hookinbox-metrics-") for p in shared] == [True]
    assert list(temp.iterdir()) == []
