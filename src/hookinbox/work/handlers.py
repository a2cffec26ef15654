"""How a handler is called: what its signature asks for, read once, at start-up.

A handler is ``handler(event, ctx)``; past those two, each parameter asks for something
by its name, and a handler that asks for something nobody gives fails at start-up
(a :class:`~hookinbox.errors.ConfigError` naming the route), never on the first event:

- ``payload``: the verified body, validated against the parameter's annotation (a
  pydantic model, a ``typing_extensions.TypedDict`` or any type pydantic validates).
  A body that does not validate is a dead letter ``payload_invalid`` at once, not
  retried: the same bytes would fail the same way on every attempt. Unannotated, it is
  the body as a dict (``event.payload``);
- any other name: the service of that name, given by the application
  (``Inbox(config, services={"db": session_factory})``) or by the factory the config
  names (``[worker] services = "myapp.deps:services"``, for ``hookinbox worker``
  processes). A parameter with a default may be left without a service.

The same services are on ``ctx.services`` for a handler that picks them at run time.
There is no global registry: each inbox (and each worker pool) has its own mapping.

Log lines of a failed validation carry pydantic's error types (``missing``,
``int_parsing``), never a value of the payload.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from pydantic import TypeAdapter, ValidationError
from pydantic.errors import PydanticUserError

from hookinbox.codes import JobCode
from hookinbox.config import Config
from hookinbox.errors import ActionError, ConfigError
from hookinbox.loading import load_callable
from hookinbox.logs import get_logger

log = get_logger("hookinbox.handlers")

#: The name of the parameter that asks for the validated payload.
PAYLOAD_PARAMETER = "payload"

NO_SERVICES: Mapping[str, Any] = MappingProxyType({})


class PayloadInvalid(ActionError):
    """The payload does not match the type the handler declares; dead-lettered, not retried.

    The worker raises it when a handler's ``payload`` parameter does not validate; a
    handler may raise it too, for a body it can never process."""

    code = JobCode.PAYLOAD_INVALID.value

    def __init__(self, message: str | None = None) -> None:
        super().__init__(JobCode.PAYLOAD_INVALID.value, message)


@dataclass(frozen=True)
class HandlerCall:
    """What to pass a handler besides ``(event, ctx)``, resolved from its signature."""

    services: Mapping[str, Any]
    payload: TypeAdapter[Any] | None = None
    wants_payload: bool = False

    def arguments(self, payload: Mapping[str, Any], *, job_id: str) -> dict[str, Any]:
        """The keyword arguments of one call; :class:`PayloadInvalid` if the payload
        does not validate."""
        if not self.wants_payload:
            return dict(self.services)
        if self.payload is None:
            return {**self.services, PAYLOAD_PARAMETER: payload}
        try:
            value = self.payload.validate_python(payload)
        except ValidationError as exc:
            kinds = sorted({str(error["type"]) for error in exc.errors()})
            log.warning("payload_invalid", job_id=job_id, errors=exc.error_count(), types=kinds)
            raise PayloadInvalid() from None
        return {**self.services, PAYLOAD_PARAMETER: value}


def plan_call(fn: Callable[..., Any], services: Mapping[str, Any], where: str) -> HandlerCall:
    """Read ``fn``'s signature once; a ConfigError naming ``where`` if it asks for a
    service nobody gives or declares a payload type pydantic cannot validate."""
    try:
        parameters = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):  # a builtin or C callable: the plain (event, ctx)
        return HandlerCall(services=NO_SERVICES)
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    skipped = 0
    asked: dict[str, Any] = {}
    payload: TypeAdapter[Any] | None = None
    wants_payload = False
    for parameter in parameters:
        if parameter.kind in positional and skipped < 2:
            skipped += 1  # event, ctx
            continue
        if parameter.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            continue
        if parameter.kind is inspect.Parameter.POSITIONAL_ONLY:
            raise ConfigError(
                f"{where}: parameter {parameter.name!r} is positional-only; past (event, ctx)"
                " a handler's parameters are passed by name"
            )
        if parameter.name == PAYLOAD_PARAMETER:
            wants_payload = True
            payload = _payload_adapter(fn, where)
        elif parameter.name in services:
            asked[parameter.name] = services[parameter.name]
        elif parameter.default is inspect.Parameter.empty:
            known = ", ".join(sorted(services)) or "none given"
            raise ConfigError(
                f"{where}: parameter {parameter.name!r} names no service (services: {known})"
            )
    return HandlerCall(
        services=MappingProxyType(asked), payload=payload, wants_payload=wants_payload
    )


def _payload_adapter(fn: Callable[..., Any], where: str) -> TypeAdapter[Any] | None:
    # A callable object's annotations are on its __call__.
    target = fn if inspect.isroutine(fn) else type(fn).__call__
    try:
        hints = typing.get_type_hints(target)
    except Exception as exc:  # an annotation naming something not importable at run time
        raise ConfigError(f"{where}: cannot resolve the handler's annotations ({exc})") from None
    annotation = hints.get(PAYLOAD_PARAMETER)
    if annotation is None or annotation is Any:
        return None
    try:
        return TypeAdapter(annotation)
    except PydanticUserError as exc:
        raise ConfigError(f"{where}: payload type cannot be validated: {exc.message}") from None


def load_services(config: Config) -> Mapping[str, Any]:
    """The services the config's ``[worker] services`` factory returns (none if unset)."""
    path = config.worker.services
    if path is None:
        return NO_SERVICES
    factory = load_callable(path, "worker.services")
    services = factory()
    if not isinstance(services, Mapping) or not all(isinstance(k, str) for k in services):
        raise ConfigError("worker.services: the factory must return a mapping of names to objects")
    return MappingProxyType(dict(services))
