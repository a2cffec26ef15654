"""What operators see of ``[destinations.NAME]``: each destination's limits, its circuit
(closed, open, half-open) and the forwards under way, from the state every worker
process shares in the store."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from hookinbox.config import Config
from hookinbox.outbound import target_of
from hookinbox.store import Store, iso


@dataclass(frozen=True, slots=True)
class DestinationRow:
    name: str
    #: Host and path of its URL (never a query string).
    target: str
    rate_per_second: float | None
    max_in_flight: int | None
    circuit_failures: int | None
    circuit_cooldown: float
    #: ``closed``, ``open`` (jobs held) or ``half-open`` (one probe may go).
    circuit: str
    in_flight: int
    failures: int
    opened_at: datetime | None
    last_opened_at: datetime | None
    openings: int

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "target": self.target,
            "rate_per_second": self.rate_per_second,
            "max_in_flight": self.max_in_flight,
            "circuit_failures": self.circuit_failures,
            "circuit_cooldown": self.circuit_cooldown,
            "circuit": self.circuit,
            "in_flight": self.in_flight,
            "consecutive_failures": self.failures,
            "opened_at": iso(self.opened_at),
            "last_opened_at": iso(self.last_opened_at),
            "openings": self.openings,
        }


async def list_destinations(store: Store, config: Config) -> list[DestinationRow]:
    """Every configured destination with its shared state (a destination never used yet
    is closed, with nothing in flight)."""
    states = {state.name: state for state in await store.destinations.states()}
    rows = []
    for name, destination in sorted(config.destinations.items()):
        state = states.get(name)
        circuit = "closed"
        if state is not None and state.open_for is not None:
            circuit = "open" if state.open_for < destination.circuit_cooldown else "half-open"
        rows.append(
            DestinationRow(
                name=name,
                target=target_of(destination.url),
                rate_per_second=destination.rate_per_second,
                max_in_flight=destination.max_in_flight,
                circuit_failures=destination.circuit_failures,
                circuit_cooldown=destination.circuit_cooldown,
                circuit=circuit,
                in_flight=state.in_flight if state else 0,
                failures=state.failures if state else 0,
                opened_at=state.opened_at if state else None,
                last_opened_at=state.last_opened_at if state else None,
                openings=state.openings if state else 0,
            )
        )
    return rows
