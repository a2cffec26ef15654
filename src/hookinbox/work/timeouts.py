"""The job timeout of a pool's running jobs, on one timer (see :class:`JobTimeouts`)."""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from typing import Any


class JobTimeouts:
    """Every running job's timeout, on one timer.

    ``asyncio.timeout`` per job schedules a timer and cancels it again for every job (in
    a profile of a no-op drain, 8% of the worker's CPU). A pool's jobs all have the same
    timeout, so their deadlines come in the order they start: the running jobs wait in
    start order, and one timer, set for the oldest, cancels each job whose time ran out.
    The job's :meth:`done` then says its cancellation was this timeout's (taken back, as
    ``asyncio.timeout`` takes it back), and the attempt raises ``TimeoutError``.
    """

    def __init__(self, seconds: float) -> None:
        self._seconds = seconds
        self._running: OrderedDict[asyncio.Task[Any], float] = OrderedDict()
        self._expired: set[asyncio.Task[Any]] = set()
        self._timer: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def watch(self) -> asyncio.Task[Any]:
        """Start the current task's time (inside the job's task)."""
        # The current task of the loop the timer runs on, looked up by that loop: asking
        # asyncio for the running loop (twice, with no loop at hand) is a getpid() system
        # call each on CPython 3.11. None: another loop runs this job.
        task = asyncio.current_task(self._loop) if self._loop is not None else None
        if task is None:
            task = asyncio.current_task()
            assert task is not None
        loop = task.get_loop()
        if loop is not self._loop:
            # A pool used from another event loop (hookinbox.testing may): the timer and
            # the tasks of the former one are gone with it.
            self._running.clear()
            self._expired.clear()
            self._timer, self._loop = None, loop
        deadline = loop.time() + self._seconds
        self._running[task] = deadline
        if self._timer is None:
            self._timer = loop.call_at(deadline, self._expire)
        return task

    def done(self, task: asyncio.Task[Any]) -> bool:
        """Stop watching ``task``; whether its time ran out and nothing else cancelled it
        (its cancellation is then a timeout's)."""
        self._running.pop(task, None)
        if task not in self._expired:
            return False
        self._expired.discard(task)
        return task.uncancel() == 0

    def _expire(self) -> None:
        loop = asyncio.get_running_loop()
        self._timer = None
        now = loop.time()
        while self._running:
            task, deadline = next(iter(self._running.items()))
            if deadline > now:
                self._timer = loop.call_at(deadline, self._expire)
                return
            del self._running[task]
            self._expired.add(task)
            task.cancel()
