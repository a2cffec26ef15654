"""Slack's url_verification through the real receiver, on both stores: answered with the
challenge once the signature holds, and nothing journaled or queued either way."""

from __future__ import annotations

import json
import time

import httpx
from slack_sdk.signature import SignatureVerifier

from tests.support.inbox import make_config, running_inbox
from tests.support.signing import SECRET, SECRET_ENV, WRONG_SECRET

CHALLENGE = "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"


def slack_headers(secret: str, body: bytes, timestamp: int) -> dict[str, str]:
    """Signed by Slack's own library (slack_sdk), not by hookinbox's signer."""
    signature = SignatureVerifier(secret).generate_signature(timestamp=str(timestamp), body=body)
    assert signature is not None
    return {
        "content-type": "application/json",
        "x-slack-request-timestamp": str(timestamp),
        "x-slack-signature": signature,
    }


async def test_url_verification_is_answered_with_the_challenge_and_never_queued(
    db_url: str, client: httpx.AsyncClient
) -> None:
    config = make_config(db_url, source={"scheme": "slack", "secret_env": SECRET_ENV})
    body = json.dumps(
        {"token": "legacy-verification-token", "challenge": CHALLENGE, "type": "url_verification"}
    ).encode()
    async with running_inbox(config) as inbox:
        now = int(time.time())
        answer = await client.post(
            inbox.url(), content=body, headers=slack_headers(SECRET, body, now)
        )
        assert (answer.status_code, answer.json()) == (200, {"challenge": CHALLENGE})

        # The challenge is answered only after the signature check.
        forged = await client.post(
            inbox.url(), content=body, headers=slack_headers(WRONG_SECRET, body, now)
        )
        assert (forged.status_code, forged.json()) == (400, {"error": "invalid_signature"})
        stale = await client.post(
            inbox.url(), content=body, headers=slack_headers(SECRET, body, now - 3600)
        )
        assert (stale.status_code, stale.json()) == (400, {"error": "timestamp_out_of_tolerance"})

        counts = await inbox.store.count_rows()
        assert (counts["deliveries"], counts["jobs"], counts["payloads"]) == (0, 0, 0)
        assert await inbox.store.journal.list_deliveries(limit=10) == []
