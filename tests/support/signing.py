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


def signed_bytes(
    body: bytes,
    *,
    event_id: str | bytes = "msg_edge",
    stamp: str | None = None,
    secret: str = SECRET,
) -> tuple[bytes, dict[str, str | bytes]]:
    """Any bytes, signed as hookinbox verifies them, with any ``webhook-timestamp`` text:
    for deliveries whose only fault is past the signature (a body, an id, a type).

    An id given as bytes is sent as those bytes; hookinbox reads header bytes as
    ISO-8859-1 and signs the id as UTF-8 text, and so does this."""
    from hookinbox.verify.standard_webhooks import decode_secret, signature_of

    raw_id = event_id if isinstance(event_id, bytes) else event_id.encode()
    stamp = str(int(time.time())) if stamp is None else stamp
    signature = signature_of(decode_secret(secret), raw_id.decode("latin-1"), stamp, body)
    return body, {
        "webhook-id": raw_id,
        "webhook-timestamp": stamp,
        "webhook-signature": f"v1,{signature}",
        "content-type": "application/json",
    }
