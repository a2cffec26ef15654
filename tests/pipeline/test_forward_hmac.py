"""Issue 12, item 8: a forward from an ``hmac`` source carries that source's signature
headers (the ones its ``[sources.NAME.hmac]`` names), as the bytes they came as, so the
target can check the signature again over the raw body, as it can for the fixed
providers' prefixes. Both stores."""

from __future__ import annotations

import hashlib
import hmac
import json
import time

import httpx

from tests.support.inbox import make_config, running_inbox
from tests.support.signing import SECRET
from tests.support.target import RecordingTarget
from tests.support.waiting import wait_for_status


async def test_a_forward_from_an_hmac_source_carries_its_signature_headers(
    db_url: str, client: httpx.AsyncClient
) -> None:
    source = {
        "scheme": "hmac",
        "hmac": {
            "header": "X-Acme-Signature",
            "prefix": "sha256=",
            "timestamp_header": "X-Acme-Timestamp",
            "signed_content": "{timestamp}.{body}",
            "id_header": "X-Acme-Delivery",
        },
    }
    body = json.dumps({"type": "order.paid", "amount": 5}).encode()
    stamp = str(int(time.time()))
    digest = hmac.new(SECRET.encode(), f"{stamp}.".encode() + body, hashlib.sha256).hexdigest()
    headers = {
        "content-type": "application/json",
        "x-acme-signature": f"sha256={digest}",
        "x-acme-timestamp": stamp,
        "x-acme-delivery": "del_42",
        "x-acme-unrelated": "not passed on",
    }
    with RecordingTarget() as target:
        route = {"events": ["*"], "action": "relay", "forward": target.url}
        config = make_config(db_url, routes=[route], source=source)
        async with running_inbox(config) as inbox:
            answer = await client.post(inbox.url(), content=body, headers=headers)
            assert answer.status_code == 200, answer.text
            await wait_for_status(inbox.store, "del_42", "completed")
    (request,) = target.requests
    sent = request["headers"]
    assert request["body"] == body
    for name in ("x-acme-signature", "x-acme-timestamp", "x-acme-delivery"):
        assert sent[name] == headers[name]
    assert "x-acme-unrelated" not in sent
    # The target can verify it again with the shared secret.
    again = hmac.new(
        SECRET.encode(), f"{sent['x-acme-timestamp']}.".encode() + request["body"], hashlib.sha256
    )
    assert sent["x-acme-signature"] == f"sha256={again.hexdigest()}"
