"""Handlers the library tests name in their configs: typed payloads and services."""

from __future__ import annotations

from collections import Counter
from typing import Any

from pydantic import BaseModel
from typing_extensions import TypedDict

from hookinbox import Event, JobContext, SyncJobContext

SEEN: list[Any] = []


class Customer(BaseModel):
    id: str
    email: str


class InvoiceData(BaseModel):
    invoice_id: str
    amount_cents: int
    customer: Customer


class Invoice(BaseModel):
    id: str
    type: str
    data: InvoiceData


class Ping(TypedDict):
    id: str
    type: str


class Ledger:
    """A stand-in for an application's database: what a handler writes, per key."""

    def __init__(self) -> None:
        self.rows: Counter[str] = Counter()

    def add(self, key: str) -> dict[str, str]:
        self.rows[key] += 1
        return {"id": key}


async def typed_invoice(event: Event, ctx: JobContext, payload: Invoice, ledger: Ledger) -> None:
    SEEN.append(payload)
    await ctx.effect(f"invoice:{payload.data.invoice_id}", ledger.add)


def sync_ping(event: Event, ctx: SyncJobContext, payload: Ping, *, ledger: Ledger) -> None:
    SEEN.append(payload)
    ctx.effect(f"ping:{payload['id']}", ledger.add)
    assert ctx.services["ledger"] is ledger


async def raw_payload(event: Event, ctx: JobContext, payload: Any, label: str = "none") -> None:
    SEEN.append((payload, label))


async def wants_missing(event: Event, ctx: JobContext, mailer: object) -> None:
    """Asks for a service nobody gives."""


async def refuses(event: Event, ctx: JobContext) -> None:
    from hookinbox import PayloadInvalid

    raise PayloadInvalid()


def services() -> dict[str, Any]:
    """The ``[worker] services`` factory of a config."""
    return {"ledger": Ledger()}


def not_a_mapping() -> list[str]:
    return ["ledger"]


FLAKY: Counter[str] = Counter()


async def flaky(event: Event, ctx: JobContext) -> None:
    """Fails its first attempt per event."""
    FLAKY[event.event_id] += 1
    if FLAKY[event.event_id] == 1:
        from hookinbox import ActionError

        raise ActionError("first_attempt_fails")


class CallableHandler:
    """A handler that is an object: its ``__call__``'s signature is read."""

    async def __call__(self, event: Event, ctx: JobContext, payload: Ping) -> None:
        SEEN.append(payload)


callable_handler = CallableHandler()
