"""PostgreSQL's reservations run on connections the driver keeps between batches instead
of taking one from the pool each time (``PostgresDriver.run_held``). Kept connections
must behave as pooled ones did: one the server ended is replaced, and closing the store
gives them all back, so it closes at once."""

from __future__ import annotations

import asyncio
import time
import uuid

import asyncpg

from hookinbox.errors import StoreUnavailable
from hookinbox.store import Reservation, open_store_for
from tests.store.test_contract import new_delivery
from tests.support.database import PG_URL, pg_schema_url


async def _end_connections(application_name: str) -> None:
    """End every server connection of one store, and wait until the server has (the
    store's listener may already have connected again: only the ended ones count)."""
    conn = await asyncpg.connect(PG_URL, timeout=10)
    try:
        ended = await conn.fetchval(
            "SELECT array_agg(pid) FROM pg_stat_activity WHERE application_name = $1",
            application_name,
        )
        assert ended, "the store had no connection to end"
        await conn.execute("SELECT pg_terminate_backend(p) FROM unnest($1::int[]) p", ended)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            left = await conn.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE pid = ANY($1::int[])", ended
            )
            if not left:
                return
            await asyncio.sleep(0.01)
        raise AssertionError("the server did not end the store's connections")
    finally:
        await conn.close()


async def _reserve_until_answered(store: object, event_id: str) -> tuple[Reservation, int]:
    """A provider's retries: the reservation's answer and how many 503s came first."""
    refused = 0
    while True:
        try:
            (answer,) = await store.journal.reserve_deliveries([new_delivery(event_id)])  # type: ignore[attr-defined]
        except StoreUnavailable:
            refused += 1
            assert refused <= 1, "a second refusal: the ended connection was kept"
            continue
        assert isinstance(answer, Reservation)
        return answer, refused


def test_an_ended_connection_is_replaced_and_closing_gives_the_kept_ones_back() -> None:
    name = f"held_{uuid.uuid4().hex[:12]}"
    with pg_schema_url() as url:

        async def scenario() -> None:
            store = open_store_for(f"{url}&application_name={name}")
            await store.open()
            # Four batches at once: the driver keeps up to four connections.
            first = await asyncio.gather(
                *(store.journal.reserve_deliveries([new_delivery(f"e{i}")]) for i in range(4))
            )
            assert [a.outcome for (a,) in first] == ["accepted"] * 4  # type: ignore[union-attr]

            await _end_connections(name)
            # At most the one batch already on an ended connection is answered 503 (as
            # with a pooled connection the server ended); the next is answered.
            answer, _ = await _reserve_until_answered(store, "after")
            assert answer.outcome == "accepted"
            again, refused = await _reserve_until_answered(store, "after")
            assert (again.outcome, refused) == ("duplicate", 0)

            started = time.monotonic()
            await store.close()
            # The pool waits for every connection to come back (up to 5 s, then cuts them).
            assert time.monotonic() - started < 3

        asyncio.run(scenario())
