"""Fixtures shared by the whole suite. Every store test runs on SQLite AND PostgreSQL.

Only fixtures and hooks live here; helpers a test module calls are imported from
``tests.support``. A test of something no store changes (admin access, deploy files, the
browser) takes ``sqlite_url`` and runs once; a test of the store's behaviour takes
``db_url`` (or ``store``) and runs on both.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from hookinbox.store import Store, open_store_for
from tests.support import handlers
from tests.support.database import in_ci, pg_problem, pg_schema_url
from tests.support.signing import SECRET, SECRET_ENV

BACKENDS = ["sqlite", "postgres"]


def pytest_sessionstart(session: pytest.Session) -> None:
    """In CI, check the PostgreSQL the suite needs once, before any test: a missing role or
    database stops the run with one clear line (not a skip, not a traceback per test).
    Skipped in xdist workers (the controller has checked). Outside CI the PostgreSQL
    tests skip instead, with the same line."""
    if hasattr(session.config, "workerinput") or not in_ci():
        return
    problem = pg_problem()
    if problem is not None:
        pytest.exit(
            f"{problem}; the suite needs it (HOOKINBOX_TEST_PG_URL selects another server, "
            "role and database; `make postgres` starts the local one)",
            returncode=3,
        )


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
def sqlite_url(tmp_path: Path) -> str:
    """A store for tests whose subject no store changes: they run once."""
    return f"sqlite:///{tmp_path}/hookinbox.db"


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


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=20, limits=httpx.Limits(max_connections=100)) as c:
        yield c
