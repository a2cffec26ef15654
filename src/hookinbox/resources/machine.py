"""Declared state machines for tracked resources, and the one function that judges an event.

A resource (a video task, an AI job) moves only along the transitions its machine
declares. The machine is the only authority: statuses are never compared as strings or
ordered by the event's time (the network reorders callbacks; event time is kept for audit
only). A late ``processing`` after ``ready`` is not "older", it is simply not a declared
transition out of ``ready``, so it is rejected and recorded for review.

A machine is built from a table the config checked (:class:`~hookinbox.config.resources.
MachineConfig`), so a machine that exists has no unknown state, no unreachable state and
no way out of a terminal state.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from hookinbox.config.resources import BUILTIN_MACHINES, MachineConfig, machine_tables

#: Why an event was not applied; each is recorded in the transition log.
RejectReason = Literal["from_terminal", "same_state", "not_allowed", "unknown_target"]


@dataclass(frozen=True, slots=True)
class StateMachine:
    """States, the initial one, the allowed transitions and the terminal states.

    ``events`` maps provider event types to target states (a route may override it);
    ``notify`` maps a state to the outbox kind a transition INTO it produces, whose key is
    ``{kind}:{resource_id}`` (e.g. ``video-ready:res_...``): one notification per resource
    and state, however often the provider repeats itself.
    """

    name: str
    states: tuple[str, ...]
    initial: str
    transitions: Mapping[str, frozenset[str]]
    terminal: frozenset[str]
    events: Mapping[str, str] = field(default_factory=dict)
    notify: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_table(cls, name: str, table: MachineConfig) -> StateMachine:
        """The machine of a table the config already checked."""
        return cls(
            name=name,
            states=tuple(table.states),
            initial=table.initial,
            transitions={src: frozenset(dst) for src, dst in table.transitions.items()},
            terminal=frozenset(table.terminal),
            events=dict(table.events),
            notify=dict(table.notify),
        )

    @classmethod
    def declare(
        cls,
        name: str,
        *,
        states: Iterable[str],
        initial: str,
        transitions: Mapping[str, Iterable[str]],
        terminal: Iterable[str],
        events: Mapping[str, str] | None = None,
        notify: Mapping[str, str] | None = None,
    ) -> StateMachine:
        """Build and check a machine in code; every fault is a ConfigError naming its key."""
        table = MachineConfig(
            states=tuple(states),
            initial=initial,
            transitions={src: tuple(dst) for src, dst in transitions.items()},
            terminal=tuple(terminal),
            events=dict(events or {}),
            notify=dict(notify or {}),
        )
        table.check(f"machines.{name}")
        return cls.from_table(name, table)

    def is_terminal(self, state: str) -> bool:
        return state in self.terminal

    def judge(self, current: str, target: str) -> RejectReason | None:
        """None when ``current -> target`` is a declared transition, else why not."""
        if target not in self.states:
            return "unknown_target"
        if current == target:
            return "same_state"
        if current in self.terminal:
            return "from_terminal"
        if target not in self.transitions.get(current, frozenset()):
            return "not_allowed"
        return None


#: The shipped example machine (see :data:`hookinbox.config.resources.VIDEO_MACHINE`).
VIDEO = StateMachine.from_table("video", BUILTIN_MACHINES["video"])


def build_machines(machines: Mapping[str, MachineConfig]) -> dict[str, StateMachine]:
    """The built-in machines, overridden or extended by the config's ``[machines.*]``."""
    return {name: StateMachine.from_table(name, t) for name, t in machine_tables(machines).items()}
