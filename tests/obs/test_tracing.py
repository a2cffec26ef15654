"""OpenTelemetry traces (``[otel]``): off, nothing of OpenTelemetry is imported; on, one
trace from the provider's request through the receipt, the reservation, the claim, the
attempt and the forward, continued in the target (W3C traceparent), on both stores."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from hookinbox import otel
from tests.support.inbox import make_config, running_inbox
from tests.support.processes import REPO, hookinbox_env
from tests.support.signing import delivery
from tests.support.target import RecordingTarget
from tests.support.waiting import wait_for_status

PROVIDER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PROVIDER_PARENT = f"00-{PROVIDER_TRACE}-00f067aa0ba902b7-01"


def test_off_nothing_of_opentelemetry_is_imported(tmp_path: Any) -> None:
    script = f"""
import sys
from hookinbox.app import Inbox
from hookinbox.config import config_from_mapping
from hookinbox.cli.main import main
config = config_from_mapping({{
    "database": "sqlite:///{tmp_path}/x.db",
    "sources": {{"s": {{"secret_env": "S", "routes": [
        {{"action": "f", "forward": "http://127.0.0.1:9/x"}}]}}}},
}})
inbox = Inbox(config)
assert not inbox.tracing.enabled
loaded = sorted(m for m in sys.modules if m.startswith("opentelemetry"))
print(loaded)
"""
    done = subprocess.run(
        [sys.executable, "-c", script],
        env=hookinbox_env({"S": "whsec_a2V5a2V5a2V5a2V5"}),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


async def test_one_trace_from_the_provider_to_the_forward_target(
    db_url: str, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    exporter = InMemorySpanExporter()
    monkeypatch.setattr(otel, "_exporter", lambda: exporter)
    with RecordingTarget() as target:
        routes = [{"events": ["*"], "action": "fwd", "forward": target.url}]
        config = make_config(db_url, routes=routes, otel={"enabled": True})
        body, headers = delivery("evt_traced_1")
        async with running_inbox(config) as inbox:
            assert inbox.inbox.tracing.enabled
            answer = await client.post(
                inbox.url(), content=body, headers={**headers, "traceparent": PROVIDER_PARENT}
            )
            delivery_id = answer.json()["delivery_id"]
            await wait_for_status(inbox.store, delivery_id, "completed")
        (request,) = target.requests
    spans = {span.name: span for span in exporter.get_finished_spans()}
    assert {"hookinbox.receive", "hookinbox.reserve", "hookinbox.claim"} <= set(spans)
    receive, attempt, forward = (
        spans["hookinbox.receive"],
        spans["hookinbox.attempt"],
        spans["hookinbox.forward"],
    )
    trace_id = receive.context.trace_id
    assert f"{trace_id:032x}" == PROVIDER_TRACE  # continued from the provider's request
    assert receive.parent is not None and f"{receive.parent.span_id:016x}" == "00f067aa0ba902b7"
    assert spans["hookinbox.reserve"].parent.span_id == receive.context.span_id
    # Across the queue: the attempt is a child of the receipt, the forward of the attempt.
    assert attempt.context.trace_id == trace_id
    assert attempt.parent.span_id == receive.context.span_id
    assert forward.parent.span_id == attempt.context.span_id
    for span in (receive, attempt, forward):
        assert span.attributes["hookinbox.delivery_id"] == delivery_id
    assert receive.attributes["hookinbox.outcome"] == "accepted"
    assert attempt.attributes["hookinbox.outcome"] == "completed"
    assert forward.attributes["http.response.status_code"] == 200
    # The claim is the worker's own trace, linked to the job's.
    (link,) = spans["hookinbox.claim"].links
    assert link.context.trace_id == trace_id
    # The target continues the trace from the forward span.
    sent = request["headers"]["traceparent"]
    assert sent == f"00-{trace_id:032x}-{forward.context.span_id:016x}-01"
    assert json.loads(request["body"])["id"] == "evt_traced_1"


async def test_a_refusal_is_a_span_with_its_code(
    db_url: str, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    exporter = InMemorySpanExporter()
    monkeypatch.setattr(otel, "_exporter", lambda: exporter)
    config = make_config(db_url, otel={"enabled": True})
    body, headers = delivery("evt_traced_2")
    async with running_inbox(config) as inbox:
        answer = await client.post(inbox.url(), content=body + b" ", headers=headers)
        assert answer.status_code == 400
    (span,) = [s for s in exporter.get_finished_spans() if s.name == "hookinbox.receive"]
    assert span.attributes["hookinbox.outcome"] == "invalid_signature"
    assert f"{span.context.trace_id:032x}" != PROVIDER_TRACE  # no traceparent: a new trace
