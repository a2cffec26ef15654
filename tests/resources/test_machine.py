"""Declared state machines: validated at start-up, and the only judge of a transition."""

from __future__ import annotations

from typing import Any

import pytest

from hookinbox.config import config_from_mapping
from hookinbox.errors import ConfigError
from hookinbox.resources.machine import VIDEO, StateMachine
from tests.resources.support import video_route
from tests.support.signing import SECRET_ENV


def declare(**overrides: Any) -> StateMachine:
    spec: dict[str, Any] = {
        "states": ("new", "running", "done"),
        "initial": "new",
        "transitions": {"new": ("running", "done"), "running": ("done",)},
        "terminal": ("done",),
    }
    spec.update(overrides)
    return StateMachine.declare("job", **spec)


def test_the_shipped_video_machine() -> None:
    assert VIDEO.initial == "submitted"
    assert VIDEO.terminal == {"ready", "failed"}
    assert VIDEO.judge("submitted", "processing") is None
    assert VIDEO.judge("submitted", "ready") is None  # callbacks arrive in any order
    assert VIDEO.judge("processing", "ready") is None
    assert VIDEO.judge("processing", "failed") is None
    assert VIDEO.judge("ready", "processing") == "from_terminal"  # the late callback
    assert VIDEO.judge("ready", "failed") == "from_terminal"
    assert VIDEO.judge("ready", "ready") == "same_state"
    # Providers announce video.queued before rendering (issue 12): a state of its own.
    assert VIDEO.events["video.queued"] == "queued"
    assert VIDEO.judge("submitted", "queued") is None
    assert VIDEO.judge("queued", "processing") is None
    assert VIDEO.judge("processing", "queued") is not None  # a late queued: for review
    assert VIDEO.judge("processing", "submitted") == "not_allowed"
    assert VIDEO.judge("submitted", "exploded") == "unknown_target"
    assert VIDEO.notify == {"ready": "video-ready", "failed": "video-failed"}


def test_order_is_the_table_not_the_alphabet_or_the_clock() -> None:
    # "failed" < "processing" < "ready" alphabetically; none of that matters.
    machine = declare(
        states=("z", "a", "m"), initial="z", transitions={"z": ("m",), "m": ("a",)}, terminal=("a",)
    )
    assert machine.judge("z", "m") is None
    assert machine.judge("m", "a") is None
    assert machine.judge("z", "a") == "not_allowed"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"initial": "nope"}, "machines.job.initial: unknown state 'nope'"),
        ({"terminal": ("gone",)}, "machines.job.terminal: unknown state 'gone'"),
        (
            {"transitions": {"new": ("running", "elsewhere"), "running": ("done",)}},
            "machines.job.transitions.new: unknown state 'elsewhere'",
        ),
        (
            {"transitions": {"new": ("running",), "running": ("done",), "ghost": ("done",)}},
            "machines.job.transitions.ghost: unknown state 'ghost'",
        ),
        (
            {"transitions": {"new": ("running",), "running": ("done",), "done": ("running",)}},
            "machines.job.transitions.done: 'done' is terminal; nothing may leave it",
        ),
        (
            {"states": ("new", "running", "done", "limbo")},
            "machines.job.states: unreachable from 'new': limbo",
        ),
        ({"states": ("new", "new", "done")}, "machines.job.states: a state is listed twice"),
        (
            {"transitions": {"new": ("new", "running"), "running": ("done",)}},
            "machines.job.transitions.new: a state cannot move to itself",
        ),
        ({"events": {"job.x": "nowhere"}}, "machines.job.events.job.x: unknown state 'nowhere'"),
        ({"notify": {"nowhere": "job-x"}}, "machines.job.notify.nowhere: unknown state"),
    ],
)
def test_a_broken_machine_is_a_config_error_naming_its_key(
    overrides: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        declare(**overrides)
    assert str(caught.value).startswith(message)


def _config(**extra: Any) -> dict[str, Any]:
    route = extra.pop("route", video_route())
    return {
        "database": "sqlite:///var/x.db",
        "sources": {"video": {"secret_env": SECRET_ENV, "routes": [route]}},
        **extra,
    }


def test_a_machine_from_the_config_is_validated_at_start_up() -> None:
    data = _config(
        machines={
            "render": {
                "states": ["queued", "done", "orphan"],
                "initial": "queued",
                "transitions": {"queued": ["done"]},
                "terminal": ["done"],
            }
        }
    )
    with pytest.raises(ConfigError, match=r"^machines\.render\.states: unreachable"):
        config_from_mapping(data)


def test_a_route_must_name_a_known_machine_and_states() -> None:
    with pytest.raises(ConfigError, match=r"sources\.video\.routes\.0\.resource\.kind: no machine"):
        config_from_mapping(_config(route=video_route(kind="audio")))
    with pytest.raises(ConfigError, match=r"resource\.targets\.video\.done: unknown state 'done'"):
        config_from_mapping(_config(route=video_route(targets={"video.done": "done"})))
    with pytest.raises(
        ConfigError, match=r"exactly one of 'handler', 'forward', 'destination' or 'resource'"
    ):
        config_from_mapping(_config(route={**video_route(), "handler": "x.y:z"}))
    with pytest.raises(ConfigError, match=r"resource\.ref: .* is not a JSON pointer"):
        config_from_mapping(_config(route=video_route(ref="data.task_id")))


def test_the_config_can_extend_the_builtin_video_machine() -> None:
    config = config_from_mapping(
        _config(
            machines={
                "video": {
                    "states": ["submitted", "processing", "ready", "failed", "expired"],
                    "initial": "submitted",
                    "transitions": {
                        "submitted": ["processing", "ready", "failed"],
                        "processing": ["ready", "failed"],
                        "ready": ["expired"],
                    },
                    "terminal": ["failed", "expired"],
                    "events": {"video.ready": "ready", "video.expired": "expired"},
                    "notify": {"ready": "video-ready"},
                }
            },
            outbox={"forward": "http://notify.internal/hook"},
        )
    )
    assert (
        StateMachine.from_table("video", config.machines["video"]).judge("ready", "expired") is None
    )
    assert config.outbox.enabled
