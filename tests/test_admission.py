"""The admission rule of a destination, pure: circuit, then forwards in flight, then rate."""

from __future__ import annotations

from hookinbox.admission import (
    BUSY_WAIT_SECONDS,
    PROBE_WAIT_SECONDS,
    DestinationLimits,
    GateReading,
    admit_forward,
)

LIMITS = DestinationLimits(
    rate_per_second=2.0,
    burst=3.0,
    max_in_flight=2,
    circuit_failures=3,
    circuit_cooldown=10.0,
    slot_seconds=35.0,
)


def reading(**given: object) -> GateReading:
    values: dict[str, object] = {
        "tokens": 1.0,
        "since_refill": 0.0,
        "open_for": None,
        "probing": False,
        "in_flight": 0,
    }
    values.update(given)
    return GateReading(**values)  # type: ignore[arg-type]


def test_a_token_is_taken_and_the_bucket_refills_up_to_its_burst() -> None:
    answer, left = admit_forward(LIMITS, reading(tokens=1.0, since_refill=60.0))
    assert answer.admitted and not answer.probe
    assert left == 2.0  # refilled to the burst of 3, one taken


def test_an_empty_bucket_holds_for_the_time_one_token_takes() -> None:
    answer, left = admit_forward(LIMITS, reading(tokens=0.5, since_refill=0.0))
    assert (answer.admitted, answer.code, answer.wait_seconds) == (False, "destination_rate", 0.25)
    assert left == 0.5


def test_a_full_destination_holds_before_the_rate_is_asked() -> None:
    answer, _ = admit_forward(LIMITS, reading(tokens=0.0, in_flight=2))
    assert (answer.code, answer.wait_seconds) == ("destination_busy", BUSY_WAIT_SECONDS)


def test_an_open_circuit_holds_until_its_cooldown_then_one_job_probes() -> None:
    held, _ = admit_forward(LIMITS, reading(open_for=4.0))
    assert (held.code, held.wait_seconds) == ("circuit_open", 6.0)
    waiting, _ = admit_forward(LIMITS, reading(open_for=12.0, probing=True))
    assert (waiting.code, waiting.wait_seconds) == ("circuit_open", PROBE_WAIT_SECONDS)
    probe, _ = admit_forward(LIMITS, reading(open_for=12.0))
    assert probe.admitted and probe.probe


def test_no_limits_admit_everything() -> None:
    free = DestinationLimits(None, 0.0, None, None, 0.0, 35.0)
    answer, _ = admit_forward(free, reading(tokens=0.0, in_flight=99, open_for=1.0))
    assert answer.admitted
