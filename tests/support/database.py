"""The tests' PostgreSQL: the one place its URL is read, and a fresh schema per test.

``HOOKINBOX_TEST_PG_URL`` selects the server, role and database (default: the local
server, database ``test``). Outside CI a suite run without a reachable PostgreSQL skips
the PostgreSQL half with one line naming why; in CI (``CI`` set, as ``.ci/run`` does) it
stops the run instead, so a missing server can never pass as green.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import sqlite3
import uuid
from collections.abc import AsyncIterator, Iterator
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest

PG_URL = os.environ.get("HOOKINBOX_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")


def in_ci() -> bool:
    return bool(os.environ.get("CI"))


def pg_address() -> tuple[str, int]:
    parts = urlsplit(PG_URL)
    return parts.hostname or "127.0.0.1", parts.port or 5432


def pg_url_via(host: str, port: int) -> str:
    """The tests' database URL reached through another address (a proxy in front of it)."""
    parts = urlsplit(PG_URL)
    credentials = parts.netloc.rpartition("@")[0]
    netloc = f"{credentials}@{host}:{port}" if credentials else f"{host}:{port}"
    return urlunsplit(parts._replace(netloc=netloc))


async def _pg_exec(sql: str, base_url: str = PG_URL) -> None:
    conn = await asyncpg.connect(base_url, timeout=10)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


@functools.cache
def pg_problem() -> str | None:
    """Why the tests' PostgreSQL cannot be used, in one line; None when it can."""
    where = "{}:{}".format(*pg_address())
    try:
        asyncio.run(_pg_exec("SELECT 1"))
    except (OSError, TimeoutError) as exc:
        return f"PostgreSQL at {where} is not reachable ({type(exc).__name__})"
    except asyncpg.PostgresError as exc:
        # "role ... does not exist", "database ... does not exist", a bad password: the
        # server's own message names the role or database, never the password.
        return f"PostgreSQL at {where} refused the test connection: {exc}"
    return None


def require_pg() -> None:
    """Skip the calling test when the tests' PostgreSQL cannot be used (never in CI)."""
    problem = pg_problem()
    if problem is not None:
        pytest.skip(f"{problem}; set HOOKINBOX_TEST_PG_URL or run `make postgres`")


@contextlib.contextmanager
def pg_schema_url(base_url: str = PG_URL) -> Iterator[str]:
    """A fresh schema for one test, dropped afterwards; the URL selects it."""
    require_pg()
    schema = f"hbt_{uuid.uuid4().hex[:16]}"
    asyncio.run(_pg_exec(f"CREATE SCHEMA {schema}"))
    try:
        yield f"{base_url}?search_path={schema}"
    finally:
        asyncio.run(_pg_exec(f"DROP SCHEMA IF EXISTS {schema} CASCADE"))


@contextlib.asynccontextmanager
async def pg_session(url: str) -> AsyncIterator[asyncpg.Connection]:
    """A plain connection to the tests' PostgreSQL (a ``pg_schema_url`` selects its schema)."""
    conn = await asyncpg.connect(url)
    try:
        yield conn
    finally:
        await conn.close()


async def raw_payload_body(db_url: str, delivery_id: str) -> bytes:
    """The payload's bytes as stored, read with plain SQL."""
    if db_url.startswith("sqlite"):
        with sqlite3.connect(db_url.removeprefix("sqlite:///")) as conn:
            (found,) = conn.execute(
                "SELECT body FROM payloads WHERE delivery_id = ?", (delivery_id,)
            ).fetchone()
        return bytes(found)
    base, _, query = db_url.partition("?")
    schema = query.removeprefix("search_path=")
    conn = await asyncpg.connect(base)
    try:
        return bytes(
            await conn.fetchval(
                f"SELECT body FROM {schema}.payloads WHERE delivery_id = $1",
                delivery_id,
            )
        )
    finally:
        await conn.close()
