"""Declared state machines for tracked resources, and the one function that judges an event.

A resource (a video task, an AI job) moves only along the transitions its machine
declares. The machine is the only authority: statuses are never compared as strings or
ordered by the event's time (the network reorders callbacks; event time is kept for audit
only). A late ``processing`` after ``ready`` is not "older", it is simply not a declared
transition out of ``ready``, so it is rejected and recorded for review.

Machines are validated once, at start-up: an unknown state, a state no path reaches from
the initial one, or a transition out of a terminal state is a configuration error that
names its key, because a machine with such a hole would silently strand resources.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from hookinbox.errors import ConfigError

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
        where: str | None = None,
    ) -> StateMachine:
        """Build and validate a machine; every fault is a ConfigError naming its key."""
        machine = cls(
            name=name,
            states=tuple(states),
            initial=initial,
            transitions={src: frozenset(dst) for src, dst in transitions.items()},
            terminal=frozenset(terminal),
            events=dict(events or {}),
            notify=dict(notify or {}),
        )
        machine.validate(where or f"machines.{name}")
        return machine

    def validate(self, where: str) -> None:
        known = set(self.states)
        if not self.states:
            raise ConfigError(f"{where}.states: a machine needs at least one state")
        if len(known) != len(self.states):
            raise ConfigError(f"{where}.states: a state is listed twice")
        if self.initial not in known:
            raise ConfigError(f"{where}.initial: unknown state {self.initial!r}")
        for state in sorted(self.terminal):
            if state not in known:
                raise ConfigError(f"{where}.terminal: unknown state {state!r}")
        for src, targets in self.transitions.items():
            if src not in known:
                raise ConfigError(f"{where}.transitions.{src}: unknown state {src!r}")
            for dst in sorted(targets):
                if dst not in known:
                    raise ConfigError(f"{where}.transitions.{src}: unknown state {dst!r}")
            if src in self.terminal and targets:
                raise ConfigError(
                    f"{where}.transitions.{src}: {src!r} is terminal; nothing may leave it"
                )
            if src in targets:
                raise ConfigError(f"{where}.transitions.{src}: a state cannot move to itself")
        unreachable = known - self.reachable()
        if unreachable:
            raise ConfigError(
                f"{where}.states: unreachable from {self.initial!r}: "
                f"{', '.join(sorted(unreachable))}"
            )
        for event_type, state in self.events.items():
            if state not in known:
                raise ConfigError(f"{where}.events.{event_type}: unknown state {state!r}")
        for state in self.notify:
            if state not in known:
                raise ConfigError(f"{where}.notify.{state}: unknown state {state!r}")

    def reachable(self) -> set[str]:
        seen = {self.initial}
        todo = [self.initial]
        while todo:
            for nxt in self.transitions.get(todo.pop(), ()):
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return seen

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


#: The shipped example: a video (or any asynchronous AI) task created by the application,
#: then moved by the provider's callbacks. Any first callback may arrive (the network does
#: not keep order), so ``submitted`` may go straight to ``ready`` or ``failed``.
VIDEO = StateMachine.declare(
    "video",
    states=("submitted", "processing", "ready", "failed"),
    initial="submitted",
    transitions={
        "submitted": ("processing", "ready", "failed"),
        "processing": ("ready", "failed"),
    },
    terminal=("ready", "failed"),
    events={
        "video.processing": "processing",
        "video.ready": "ready",
        "video.failed": "failed",
    },
    notify={"ready": "video-ready", "failed": "video-failed"},
)

BUILTIN_MACHINES: Mapping[str, StateMachine] = {"video": VIDEO}
