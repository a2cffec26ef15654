"""Catch-up on a schedule: each source with ``[sources.NAME.catch_up] every`` is run that
often by every process that runs workers (``hookinbox serve``, ``hookinbox worker``).

Several processes may run the same source at once: the reservation dedups and the
cursor moves by compare-and-set, so nothing is queued twice and a run that finds the
cursor moved by another stops. A failed run (an outage, a refused key) is logged with
its code and tried again at the next turn; the stop event ends the loop between runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import random

from hookinbox.catch_up.run import run_catch_up
from hookinbox.config import Config
from hookinbox.errors import HookinboxError
from hookinbox.logs import get_logger
from hookinbox.metrics import Metrics
from hookinbox.receive.receiver import Receiver
from hookinbox.store import Store

log = get_logger("hookinbox.catch_up")


def scheduled_sources(config: Config) -> dict[str, float]:
    """The sources with a schedule, and how often (seconds)."""
    return {
        name: source.catch_up.every
        for name, source in config.sources.items()
        if source.catch_up is not None and source.catch_up.every is not None
    }


async def run_catch_up_schedule(
    config: Config, store: Store, receiver: Receiver, metrics: Metrics, stop: asyncio.Event
) -> None:
    """Until ``stop`` is set: each scheduled source every ``every`` (the first run after a
    random part of it, so processes started together do not all ask at once)."""
    every = scheduled_sources(config)
    if not every:
        return
    loop = asyncio.get_running_loop()
    due = {
        name: loop.time() + random.uniform(0.05, 0.25) * period for name, period in every.items()
    }
    while not stop.is_set():
        name = min(due, key=due.__getitem__)
        wait = due[name] - loop.time()
        if wait > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=wait)
            if stop.is_set():
                return
        due[name] = loop.time() + every[name]
        try:
            report = await run_catch_up(config, store, receiver, metrics, name)
        except HookinboxError as exc:
            log.warning("catch_up_run_failed", source=name, error=exc.code)
            continue
        except Exception as exc:  # a bug must not end the workers' process
            log.error("catch_up_run_crashed", source=name, error=type(exc).__name__)
            continue
        if report.failure is not None:
            log.warning("catch_up_run_failed", source=name, error=report.failure.code)
