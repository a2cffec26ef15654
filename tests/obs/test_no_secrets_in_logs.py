"""A canary: nothing of a payload, no secret and no Authorization value ever reaches the
output of a real ``hookinbox serve --log-level debug``, whatever happens to the delivery."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import httpx
import pytest

from tests.support.configs import write_config
from tests.support.processes import HookinboxProcess, free_port, hookinbox_env, wait_until
from tests.support.signing import SECRET, delivery, event_body, signed

HANDLERS = "tests.support.handlers"


@pytest.mark.slow
@pytest.mark.parametrize("log_format", ["json", "console"])
def test_no_payload_secret_or_authorization_in_any_output_line(
    db_url: str, tmp_path: Path, log_format: str
) -> None:
    canary = f"CANARY-{uuid.uuid4().hex}"
    authorization = f"Bearer AUTH-{uuid.uuid4().hex}"
    refused = free_port()  # nothing listens there: every forward is refused
    port = free_port()
    routes = [
        {"events": ["crm.lead.created"], "action": "count", "handler": f"{HANDLERS}:count"},
        {"events": ["crm.fail"], "action": "fail", "handler": f"{HANDLERS}:always_fails"},
        {
            "events": ["crm.forward"],
            "action": "forward",
            "forward": f"http://127.0.0.1:{refused}/in",
        },
    ]
    config = write_config(
        tmp_path / "hookinbox.toml",
        db_url,
        routes=routes,
        port=port,
        worker={"max_attempts": 2, "backoff_base_seconds": 0.1, "backoff_max_seconds": 0.2},
    )
    server = HookinboxProcess(
        ["serve", "--config", str(config), "--log-level", "debug", "--log-format", log_format],
        hookinbox_env(),
        tmp_path / "serve.log",
    ).start()
    base = f"http://127.0.0.1:{port}"
    data = {"note": canary, "leaked_secret": SECRET, "authorization": authorization}
    try:
        server.wait_healthy(base)
        with httpx.Client(timeout=10, headers={"authorization": authorization}) as client:

            def post(body: bytes, headers: dict[str, str]) -> httpx.Response:
                return client.post(f"{base}/webhooks/test", content=body, headers=headers)

            assert post(*delivery("evt_ok", **data)).json()["status"] == "accepted"
            assert post(*delivery("evt_ok", **data)).json()["status"] == "duplicate"
            conflicting = signed(event_body("evt_ok", other=canary, **data), event_id="evt_ok")
            assert post(*conflicting).json()["conflict"] is True
            body, headers = delivery("evt_tampered", **data)
            assert post(body.replace(b"CANARY", b"canary"), headers).status_code == 400
            assert post(*delivery("evt_raises", "crm.fail", **data)).status_code == 200
            assert post(*delivery("evt_forward", "crm.forward", **data)).status_code == 200
            assert (
                post(b'{"not": "signed", "x": "' + canary.encode() + b'"}', {}).status_code == 400
            )

        def dead_lettered() -> bool:
            return server.output().count("job_failed") >= 2

        wait_until(dead_lettered, 30, "the raising handler and the refused forward to fail")
        time.sleep(0.3)
    finally:
        server.stop()
    output = server.output()
    lines = [line for line in output.splitlines() if line.strip()]
    assert any("receipt" in line for line in lines), output[-2000:]
    assert sum("job_retry" in line for line in lines) >= 2
    needles = (canary, canary.removeprefix("CANARY-"), SECRET, SECRET.removeprefix("whsec_"))
    for needle in (*needles, authorization, "AUTH-"):
        leaking = [line for line in lines if needle in line]
        assert not leaking, f"{needle[:12]}... appears in: {leaking[:3]}"
    if log_format == "json":
        records = [json.loads(line) for line in lines]
        receipts = [r for r in records if r.get("event") == "receipt"]
        assert {r["outcome"] for r in receipts} == {"accepted", "duplicate"}
        assert all(r.get("request_id") and r.get("delivery_id") for r in receipts)
        attempts = [
            r for r in records if r.get("event") in {"job_completed", "job_retry", "job_failed"}
        ]
        assert all(r.get("job_id") and r.get("delivery_id") for r in attempts)
        assert {r["error"] for r in attempts if r["event"] == "job_failed"} == {
            "crm_unavailable",
            "connect_error",
        }
