"""A FastAPI application with hookinbox mounted at /hooks.

    uvicorn app:app            (from examples/fastapi; STRIPE_WEBHOOK_SECRET set)

- the inbox is mounted like any ASGI app: ``app.mount("/hooks", inbox.app)``, so Stripe
  posts to ``/hooks/webhooks/stripe``;
- a mounted app's lifespan is not run by FastAPI, so the host's lifespan runs the inbox's
  inside its own (store, workers and outbox relay start after the host's resources and
  stop before them);
- the host's database reaches the handler by name: ``Inbox(config, services={"db": db})``
  and ``async def mark_order_paid(event, ctx, payload: InvoicePaid, db: ShopDb)``.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from shop_db import ShopDb

from hookinbox import Inbox, load_config

HERE = Path(__file__).resolve().parent

config = load_config(HERE / "hookinbox.toml")
if os.environ.get("EXAMPLE_DATABASE"):
    config = config.model_copy(update={"database": os.environ["EXAMPLE_DATABASE"]})
db = ShopDb(os.environ.get("SHOP_DB", str(HERE / "shop.db")))
inbox = Inbox(config, services={"db": db})


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    db.create_schema()  # the host's own start-up first
    async with inbox.lifespan(app):
        yield


app = FastAPI(title="shop", lifespan=lifespan)
app.mount("/hooks", inbox.app)


@app.get("/orders")
def list_orders() -> list[dict[str, Any]]:
    return db.orders()
