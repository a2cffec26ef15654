"""Fixtures shared by the whole suite. Every store test runs on SQLite AND PostgreSQL."""

from __future__ import annotations

import asyncio
import contextlib
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import asyncpg
import httpx
import pytest
import uvicorn

from hookinbox.app import Inbox
from hookinbox.config import Config, config_from_mapping
from hookinbox.store import Store, open_store_for
from tests.support import handlers
from tests.support.processes import free_port
from tests.support.signing import OLD_SECRET, SECRET, SECRET_ENV

PG_URL = os.environ.get("HOOKINBOX_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")
BACKENDS = ["sqlite", "postgres"]


def pg_address() -> tuple[str, int]:
    parts = urlsplit(PG_URL)
    return parts.hostname or "127.0.0.1", parts.port or 5432


async def _pg_exec(sql: str) -> None:
    conn = await asyncpg.connect(PG_URL, timeout=10)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


def _pg_problem() -> str | None:
    """Why the tests' PostgreSQL cannot be used, in one line; None when it can."""
    where = f"{pg_address()[0]}:{pg_address()[1]}"
    try:
        asyncio.run(_pg_exec("SELECT 1"))
    except (OSError, TimeoutError) as exc:
        return f"PostgreSQL at {where} is not reachable ({type(exc).__name__})"
    except asyncpg.PostgresError as exc:
        # "role ... does not exist", "database ... does not exist", a bad password: the
        # server's own message names the role or database, never the password.
        return f"PostgreSQL at {where} refused the test connection: {exc}"
    return None


def pytest_sessionstart(session: pytest.Session) -> None:
    """Check the PostgreSQL the suite needs once, before any test: a missing role or
    database is one clear line, not a traceback per test. Skipped in xdist workers (the
    controller has checked)."""
    if hasattr(session.config, "workerinput"):
        return
    problem = _pg_problem()
    if problem is not None:
        pytest.exit(
            f"{problem}; the suite needs it (HOOKINBOX_TEST_PG_URL selects another server, "
            "role and database; `make postgres` starts the local one)",
            returncode=3,
        )


@contextlib.contextmanager
def pg_schema_url(base_url: str = PG_URL) -> Iterator[str]:
    """A fresh schema for one test, dropped afterwards; the URL selects it."""
    schema = f"hbt_{uuid.uuid4().hex[:16]}"
    asyncio.run(_pg_exec(f"CREATE SCHEMA {schema}"))
    try:
        yield f"{base_url}?search_path={schema}"
    finally:
        asyncio.run(_pg_exec(f"DROP SCHEMA IF EXISTS {schema} CASCADE"))


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def db_url(backend: str, tmp_path: Path) -> Iterator[str]:
    if backend == "sqlite":
        yield f"sqlite:///{tmp_path}/hookinbox.db"
    else:
        with pg_schema_url() as url:
            yield url


@pytest.fixture
async def store(db_url: str) -> AsyncIterator[Store]:
    opened = open_store_for(db_url)
    await opened.open()
    try:
        yield opened
    finally:
        await opened.close()


@pytest.fixture(autouse=True)
def _secrets(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv(SECRET_ENV, SECRET)
    handlers.reset()
    yield


def make_config(
    db_url: str, *, routes: list[dict[str, Any]] | None = None, **sections: Any
) -> Config:
    """One source named ``test`` (Standard Webhooks) with the given routes."""
    source = {"scheme": "standard-webhooks", "secret_env": SECRET_ENV}
    source.update(sections.pop("source", {}))
    data: dict[str, Any] = {
        "database": db_url,
        "sources": {
            "test": {
                **source,
                "routes": routes
                if routes is not None
                else [
                    {"events": ["*"], "action": "count", "handler": "tests.support.handlers:count"}
                ],
            }
        },
        "worker": {
            "concurrency": 4,
            "max_attempts": 3,
            "backoff_base_seconds": 0.2,
            "backoff_max_seconds": 1,
            "lease_seconds": 5,
            "poll_interval_seconds": 0.2,
            **sections.pop("worker", {}),
        },
        **sections,
    }
    return config_from_mapping(data)


class RunningInbox:
    def __init__(self, inbox: Inbox, base_url: str) -> None:
        self.inbox = inbox
        self.base_url = base_url
        self.store = inbox.store

    def url(self, source: str = "test") -> str:
        return f"{self.base_url}/webhooks/{source}"


@contextlib.asynccontextmanager
async def serving(app: Any) -> AsyncIterator[str]:
    """``app`` under a real uvicorn socket server, inside the test's event loop; yields
    its base URL."""
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    )
    task = asyncio.create_task(server.serve())
    try:
        async with asyncio.timeout(15):
            while not server.started:
                if task.done():
                    task.result()
                await asyncio.sleep(0.02)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        async with asyncio.timeout(20):
            await task


@contextlib.asynccontextmanager
async def running_inbox(config: Config, *, run_workers: bool = True) -> AsyncIterator[RunningInbox]:
    """The real app under a real uvicorn socket server, inside the test's event loop."""
    inbox = Inbox(config, run_workers=run_workers)
    async with serving(inbox.app) as base_url:
        yield RunningInbox(inbox, base_url)


async def wait_for(predicate: Any, timeout: float, what: str, step: float = 0.05) -> None:
    """Await until ``await predicate()`` is truthy, at most ``timeout`` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        if await predicate():
            return
        await asyncio.sleep(step)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


async def wait_for_status(store: Store, ref: str, status: str, timeout: float = 15) -> None:
    """Await until the delivery ``ref`` (event or delivery id) has ``status``."""

    async def reached() -> bool:
        found = await store.journal.get_delivery(ref)
        return found is not None and found.status == status

    await wait_for(reached, timeout, f"{ref} to be {status}")


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=20, limits=httpx.Limits(max_connections=100)) as c:
        yield c


__all__ = ["OLD_SECRET", "make_config", "running_inbox", "wait_for"]
