"""Signed load from clients that retry like a provider.

Each client sends new events at its share of the rate, with at most a few deliveries in
flight. A delivery is retried, with the SAME id and body and a fresh signature, on a
connection error, a timeout, a 5xx or a 429, with exponential backoff and jitter (and at
least the ``Retry-After`` the answer asks for), until a 2xx ("acknowledged") or a bound:
``max_attempts_per_id`` attempts, ``give_up_seconds`` for one id, or the end of the settle
window after the load. A share of sends are deliberate duplicates: a later redelivery of an
id already sent, and new ids sent twice at once.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections import Counter
from dataclasses import dataclass, field

import httpx

from .plan import Plan
from .signing import Signer

RETRYABLE_STATUSES = frozenset({429}) | frozenset(range(500, 600))


@dataclass(frozen=True)
class Backoff:
    base: float
    cap: float

    def delay(self, attempt: int, rng: random.Random, retry_after: float | None) -> float:
        delay: float = min(self.cap, self.base * 2.0 ** (attempt - 1)) * (0.5 + rng.random() / 2)
        if retry_after is not None:
            delay = max(delay, min(retry_after, self.cap))
        return delay


PROVIDER_BACKOFF = Backoff(base=0.25, cap=4.0)
PROBE_BACKOFF = Backoff(base=0.1, cap=0.2)


@dataclass
class Tally:
    """What the clients saw: every id sent, acknowledged, given up or refused."""

    sent: set[str] = field(default_factory=set)
    acknowledged: set[str] = field(default_factory=set)
    accepted_answers: Counter[str] = field(default_factory=Counter)
    given_up: dict[str, str] = field(default_factory=dict)  # id -> last answer
    refused: dict[str, str] = field(default_factory=dict)  # id -> the 4xx answer
    answers: Counter[str] = field(default_factory=Counter)
    probe_answers: Counter[str] = field(default_factory=Counter)
    requests: int = 0
    redeliveries: int = 0
    twins: int = 0
    retries: int = 0


@dataclass
class Events:
    """Every event the load made up, so a redelivery re-sends the same bytes."""

    run_id: str
    bodies: dict[str, bytes] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)

    def new(self, prefix: str, n: int) -> tuple[str, bytes]:
        event_id = f"evt_{self.run_id}_{prefix}_{n}"
        body = json.dumps(
            {
                "id": event_id,
                "type": "chaos.ping",
                "created_at": time.time(),
                "data": {"n": n, "pad": "x" * (n % 97)},
            },
            separators=(",", ":"),
        ).encode()
        self.bodies[event_id] = body
        self.order.append(event_id)
        return event_id, body


def answer_label(response: httpx.Response) -> str:
    try:
        data = response.json()
    except ValueError:
        data = None
    detail = ""
    if isinstance(data, dict):
        detail = str(data.get("status") or data.get("error") or "")
    return f"{response.status_code} {detail}".strip()


async def deliver(
    http: httpx.AsyncClient,
    url: str,
    signer: Signer,
    event_id: str,
    body: bytes,
    tally: Tally,
    answers: Counter[str],
    backoff: Backoff,
    rng: random.Random,
    give_up_at: float,
    max_attempts: int,
) -> bool:
    """Send one event until a 2xx or a bound; True when it was acknowledged."""
    tally.sent.add(event_id)
    attempt = 0
    while True:
        attempt += 1
        tally.requests += 1
        if attempt > 1:
            tally.retries += 1
        retry_after: float | None = None
        try:
            response = await http.post(url, content=body, headers=signer.headers(event_id, body))
        except httpx.TimeoutException:
            label = "timeout"
        except httpx.ConnectError:
            label = "connect_error"
        except httpx.TransportError as exc:  # e.g. the server was SIGKILLed mid-answer
            label = f"transport_error:{type(exc).__name__}"
        else:
            label = answer_label(response)
            if response.is_success:
                answers[label] += 1
                tally.acknowledged.add(event_id)
                if label.endswith("accepted"):
                    tally.accepted_answers[event_id] += 1
                tally.given_up.pop(event_id, None)
                return True
            if response.status_code not in RETRYABLE_STATUSES:
                answers[label] += 1
                tally.refused[event_id] = label
                return False
            header = response.headers.get("retry-after", "")
            retry_after = float(header) if header.replace(".", "", 1).isdigit() else None
        answers[label] += 1
        delay = backoff.delay(attempt, rng, retry_after)
        if attempt >= max_attempts or time.monotonic() + delay > give_up_at:
            if event_id not in tally.acknowledged:
                tally.given_up[event_id] = label
            return False
        await asyncio.sleep(delay)


async def run_client(
    index: int,
    plan: Plan,
    url: str,
    signer: Signer,
    events: Events,
    tally: Tally,
    stop_new: asyncio.Event,
    settle_deadline: float,
) -> None:
    """One provider: paced new events, bounded in flight, every delivery retried."""
    rng = random.Random(plan.seed * 1000 + index)
    interval = plan.clients / plan.rate
    slots = asyncio.Semaphore(plan.in_flight_per_client)
    pending: set[asyncio.Task[bool]] = set()
    limits = httpx.Limits(max_connections=plan.in_flight_per_client * 2)
    async with httpx.AsyncClient(
        timeout=plan.request_timeout, limits=limits, trust_env=False
    ) as http:

        def launch(event_id: str, body: bytes) -> None:
            give_up_at = min(time.monotonic() + plan.give_up_seconds, settle_deadline)
            task = asyncio.create_task(
                deliver(
                    http,
                    url,
                    signer,
                    event_id,
                    body,
                    tally,
                    tally.answers,
                    PROVIDER_BACKOFF,
                    rng,
                    give_up_at,
                    plan.max_attempts_per_id,
                )
            )
            pending.add(task)
            task.add_done_callback(pending.discard)
            task.add_done_callback(lambda _: slots.release())

        await asyncio.sleep(rng.random() * interval)
        next_at = time.monotonic()
        n = 0
        while not stop_new.is_set():
            draw = rng.random()
            if draw < plan.redelivery_share and events.order:
                event_id = rng.choice(events.order)
                await slots.acquire()
                tally.redeliveries += 1
                launch(event_id, events.bodies[event_id])
            else:
                n += 1
                event_id, body = events.new(f"c{index}", n)
                copies = 2 if draw < plan.redelivery_share + plan.twin_share else 1
                tally.twins += copies - 1
                for _ in range(copies):
                    await slots.acquire()
                    launch(event_id, body)
            next_at += interval
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))
        if pending:
            await asyncio.wait(pending)


async def run_load(
    plan: Plan,
    url: str,
    signer: Signer,
    events: Events,
    tally: Tally,
    load_end: float,
    settle_deadline: float,
) -> None:
    """All clients until ``load_end`` (monotonic), then let in-flight ids settle."""
    stop_new = asyncio.Event()
    clients = [
        asyncio.create_task(
            run_client(i, plan, url, signer, events, tally, stop_new, settle_deadline)
        )
        for i in range(plan.clients)
    ]
    await asyncio.sleep(max(0.0, load_end - time.monotonic()))
    stop_new.set()
    await asyncio.gather(*clients)
