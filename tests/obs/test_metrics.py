"""/metrics after a known sequence of deliveries: exact counts, on both stores."""

from __future__ import annotations

import asyncio
import time

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.support.inbox import make_config, running_inbox
from tests.support.signing import WRONG_SECRET, delivery, event_body, signed
from tests.support.waiting import wait_for

ROUTES = [
    {"events": ["crm.lead.created"], "action": "count", "handler": "tests.support.handlers:count"},
    {"events": ["crm.fail"], "action": "fail", "handler": "tests.support.handlers:always_fails"},
]


def samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return found


def value(
    found: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str
) -> float:
    return found.get((name, frozenset(labels.items())), 0.0)


async def test_metrics_count_a_known_sequence_exactly(
    db_url: str, client: httpx.AsyncClient
) -> None:
    config = make_config(db_url, routes=ROUTES, worker={"max_attempts": 2})
    async with running_inbox(config) as inbox:
        url = inbox.url()
        for n in (1, 2, 3):
            body, headers = delivery(f"evt_{n}")
            assert (await client.post(url, content=body, headers=headers)).json()[
                "status"
            ] == "accepted"
        body, headers = delivery("evt_fail", "crm.fail")
        assert (await client.post(url, content=body, headers=headers)).status_code == 200
        for _ in range(2):
            body, headers = delivery("evt_1")
            assert (await client.post(url, content=body, headers=headers)).json()[
                "status"
            ] == "duplicate"
        body, headers = signed(event_body("evt_2", note="changed"), event_id="evt_2")
        assert (await client.post(url, content=body, headers=headers)).json()["conflict"] is True
        for n in range(2):
            body, headers = delivery(f"evt_forged_{n}", secret=WRONG_SECRET)
            assert (await client.post(url, content=body, headers=headers)).status_code == 400
        body, headers = delivery("evt_old", timestamp=time.time() - 3600)
        assert (await client.post(url, content=body, headers=headers)).status_code == 400
        body, headers = delivery("evt_nowhere")
        nowhere = f"{inbox.base_url}/webhooks/no-such-source"
        assert (await client.post(nowhere, content=body, headers=headers)).status_code == 404

        async def settled() -> bool:
            found = await inbox.store.journal.get_delivery("evt_fail")
            done = [await inbox.store.journal.get_delivery(f"evt_{n}") for n in (1, 2, 3)]
            return (
                found is not None
                and found.status == "failed"
                and all(d is not None and d.status == "completed" for d in done)
            )

        await wait_for(settled, 20, "the jobs to complete and the failing one to dead-letter")
        answer = await client.get(f"{inbox.base_url}/metrics")
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/plain")
    found = samples(answer.text)
    deliveries = "hookinbox_deliveries_total"
    assert value(found, deliveries, source="test", outcome="accepted") == 4
    assert value(found, deliveries, source="test", outcome="duplicate") == 2
    assert value(found, deliveries, source="test", outcome="conflict") == 1
    assert value(found, deliveries, source="test", outcome="invalid_signature") == 2
    assert value(found, deliveries, source="test", outcome="timestamp_out_of_tolerance") == 1
    # An unknown name from the URL never becomes a label value of its own.
    assert value(found, deliveries, source="_unknown", outcome="unknown_source") == 1
    assert not any("no-such-source" in str(key) for key in found)
    assert value(found, "hookinbox_answer_seconds_count", source="test") == 10

    assert value(found, "hookinbox_jobs_started_total", source="test", action="count") == 3
    assert value(found, "hookinbox_jobs_completed_total", source="test", action="count") == 3
    retried, failed = "hookinbox_jobs_retried_total", "hookinbox_jobs_failed_total"
    assert not any(name == retried and ("action", "count") in labels for name, labels in found)
    assert value(found, "hookinbox_jobs_started_total", source="test", action="fail") == 2
    # Failures carry their cause, so an alert can name it.
    assert value(found, retried, source="test", action="fail", reason="crm_unavailable") == 1
    assert value(found, failed, source="test", action="fail", reason="crm_unavailable") == 1
    assert value(found, "hookinbox_jobs_completed_total", source="test", action="fail") == 0
    assert value(found, "hookinbox_handler_seconds_count", source="test", action="count") == 3
    assert value(found, "hookinbox_handler_seconds_count", source="test", action="fail") == 2

    assert value(found, "hookinbox_dead_letters", source="test") == 1
    by_reason = "hookinbox_dead_letters_by_reason"
    assert value(found, by_reason, source="test", action="fail", reason="crm_unavailable") == 1
    # No `_created` series (it reads like a count), and the process is described.
    assert not any(name.endswith("_created") for name, _ in found)
    assert value(found, "process_cpu_seconds_total") > 0
    assert value(found, "hookinbox_queue_depth", source="test") == 0
    assert value(found, "hookinbox_queue_lag_seconds", source="test") == 0
    assert value(found, "hookinbox_source_paused", source="test") == 0
    assert value(found, "hookinbox_store_up") == 1


async def test_queue_depth_and_lag_read_from_the_store(
    db_url: str, client: httpx.AsyncClient
) -> None:
    """With no worker running, accepted jobs wait: depth counts them, lag grows."""
    async with running_inbox(make_config(db_url), run_workers=False) as inbox:
        for n in (1, 2):
            body, headers = delivery(f"evt_wait_{n}")
            assert (
                await client.post(inbox.url(), content=body, headers=headers)
            ).status_code == 200
        await asyncio.sleep(0.3)
        found = samples((await client.get(f"{inbox.base_url}/metrics")).text)
        assert value(found, "hookinbox_queue_depth", source="test") == 2
        assert 0.3 <= value(found, "hookinbox_queue_lag_seconds", source="test") < 30
        assert value(found, "hookinbox_dead_letters", source="test") == 0
        # Read at a bounded rate: a second scrape at once is served from the same reading.
        body, headers = delivery("evt_wait_3")
        await client.post(inbox.url(), content=body, headers=headers)
        again = samples((await client.get(f"{inbox.base_url}/metrics")).text)
        assert value(again, "hookinbox_queue_depth", source="test") == 2


def test_handler_buckets_reach_the_job_timeout() -> None:
    """A job that runs until ``worker.job_timeout_seconds`` lands in a bucket of its own."""
    from hookinbox.metrics import Metrics, handler_buckets

    assert handler_buckets(600)[-1] == 600 and 300 in handler_buckets(600)
    assert max(handler_buckets(30)) == 60
    metrics = Metrics(["test"], slowest_job_seconds=3600)
    metrics.job_ran("test", "slow", 3500)
    text = metrics.exposition().decode()
    assert 'hookinbox_handler_seconds_bucket{action="slow",le="3600.0",source="test"} 1.0' in text


def test_failure_reasons_are_bounded() -> None:
    from hookinbox.metrics import MAX_REASONS, OTHER_REASON, Metrics

    metrics = Metrics(["test"])
    labels = {metrics.reason_label(f"code_{n}") for n in range(MAX_REASONS + 10)}
    assert len(labels) == MAX_REASONS + 1 and OTHER_REASON in labels
