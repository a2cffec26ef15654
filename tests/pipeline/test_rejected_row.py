"""One delivery with a value no store keeps never costs the deliveries sent with it a 503
(both stores): the edge refuses it before any store work (400), the others are answered as
if alone. (Should such a row reach the store anyway, the store isolates it in its batch:
tests/store/test_rejected_rows.py.)"""

from __future__ import annotations

import asyncio

import httpx

from tests.support.inbox import make_config, running_inbox
from tests.support.signing import delivery


async def test_one_bad_delivery_among_forty_concurrent_ones(
    db_url: str, client: httpx.AsyncClient
) -> None:
    good = [delivery(f"evt_ok_{n}") for n in range(40)]
    bad = delivery("evt_bad", event_type="\ud800")  # a lone surrogate: no store keeps it
    requests = [*good[:20], bad, *good[20:]]
    async with running_inbox(make_config(db_url), run_workers=False) as inbox:
        answers = await asyncio.gather(
            *(client.post(inbox.url(), content=body, headers=headers) for body, headers in requests)
        )
        refused = answers.pop(20)
        assert (refused.status_code, refused.json()) == (400, {"error": "malformed_json"})
        assert "retry-after" not in refused.headers
        assert [a.status_code for a in answers] == [200] * 40
        assert {a.json()["status"] for a in answers} == {"accepted"}
        assert (await inbox.store.count_rows())["deliveries"] == 40
