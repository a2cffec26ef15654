"""The handler: a typed Stripe payload and the host's database, asked for by name."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from shop_db import ShopDb

from hookinbox import Event, JobContext


class Invoice(BaseModel):
    id: str
    customer: str
    amount_paid: int


class InvoiceData(BaseModel):
    object: Invoice


class InvoicePaid(BaseModel):
    """Stripe's ``invoice.paid`` event (the fields this handler reads). A body without
    them is a dead letter ``payload_invalid`` at once, never retried."""

    id: str
    type: str
    data: InvoiceData


async def mark_order_paid(event: Event, ctx: JobContext, payload: InvoicePaid, db: ShopDb) -> None:
    invoice = payload.data.object

    def record(key: str) -> dict[str, Any]:
        with db.session() as session:
            session.execute(
                "INSERT INTO orders VALUES (?, ?, ?, ?) ON CONFLICT (invoice) DO NOTHING",
                (invoice.id, invoice.customer, invoice.amount_paid, event.event_id),
            )
        return {"id": invoice.id}

    await ctx.effect(f"order-paid:{invoice.id}", record)
