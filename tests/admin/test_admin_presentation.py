"""What the admin shows, without a browser: times to the millisecond and relative, the
chart's axes and failures, a bulk retry's summary bounded, a flash read back only when
well formed."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hookinbox.admin.presentation import (
    MAX_FLASH,
    Flash,
    chart,
    format_time,
    retry_summary,
    time_element,
)
from hookinbox.times import relative_time

NOW = datetime(2026, 12, 1, 5, 33, 36, 123456, tzinfo=UTC)


def test_times_carry_milliseconds_and_read_relative() -> None:
    assert format_time(NOW) == "2026-12-01 05:33:36.123"
    assert relative_time(NOW - timedelta(seconds=12), NOW) == "12 s ago"
    assert relative_time(NOW - timedelta(minutes=5, seconds=3), NOW) == "5 min ago"
    assert relative_time(NOW - timedelta(hours=3), NOW) == "3 h ago"
    assert relative_time(NOW + timedelta(minutes=2), NOW) == "in 2 min"
    assert relative_time(NOW - timedelta(milliseconds=300), NOW) == "now"
    # The CLI's table says the same in at most 10 characters, the date past 99 days.
    assert relative_time(NOW - timedelta(minutes=5, seconds=3), NOW, compact=True) == "5m ago"
    assert relative_time(NOW + timedelta(days=6), NOW, compact=True) == "in 6d"
    assert relative_time(NOW - timedelta(days=99), NOW, compact=True) == "99d ago"
    assert relative_time(NOW - timedelta(days=100), NOW, compact=True) == "2026-08-23"
    shown = str(time_element(NOW - timedelta(seconds=90), NOW))
    assert 'title="2026-12-01 05:32:06.123 UTC"' in shown and ">1 min ago<" in shown
    assert 'datetime="2026-12-01T05:32:06.123Z"' in shown


def test_the_chart_draws_failures_beside_receipts_on_labelled_axes() -> None:
    first = int(NOW.timestamp() // 60) - 59
    minutes = [{"minute": first + i} for i in range(60)]
    minutes[10].update(accepted=6, duplicate=2)
    minutes[10]["failed"] = 3
    minutes[59]["rejected"] = 1
    drawn = chart(minutes)
    assert drawn["peak"] == 8 and drawn["failed"] == 3
    kinds = [bar["kind"] for bar in drawn["bars"]]
    assert kinds == ["accepted", "duplicate", "failed", "rejected"]
    assert [label["text"] for label in drawn["y_labels"]] == ["0", "4", "8"]
    assert len(drawn["x_labels"]) == 5 and drawn["x_labels"][-1]["text"] == "05:33"
    empty = chart([{"minute": first + i} for i in range(60)])
    assert empty["bars"] == [] and [y["text"] for y in empty["y_labels"]] == ["0"]


def test_a_bulk_retry_summary_names_the_refused_and_stays_bounded() -> None:
    results = [(f"dlv_{n}:crm", None) for n in range(3)] + [("dlv_x:crm", "not_failed")]
    assert retry_summary(results) == (
        "retried 4 dead letter(s): 3 requeued; 1 refused: dlv_x:crm (not_failed)"
    )
    many = [(f"dlv_{'9' * 40}_{n}:crm", "not_failed") for n in range(200)]
    assert len(retry_summary(many)) <= MAX_FLASH


def test_a_flash_is_read_back_only_when_well_formed() -> None:
    assert Flash.from_query({"kind": "done", "flash": "x retried"}) == Flash("done", "x retried")
    assert Flash.from_query({"kind": "evil", "flash": "x"}) is None
    assert Flash.from_query({"kind": "done", "flash": "a\x00b"}) is None
    assert Flash.from_query({"kind": "done", "flash": "x" * (MAX_FLASH + 1)}) is None


def test_a_flash_made_from_any_message_reads_back_the_same() -> None:
    made = Flash.of("problem", "refused: job \x1b[31m" + "x" * 2000)
    assert Flash.from_query(made.query()) == made
    assert len(made.text) == MAX_FLASH and "\x1b" not in made.text
