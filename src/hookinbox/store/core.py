"""The Store: one object per database, its lifecycle, and one attribute per concept.

``store.journal`` (reserve and read deliveries), ``store.queue`` (claim, settle, dead
letters), ``store.effects`` (the ledger), ``store.audit`` and ``store.sources`` (operator
actions, pause state), ``store.resources`` and ``store.outbox`` (tracked resources and
their notifications), ``store.reads`` (gauges, counts, reconciliation queries),
``store.retention`` (purges), ``store.partitions`` (PostgreSQL's payload, attempt and job
partitions), ``store.rejected`` (refused deliveries kept for a retry),
``store.notices`` (notices of dead letters, pauses, rejections and circuits, written to
the outbox), ``store.reviews`` (rejected transitions awaiting review),
``store.admin_sessions`` (admin sessions ended by a logout), ``store.destinations``
(token bucket, slots and circuit of each destination), ``store.receipts`` (webhook
answers per minute), ``store.erasure`` (a data subject's payloads, snippets and kept
refusals' bodies), ``store.sealed_rows`` (sealed values counted per key and
re-wrapped by ``hookinbox keys rotate``), ``store.catch_up`` (catch-up's cursor per
source and its pages). Each is written once over the
driver the URL picks; the journal and the queue also share the dialect's hot path.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from hookinbox.errors import StoreNotFound
from hookinbox.sealing import PLAINTEXT, Sealer
from hookinbox.store.admin_sessions import AdminSessions
from hookinbox.store.audit import Audit
from hookinbox.store.catch_up import CatchUpCursors
from hookinbox.store.destination_state import Destinations
from hookinbox.store.dialect import POSTGRES
from hookinbox.store.driver import Driver
from hookinbox.store.effects import Effects
from hookinbox.store.erasure import Erasure
from hookinbox.store.hot_path import HotPath
from hookinbox.store.hot_path_postgres import PostgresHotPath
from hookinbox.store.journal import Journal
from hookinbox.store.migrations import load_migrations
from hookinbox.store.notices import Notices
from hookinbox.store.outbox import Outbox
from hookinbox.store.partitions import Partitions
from hookinbox.store.queue import Queue
from hookinbox.store.reads import Reads
from hookinbox.store.receipts import ReceiptCounts
from hookinbox.store.rejected_deliveries import RejectedDeliveries
from hookinbox.store.retention import Retention
from hookinbox.store.reviews import TransitionReviews
from hookinbox.store.sealed_rows import SealedRows
from hookinbox.store.sources import SourceStates
from hookinbox.store.statements import load_statements
from hookinbox.store.tracked_resources import TrackedResources

_TABLES = ("deliveries", "jobs", "payloads", "effects", "attempts")
_SQL = load_statements("core")
_COUNT_ROWS = _SQL["count_rows"]
_STORE_CLOCK = _SQL["store_clock"]
_SCHEMA_VERSION = _SQL["schema_version"]

#: This host's clock, as :meth:`Store.clock_offset` reads it.
host_clock = time.time


@dataclass(frozen=True, slots=True)
class SchemaVersions:
    """The highest migration the store has had and the highest this hookinbox knows.

    A store ahead of the code was migrated by a newer hookinbox: a process of the
    version before keeps working on it through a rolling upgrade (each migration is
    written for that), but one further behind, or left behind after a rollback, may
    not, so it is said at start-up and ``hookinbox migrate`` refuses to call it up to
    date."""

    store: int
    code: int

    @property
    def store_is_newer(self) -> bool:
        return self.store > self.code


class Store:
    """What the receiver, the workers and the operator commands need from storage."""

    def __init__(self, driver: Driver, *, sealer: Sealer = PLAINTEXT) -> None:
        self._db = driver
        self.url = driver.url
        #: Seals payloads, rejected bodies and answer snippets as they are written, and
        #: opens them as they are read (``[encryption]``; the composition root builds
        #: it). A claimed job's body is handed over as stored: the worker opens it with
        #: this, so one job whose key is missing fails alone.
        self.sealer = sealer
        hot_path = PostgresHotPath(driver) if driver.dialect is POSTGRES else HotPath(driver)
        self.journal = Journal(driver, hot_path, sealer)
        self.queue = Queue(driver, hot_path, sealer)
        self.effects = Effects(driver)
        self.audit = Audit(driver)
        self.sources = SourceStates(driver)
        self.resources = TrackedResources(driver)
        self.outbox = Outbox(driver)
        self.reads = Reads(driver)
        self.receipts = ReceiptCounts(driver)
        self.retention = Retention(driver)
        self.partitions = Partitions(driver)
        self.rejected = RejectedDeliveries(driver, sealer)
        self.sealed_rows = SealedRows(driver, sealer)
        self.notices = Notices(driver)
        self.reviews = TransitionReviews(driver)
        self.admin_sessions = AdminSessions(driver)
        self.destinations = Destinations(driver)
        self.erasure = Erasure(driver)
        self.catch_up = CatchUpCursors(driver, sealer)

    async def open(
        self, *, migrate: bool = True, create: bool = True, make_dirs: bool = False
    ) -> None:
        """Connect, and apply pending migrations unless told not to.

        ``create=False`` (every operator command) opens only a store that exists and holds
        hookinbox's schema, else raises StoreNotFound: no SQLite file is made, no schema
        laid into an empty database. Pending migrations of an existing store still apply.
        A SQLite file whose directory does not exist is StoreNotFound unless ``make_dirs``
        (``hookinbox migrate --create``)."""
        await self._db.open(create=create, make_dirs=make_dirs)
        if not create and not await self._db.has_schema():
            await self._db.close()
            raise StoreNotFound("the database holds no hookinbox store (run `hookinbox migrate`)")
        if migrate:
            try:
                await self.migrate()
            except BaseException:
                # A store that could not be brought up to date is not left half open.
                await self._db.close()
                raise

    async def close(self) -> None:
        await self._db.close()

    async def migrate(self) -> list[str]:
        """Apply pending numbered migrations; return the names applied. On PostgreSQL,
        also make the payload partitions of the days ahead that are missing."""
        applied = await self._db.migrate()
        await self.partitions.create_ahead()
        return applied

    async def schema_versions(self) -> SchemaVersions:
        found = await self._db.row(_SCHEMA_VERSION)
        applied = int(found["version"]) if found and found["version"] is not None else 0
        known = max(m.version for m in load_migrations(self._db.migrations, self._db.dialect))
        return SchemaVersions(store=applied, code=known)

    async def ping(self) -> None:
        """Raise StoreUnavailable unless the store can commit now."""
        await self._db.ping()

    async def count_rows(self) -> dict[str, int]:
        """Row counts per table (deliveries, jobs, payloads, effects, attempts): for tests
        and ops."""
        found = await self._db.row(_COUNT_ROWS)
        assert found is not None
        return {table: int(found[table]) for table in _TABLES}

    async def clock_offset(self) -> tuple[float, float]:
        """How far the store's clock is ahead of this host's, in seconds (negative:
        behind), and the measure's uncertainty (half the round trip). The host's clock
        makes the time-ordered ids that ordered routes compare across processes."""
        before = host_clock()
        found = await self._db.row(_STORE_CLOCK)
        after = host_clock()
        assert found is not None
        store_now = self._db.decode_time(found["now"])
        assert store_now is not None
        return store_now.timestamp() - (before + after) / 2, (after - before) / 2
