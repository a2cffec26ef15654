"""Each line logged while a delivery is answered carries its request id: the caller's
``X-Request-Id`` when it looks like an id, else one of ours; no line after it does.

Under structlog's default configuration (what a library user who configures nothing
gets) and not hookinbox's own, so a user's ``merge_contextvars`` finds the id as it
found the bound value before.
"""

from __future__ import annotations

import re

import httpx
import pytest

from hookinbox.logs import get_logger
from tests.support.inbox import make_config, running_inbox
from tests.support.signing import delivery


def receipt_request_id(output: str, event_id: str) -> str | None:
    line = next(ln for ln in output.splitlines() if "receipt" in ln and event_id in ln)
    found = re.search(r"request_id=(\S+)", line)
    return found.group(1) if found else None


async def test_the_receipt_line_carries_the_request_id_and_no_later_line_does(
    sqlite_url: str, client: httpx.AsyncClient, capsys: pytest.CaptureFixture[str]
) -> None:
    async with running_inbox(make_config(sqlite_url), run_workers=False) as inbox:
        body, headers = delivery("evt_offered_id")
        answer = await client.post(
            inbox.url(), content=body, headers={**headers, "x-request-id": "req-42.a:b"}
        )
        assert answer.status_code == 200
        body, headers = delivery("evt_free_text_id")
        answer = await client.post(
            inbox.url(), content=body, headers={**headers, "x-request-id": "not an id"}
        )
        assert answer.status_code == 200
        body, headers = delivery("evt_no_id")
        assert (await client.post(inbox.url(), content=body, headers=headers)).status_code == 200
    get_logger("hookinbox.test").info("after_the_requests")
    output = capsys.readouterr().out
    assert receipt_request_id(output, "evt_offered_id") == "req-42.a:b"
    generated = receipt_request_id(output, "evt_free_text_id")
    assert generated and generated != "not" and "not an id" not in output
    assert receipt_request_id(output, "evt_no_id") not in (None, generated)
    after = next(ln for ln in output.splitlines() if "after_the_requests" in ln)
    assert "request_id" not in after
