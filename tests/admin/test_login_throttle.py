"""The login throttle's rules, on a clock the test moves, and the client address behind
proxies: the arithmetic the end-to-end login tests cannot reach in seconds."""

from __future__ import annotations

import pytest

from hookinbox.admin.login import LoginLimiter, parse_login_form
from hookinbox.errors import InvalidLoginForm
from hookinbox.http.clients import ClientAddresses


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_an_address_gets_five_failures_a_minute_and_the_right_token_gives_its_slot_back() -> None:
    clock = Clock()
    limiter = LoginLimiter(clock=clock)
    for _ in range(3):
        assert limiter.take("192.0.2.1") == 0
        limiter.succeeded("192.0.2.1")  # right tokens never fill the budget
    for _ in range(5):
        assert limiter.take("192.0.2.1") == 0
        limiter.failed("192.0.2.1")
        clock.now += 1
    assert limiter.take("192.0.2.1") == 56  # the first failure leaves the window then
    clock.now += 56
    assert limiter.take("192.0.2.1") == 0


def test_attempts_in_flight_hold_their_slots() -> None:
    limiter = LoginLimiter(clock=Clock())
    assert [limiter.take("192.0.2.1") for _ in range(6)] == [0] * 5 + [1]


def test_past_the_overall_budget_each_address_gets_one_attempt_until_the_window_passes() -> None:
    clock = Clock()
    limiter = LoginLimiter(overall=10, clock=clock)
    for n in range(10):
        assert limiter.take(f"192.0.2.{n}") == 0
        limiter.failed(f"192.0.2.{n}")
    assert limiter.under_attack()
    assert limiter.take("192.0.2.1") > 0  # it already failed once this minute
    assert limiter.take("198.51.100.1") == 0  # a fresh address is compared
    limiter.succeeded("198.51.100.1")
    clock.now += 61
    assert not limiter.under_attack()
    assert limiter.take("192.0.2.1") == 0


def test_an_ipv6_address_counts_as_its_64() -> None:
    limiter = LoginLimiter(per_client=2, clock=Clock())
    for host in ("2001:db8:1:2::1", "2001:db8:1:2:ffff::9"):
        assert limiter.take(host) == 0
        limiter.failed(host)
    assert limiter.take("2001:db8:1:2::77") > 0
    assert limiter.take("2001:db8:1:3::1") == 0


def scope(peer: str, *forwarded: str) -> dict[str, object]:
    headers = [(b"x-forwarded-for", value.encode()) for value in forwarded]
    return {"client": (peer, 5000), "headers": headers}


@pytest.mark.parametrize(
    ("trusted", "peer", "forwarded", "client"),
    [
        ((), "127.0.0.1", ("198.51.100.1",), "127.0.0.1"),
        (("10.0.0.0/8",), "192.0.2.9", ("198.51.100.1",), "192.0.2.9"),
        (("10.0.0.0/8",), "10.1.1.1", ("198.51.100.1",), "198.51.100.1"),
        (("10.0.0.0/8",), "10.1.1.1", ("203.0.113.5, 198.51.100.1, 10.2.2.2",), "198.51.100.1"),
        (("10.0.0.0/8",), "10.1.1.1", ("203.0.113.5", "198.51.100.1"), "198.51.100.1"),
        (("10.0.0.0/8",), "10.1.1.1", ("[2001:db8::1]:443",), "2001:db8::1"),
        (("10.0.0.0/8",), "10.1.1.1", ("198.51.100.1:8443",), "198.51.100.1"),
        (("10.0.0.0/8",), "10.1.1.1", ("10.3.3.3, 10.2.2.2",), "10.3.3.3"),
        (("10.0.0.0/8",), "10.1.1.1", (), "10.1.1.1"),
        (("::1",), "::1", ("unknown",), "unknown"),
    ],
)
def test_the_client_is_the_first_hop_from_the_right_no_trusted_proxy_owns(
    trusted: tuple[str, ...], peer: str, forwarded: tuple[str, ...], client: str
) -> None:
    assert ClientAddresses(trusted).of(scope(peer, *forwarded)) == client


@pytest.mark.parametrize(
    "body", [b"token=a&token=b", b"&".join([b"a=b"] * 9), b"token=%FF", b"name=\xc3\xa9"]
)
def test_a_login_form_out_of_bounds_is_invalid_form(body: bytes) -> None:
    with pytest.raises(InvalidLoginForm):
        parse_login_form(body)


def test_a_login_form_reads_its_three_fields() -> None:
    form = parse_login_form(b"token=a%2Bb+c&name=ana.maria%40ops.example&next=%2Fadmin%2F&x=1")
    assert (form.token, form.name, form.next) == (b"a+b c", "ana.maria@ops.example", "/admin/")
    assert "a+b" not in repr(form)
