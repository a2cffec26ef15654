"""Deliveries signed by the official Standard Webhooks library, not by our own signer."""

from __future__ import annotations

import base64
import json
import time
import uuid
from datetime import UTC, datetime
from typing import Any

from standardwebhooks.webhooks import Webhook

SECRET = "whsec_" + base64.b64encode(b"hookinbox-test-secret-0123456789").decode()
OLD_SECRET = "whsec_" + base64.b64encode(b"hookinbox-older-secret-987654321").decode()
WRONG_SECRET = "whsec_" + base64.b64encode(b"somebody-else-secret-0000000000").decode()
SECRET_ENV = "HB_TEST_SECRET"


def event_body(event_id: str, event_type: str = "crm.lead.created", **data: Any) -> bytes:
    return json.dumps(
        {"object": "event", "id": event_id, "type": event_type, "created_at": 1, "data": data}
    ).encode()


def signed(
    body: bytes,
    *,
    event_id: str | None = None,
    secret: str = SECRET,
    timestamp: float | None = None,
) -> tuple[bytes, dict[str, str]]:
    """``(body, headers)`` as a Standard Webhooks sender would send them."""
    msg_id = event_id or f"msg_{uuid.uuid4().hex}"
    stamp = int(time.time() if timestamp is None else timestamp)
    signature = Webhook(secret).sign(msg_id, datetime.fromtimestamp(stamp, UTC), body.decode())
    return body, {
        "webhook-id": msg_id,
        "webhook-timestamp": str(stamp),
        "webhook-signature": signature,
        "content-type": "application/json",
    }


def delivery(
    event_id: str, event_type: str = "crm.lead.created", **kw: Any
) -> tuple[bytes, dict[str, str]]:
    """A signed delivery whose webhook-id and body id are both ``event_id``."""
    secret = kw.pop("secret", SECRET)
    timestamp = kw.pop("timestamp", None)
    return signed(
        event_body(event_id, event_type, **kw),
        event_id=event_id,
        secret=secret,
        timestamp=timestamp,
    )
