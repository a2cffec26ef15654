"""The naive baseline: a webhook receiver written the obvious way.

Starlette; Standard Webhooks verification (HMAC-SHA256 over ``{id}.{ts}.{body}`` with the
``whsec_`` secret, ``v1,`` signatures, 300 s timestamp tolerance); then ONE asyncpg
transaction per request: INSERT the journal row (unique (source, event_id),
``ON CONFLICT DO NOTHING RETURNING``) and, when it was new, INSERT a job row. Answers 200
``accepted`` / ``duplicate`` only after the commit, 503 when the store fails.

This is correct, and it is what most receivers look like. Its cost is the per-request
round trips (BEGIN, INSERT, INSERT, COMMIT, plus the pool's connection reset), which is
what hookinbox's batching removes.

Environment: ``NAIVE_DSN`` (PostgreSQL DSN of its own database; tables are created on
startup) and ``BENCH_SECRET`` (a ``whsec_...`` secret).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

TOLERANCE_S = 300
MAX_BODY = 1024 * 1024

SCHEMA = """
CREATE TABLE IF NOT EXISTS naive_journal (
    id          bigserial PRIMARY KEY,
    source      text        NOT NULL,
    event_id    text        NOT NULL,
    event_type  text,
    body_sha256 bytea       NOT NULL,
    payload     bytea,
    received_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (source, event_id)
);
CREATE TABLE IF NOT EXISTS naive_jobs (
    id              bigserial PRIMARY KEY,
    delivery_id     bigint      NOT NULL REFERENCES naive_journal (id),
    action          text        NOT NULL,
    status          text        NOT NULL DEFAULT 'accepted',
    attempts        integer     NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (delivery_id, action)
);
"""

INSERT_JOURNAL = """
INSERT INTO naive_journal (source, event_id, event_type, body_sha256, payload)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (source, event_id) DO NOTHING
RETURNING id
"""
INSERT_JOB = "INSERT INTO naive_jobs (delivery_id, action) VALUES ($1, $2)"


def _secret_key() -> bytes:
    secret = os.environ["BENCH_SECRET"]
    if secret.startswith("whsec_"):
        secret = secret[len("whsec_") :]
    return base64.b64decode(secret)


KEY = _secret_key()


def verify(headers: dict[str, str], body: bytes) -> str | None:
    """Return an error code, or None when the Standard Webhooks signature holds."""
    msg_id = headers.get("webhook-id")
    ts = headers.get("webhook-timestamp")
    sigs = headers.get("webhook-signature")
    if not msg_id or not ts or not sigs:
        return "missing_headers"
    try:
        ts_int = int(ts)
    except ValueError:
        return "bad_timestamp"
    if abs(time.time() - ts_int) > TOLERANCE_S:
        return "timestamp_out_of_tolerance"
    signed = msg_id.encode() + b"." + ts.encode() + b"." + body
    expected = base64.b64encode(hmac.new(KEY, signed, hashlib.sha256).digest())
    for part in sigs.split():
        version, _, sig = part.partition(",")
        if version == "v1" and hmac.compare_digest(sig.encode(), expected):
            return None
    return "bad_signature"


@asynccontextmanager
async def lifespan(app: Starlette) -> AsyncIterator[None]:
    pool = await asyncpg.create_pool(os.environ["NAIVE_DSN"], min_size=10, max_size=10)
    async with pool.acquire() as conn:
        await conn.execute(SCHEMA)
    app.state.pool = pool
    try:
        yield
    finally:
        await pool.close()


async def receive(request: Request) -> Response:
    source = request.path_params["source"]
    body = await request.body()
    if len(body) > MAX_BODY:
        return JSONResponse({"error": "too_large"}, status_code=413)
    error = verify(request.headers, body)  # type: ignore[arg-type]
    if error:
        return JSONResponse({"error": error}, status_code=400)
    event_id = request.headers["webhook-id"]
    try:
        event_type = json.loads(body).get("type")
    except (ValueError, AttributeError):
        return JSONResponse({"error": "bad_json"}, status_code=400)
    digest = hashlib.sha256(body).digest()
    pool: asyncpg.Pool = request.app.state.pool
    try:
        async with pool.acquire() as conn, conn.transaction():
            delivery_id = await conn.fetchval(
                INSERT_JOURNAL, source, event_id, event_type, digest, body
            )
            if delivery_id is not None:
                await conn.execute(INSERT_JOB, delivery_id, "noop")
    except (OSError, asyncpg.PostgresError):
        return JSONResponse(
            {"error": "store_unavailable"}, status_code=503, headers={"Retry-After": "5"}
        )
    status = "accepted" if delivery_id is not None else "duplicate"
    return JSONResponse({"status": status, "event_id": event_id})


async def healthz(request: Request) -> Response:
    return Response(b"ok", media_type="text/plain")


app = Starlette(
    routes=[
        Route("/webhooks/{source}", receive, methods=["POST"]),
        Route("/healthz", healthz, methods=["GET"]),
    ],
    lifespan=lifespan,
)
