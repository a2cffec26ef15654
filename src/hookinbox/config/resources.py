"""Config for tracked resources: machine tables, resource routes and the outbox relay.

TOML::

    [machines.video]                       # optional: "video" is built in
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
    tenant = "/data/tenant_id"             # or a literal ("acme"): the source's one tenant
    owner = "/data/owner_id"
    inline = false                         # true: applied in the receiver's commit

    [outbox]
    forward = "http://notifier.internal/notify"   # or handler = "pkg.mod:send"

A machine table is validated here, once, at start-up: an unknown state, a state no path
reaches from the initial one, or a transition out of a terminal state is a configuration
error that names its key, because a machine with such a hole would silently strand
resources. :class:`hookinbox.resources.machine.StateMachine` is built from a checked table.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pydantic import Field, field_validator, model_validator

from hookinbox.config.fields import ForwardUrl, Frozen, HandlerPath
from hookinbox.config.schemes import check_pointer
from hookinbox.errors import ConfigError

_NAME = re.compile(r"^[A-Za-z0-9_\-]{1,64}$")
#: A tenant's name, pinned by a route or given to a resource when it is created (and a
#: resource's owner, held to the same rule): printable (no C0 or C1 control character, as
#: the API's filters take), not padded with spaces, at most :data:`MAX_TENANT`
#: characters. Matched whole (``fullmatch``): ``$`` alone would let a final line break
#: through.
MAX_TENANT = 200
_PRINTABLE = r"[^\x00-\x1f\x7f-\x9f]"
_UNPADDED = r"[^\s\x00-\x1f\x7f-\x9f]"
TENANT_NAME = re.compile(rf"{_UNPADDED}(?:{_PRINTABLE}{{0,{MAX_TENANT - 2}}}{_UNPADDED})?")
#: What :data:`TENANT_NAME` asks, in words.
TENANT_RULE = f"1 to {MAX_TENANT} printable characters, no leading or trailing space"


class MachineConfig(Frozen):
    """One ``[machines.NAME]`` table; validated as a whole by :meth:`check`."""

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

    def check(self, where: str) -> None:
        """Raise ConfigError naming the first fault of the table (``where`` is its key)."""
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


#: The shipped example: a video (or any asynchronous AI) task created by the application,
#: then moved by the provider's callbacks. Any first callback may arrive (the network does
#: not keep order), so ``submitted`` may go straight to ``ready`` or ``failed``. Providers
#: announce ``video.queued`` before rendering starts: ``queued`` sits between
#: ``submitted`` and ``processing``, and a late ``queued`` after ``processing`` is
#: rejected (to the review list), never applied.
VIDEO_MACHINE = MachineConfig(
    states=("submitted", "queued", "processing", "ready", "failed"),
    initial="submitted",
    transitions={
        "submitted": ("queued", "processing", "ready", "failed"),
        "queued": ("processing", "ready", "failed"),
        "processing": ("ready", "failed"),
    },
    terminal=("ready", "failed"),
    events={
        "video.queued": "queued",
        "video.processing": "processing",
        "video.ready": "ready",
        "video.failed": "failed",
    },
    notify={"ready": "video-ready", "failed": "video-failed"},
)

#: Machines every config has unless it declares its own under the same name.
BUILTIN_MACHINES: Mapping[str, MachineConfig] = {"video": VIDEO_MACHINE}


def machine_tables(machines: Mapping[str, MachineConfig]) -> dict[str, MachineConfig]:
    """The built-in tables, overridden or extended by the config's ``[machines.*]``,
    each checked."""
    tables = dict(BUILTIN_MACHINES)
    for name, table in machines.items():
        if not _NAME.match(name):
            raise ConfigError(f"machines.{name}: a machine name may hold only letters, digits, _ -")
        table.check(f"machines.{name}")
        tables[name] = table
    return tables


class ResourceBinding(Frozen):
    """A route that drives a tracked resource instead of running a handler or forward."""

    kind: str = Field(min_length=1, max_length=64)
    #: Where the provider's reference (its task id) is in the body.
    ref: str
    #: Where the tenant / owner the event claims are; checked against the resource. A
    #: ``tenant`` not starting with ``/`` is a literal: every event of the route is that
    #: tenant's, whatever its body claims (one tenant per source).
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

    @field_validator("ref", "owner", "event_time")
    @classmethod
    def _pointers(cls, value: str | None) -> str | None:
        return check_pointer(value) if value is not None else None

    @field_validator("tenant")
    @classmethod
    def _tenant(cls, value: str | None) -> str | None:
        if value is None or value.startswith("/"):
            return check_pointer(value) if value is not None else None
        if not TENANT_NAME.fullmatch(value):
            raise ValueError(
                f"{value!r} is neither a JSON pointer (/data/tenant_id) nor a tenant name "
                f"({TENANT_RULE})"
            )
        return value

    @property
    def pinned_tenant(self) -> str | None:
        """The literal tenant of every event of this route, or None (a pointer, or none)."""
        tenant = self.tenant
        return tenant if tenant is not None and not tenant.startswith("/") else None

    @model_validator(mode="after")
    def _recheck_order(self) -> ResourceBinding:
        if self.park_recheck_max_seconds < self.park_recheck_seconds:
            raise ValueError("park_recheck_max_seconds must be at least park_recheck_seconds")
        return self


class OutboxSettings(Frozen):
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


def check_resource_routes(
    machines: Mapping[str, MachineConfig], sources: Mapping[str, Any]
) -> None:
    """Every resource route names a known machine, and maps events to its states only."""
    tables = machine_tables(machines)
    for source_name, source in sources.items():
        for index, route in enumerate(source.routes):
            binding: ResourceBinding | None = route.resource
            if binding is None:
                continue
            where = f"sources.{source_name}.routes.{index}.resource"
            machine = tables.get(binding.kind)
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
