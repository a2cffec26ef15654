"""Config for tracked resources: machine tables, resource routes and the outbox relay.

TOML::

    [machines.video]                       # optional: "video" is built in (machine.VIDEO)
    states = ["submitted", "processing", "ready", "failed"]
    initial = "submitted"
    terminal = ["ready", "failed"]
    notify = { ready = "video-ready", failed = "video-failed" }
    [machines.video.transitions]
    submitted = ["processing", "ready", "failed"]
    processing = ["ready", "failed"]
    [machines.video.events]
    "video.processing" = "processing"
    "video.ready" = "ready"
    "video.failed" = "failed"

    [[sources.videoapi.routes]]
    events = ["video.*"]
    action = "video"
    [sources.videoapi.routes.resource]     # instead of handler / forward
    kind = "video"
    ref = "/data/task_id"                  # JSON pointers into the verified body
    tenant = "/data/tenant_id"
    owner = "/data/owner_id"
    inline = false                         # true: applied in the receiver's commit

    [outbox]
    forward = "http://notifier.internal/notify"   # or handler = "pkg.mod:send"

Kept apart from ``config.py`` so that module stays one screen per concept; it imports
nothing from it (``config.py`` imports this one).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from hookinbox.config_fields import ForwardUrl, HandlerPath
from hookinbox.errors import ConfigError
from hookinbox.machine import BUILTIN_MACHINES, StateMachine
from hookinbox.verify.options import check_pointer

_NAME = re.compile(r"^[A-Za-z0-9_\-]{1,64}$")


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class MachineConfig(_Frozen):
    """One ``[machines.NAME]`` table; validated as a whole by :meth:`build`."""

    states: tuple[str, ...]
    initial: str
    transitions: dict[str, tuple[str, ...]] = Field(default_factory=dict)
    terminal: tuple[str, ...] = ()
    events: dict[str, str] = Field(default_factory=dict)
    notify: dict[str, str] = Field(default_factory=dict)

    @field_validator("notify")
    @classmethod
    def _outbox_kinds(cls, value: dict[str, str]) -> dict[str, str]:
        for kind in value.values():
            if not _NAME.match(kind):
                raise ValueError(f"outbox kind {kind!r} may hold only letters, digits, _ and -")
        return value

    def build(self, name: str) -> StateMachine:
        return StateMachine.declare(
            name,
            states=self.states,
            initial=self.initial,
            transitions=self.transitions,
            terminal=self.terminal,
            events=self.events,
            notify=self.notify,
        )


class ResourceBinding(_Frozen):
    """A route that drives a tracked resource instead of running a handler or forward."""

    kind: str = Field(min_length=1, max_length=64)
    #: Where the provider's reference (its task id) is in the body.
    ref: str
    #: Where the tenant / owner the event claims are; checked against the resource.
    tenant: str | None = None
    owner: str | None = None
    #: Where the event's own time is: recorded for audit, never used for ordering.
    event_time: str | None = None
    #: Event type -> target state; empty means the machine's own ``events`` table.
    targets: dict[str, str] = Field(default_factory=dict)
    #: Apply in the receiver's commit, so the 2xx means the transition is durable.
    inline: bool = False
    #: How long an event for a not-yet-known reference waits before it is dead-lettered.
    park_seconds: float = Field(default=900.0, ge=0, le=7 * 86400)
    #: First re-check of a parked event; doubles up to ``park_recheck_max_seconds``.
    park_recheck_seconds: float = Field(default=2.0, gt=0, le=3600)
    park_recheck_max_seconds: float = Field(default=60.0, gt=0, le=86400)

    @field_validator("ref", "tenant", "owner", "event_time")
    @classmethod
    def _pointers(cls, value: str | None) -> str | None:
        return check_pointer(value) if value is not None else None

    @model_validator(mode="after")
    def _recheck_order(self) -> ResourceBinding:
        if self.park_recheck_max_seconds < self.park_recheck_seconds:
            raise ValueError("park_recheck_max_seconds must be at least park_recheck_seconds")
        return self


class OutboxSettings(_Frozen):
    """The relay that sends outbox rows: an HTTP forward or a Python callable."""

    forward: ForwardUrl | None = None
    handler: HandlerPath | None = None
    timeout_seconds: float = Field(default=10.0, gt=0, le=300)
    concurrency: int = Field(default=4, ge=1, le=256)
    max_attempts: int = Field(default=10, ge=1, le=100)
    backoff_base_seconds: float = Field(default=1.0, gt=0, le=3600)
    backoff_max_seconds: float = Field(default=300.0, gt=0, le=86400)
    lease_seconds: float = Field(default=30.0, ge=1, le=86400)
    poll_interval_seconds: float = Field(default=1.0, gt=0, le=60)
    #: Reconciliation reports a row still unsent this long after it was written.
    unsent_after_seconds: float = Field(default=900.0, gt=0, le=30 * 86400)

    @model_validator(mode="after")
    def _one_target(self) -> OutboxSettings:
        if self.forward is not None and self.handler is not None:
            raise ValueError("the outbox needs at most one of 'forward' or 'handler'")
        if self.backoff_max_seconds < self.backoff_base_seconds:
            raise ValueError("backoff_max_seconds must be at least backoff_base_seconds")
        return self

    @property
    def enabled(self) -> bool:
        return self.forward is not None or self.handler is not None


def build_machines(machines: Mapping[str, MachineConfig]) -> dict[str, StateMachine]:
    """The built-in machines, overridden or extended by the config's ``[machines.*]``."""
    built = dict(BUILTIN_MACHINES)
    for name, spec in machines.items():
        if not _NAME.match(name):
            raise ConfigError(f"machines.{name}: a machine name may hold only letters, digits, _ -")
        built[name] = spec.build(name)
    return built


def check_resource_routes(
    machines: Mapping[str, MachineConfig], sources: Mapping[str, Any]
) -> None:
    """Every resource route names a known machine, and maps events to its states only."""
    built = build_machines(machines)
    for source_name, source in sources.items():
        for index, route in enumerate(source.routes):
            binding: ResourceBinding | None = route.resource
            if binding is None:
                continue
            where = f"sources.{source_name}.routes.{index}.resource"
            machine = built.get(binding.kind)
            if machine is None:
                raise ConfigError(f"{where}.kind: no machine named {binding.kind!r}")
            targets = binding.targets or machine.events
            if not targets:
                raise ConfigError(
                    f"{where}.targets: map event types to states (machine "
                    f"{binding.kind!r} has no events table)"
                )
            for event_type, state in targets.items():
                if state not in machine.states:
                    raise ConfigError(f"{where}.targets.{event_type}: unknown state {state!r}")


def targets_of(binding: ResourceBinding, machine: StateMachine) -> Mapping[str, str]:
    return binding.targets or machine.events
