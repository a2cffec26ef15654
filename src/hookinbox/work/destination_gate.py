"""The gate a forward to a ``[destinations.NAME]`` passes: admitted by the store (rate,
forwards in flight, circuit; shared by every worker process), or held without spending
an attempt; after the POST, its slot released and the circuit told how it went.

The gate runs before the effects ledger is touched, so a held job leaves no ``started``
effect behind and nothing is sent.
"""

from __future__ import annotations

import asyncio

from hookinbox.config.destinations import DestinationConfig
from hookinbox.errors import HookinboxError, TargetAnswered
from hookinbox.logs import get_logger
from hookinbox.store import DestinationLimits, Store
from hookinbox.work.effects import EffectInProgress

log = get_logger("hookinbox.destinations")

#: A slot outlives the forward's timeout by this much before another worker may reuse it.
SLOT_MARGIN_SECONDS = 5.0


class DestinationHeld(HookinboxError):
    """The destination cannot take this forward now (its rate, its forwards in flight or
    its open circuit): the job comes back after ``wait_seconds``, no attempt spent."""

    def __init__(self, code: str, wait_seconds: float) -> None:
        super().__init__(code)
        self.code = code
        self.wait_seconds = wait_seconds


def healthy(exc: BaseException | None) -> bool | None:
    """What a forward's end says of its destination: True (it answered), False (no
    answer, a 5xx or a 429), None (nothing was sent: another job held the effect)."""
    if exc is None:
        return True
    if isinstance(exc, EffectInProgress):
        return None
    if isinstance(exc, TargetAnswered):
        return exc.status < 500 and exc.status != 429
    return False


class DestinationGate:
    def __init__(self, name: str, config: DestinationConfig, store: Store) -> None:
        self.name = name
        self._store = store
        self._opens_after = config.circuit_failures
        self.limits = DestinationLimits(
            rate_per_second=config.rate_per_second,
            burst=config.bucket_size,
            max_in_flight=config.max_in_flight,
            circuit_failures=config.circuit_failures,
            circuit_cooldown=config.circuit_cooldown,
            slot_seconds=config.timeout_seconds + SLOT_MARGIN_SECONDS,
        )

    async def admit(self, job_id: str, lease_token: str) -> None:
        """Return when the forward may go; raise :class:`DestinationHeld` otherwise. The
        slot is the lease's: a forward of the same job under an earlier lease (its worker
        died) keeps its own until that runs out."""
        answer = await self._store.destinations.admit(self.name, job_id, lease_token, self.limits)
        if not answer.admitted:
            raise DestinationHeld(answer.code or "destination_held", answer.wait_seconds)
        if answer.probe:
            log.info("circuit_probe", destination=self.name, job_id=job_id)

    async def release(self, job_id: str, lease_token: str, exc: BaseException | None) -> None:
        """Free the job's slot and move the circuit; a store error here is logged, never
        the job's failure (the slot runs out on its own)."""
        try:
            done = await asyncio.shield(
                self._store.destinations.release(
                    self.name,
                    job_id,
                    lease_token,
                    healthy=healthy(exc),
                    opens_after=self._opens_after,
                )
            )
        except Exception as error:
            log.warning(
                "destination_release_failed", destination=self.name, error=type(error).__name__
            )
            return
        if done.opened:
            log.warning("circuit_opened", destination=self.name, job_id=job_id)
        elif done.closed:
            log.info("circuit_closed", destination=self.name, job_id=job_id)
