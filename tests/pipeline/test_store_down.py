"""The store goes away mid-run: the receiver answers 503, never 2xx, and nothing is half
written; once it is back, the same delivery is accepted. Both stores."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.database import pg_address, pg_schema_url, pg_url_via
from tests.support.inbox import make_config, running_inbox
from tests.support.proxy import CuttableProxy
from tests.support.signing import delivery


@pytest.fixture
def cuttable_store(backend: str, tmp_path: Path) -> Iterator[tuple[str, object]]:
    """A store URL and a switch: ``cut()`` takes the store away, ``restore()`` gives it back."""
    if backend == "postgres":
        proxy = CuttableProxy(*pg_address())
        try:
            with pg_schema_url(pg_url_via("127.0.0.1", proxy.port)) as url:
                yield url, proxy
        finally:
            proxy.close()
    else:
        path = tmp_path / "down.db"

        class Lock:
            """Another process holds SQLite's write lock for as long as it likes."""

            conn: sqlite3.Connection | None = None

            def cut(self) -> None:
                self.conn = sqlite3.connect(path, isolation_level=None)
                self.conn.execute("BEGIN EXCLUSIVE")

            def restore(self) -> None:
                assert self.conn is not None
                self.conn.execute("ROLLBACK")
                self.conn.close()

        yield f"sqlite:///{path}?busy_timeout_ms=300", Lock()


async def test_store_down_answers_503_and_the_same_delivery_is_accepted_after(
    cuttable_store: tuple[str, object], client: httpx.AsyncClient
) -> None:
    url, switch = cuttable_store
    config = make_config(url)
    before, before_headers = delivery("evt_before")
    during, during_headers = delivery("evt_during")
    async with running_inbox(config) as inbox:
        answer = await client.post(inbox.url(), content=before, headers=before_headers)
        assert answer.json()["status"] == "accepted"

        switch.cut()  # type: ignore[attr-defined]
        try:
            for _ in range(3):
                answer = await client.post(inbox.url(), content=during, headers=during_headers)
                assert answer.status_code == 503
                assert answer.json() == {"error": "store_unavailable"}
                assert answer.headers["retry-after"].isdigit()
            ready = await client.get(f"{inbox.base_url}/readyz")
            assert ready.status_code == 503
        finally:
            switch.restore()  # type: ignore[attr-defined]

        answer = await client.post(inbox.url(), content=during, headers=during_headers)
        assert answer.status_code == 200
        assert answer.json()["status"] == "accepted"
        again = await client.post(inbox.url(), content=during, headers=during_headers)
        assert again.json()["status"] == "duplicate"
        found = await inbox.store.journal.get_delivery("evt_during")
        counts = await inbox.store.count_rows()
    assert found is not None
    assert found.delivery_count == 2  # the refused attempts wrote nothing
    assert counts["deliveries"] == 2
