"""The two scenarios of the mission, as their examples run them, on both stores.

CRM (examples/crm): an OpenAI ``response.completed`` delivered twice creates one CRM task;
a worker killed between the CRM call and the record is recovered by ``find``.
Video (examples/video): task events move tenant-owned tasks only forward and notify once.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.examples.support import run_example

pytestmark = pytest.mark.slow


def test_the_crm_example_makes_one_task_per_event_and_recovers_a_crash(
    db_url: str, tmp_path: Path
) -> None:
    output, summary = run_example("crm", tmp_path, "--database", db_url)
    assert summary["first_answers"] == ["accepted", "duplicate"]
    assert summary["late_retry"] == "duplicate"
    assert summary["crash_exit_code"] == 70
    assert summary["tasks_per_event"] == {"evt_crm_1": 1, "evt_crm_2": 1}
    # The crashed worker's call and the first event's: find() made no third call.
    assert summary["create_calls"] == 2
    recovered = summary["recovered_job"]
    assert (recovered["state"], recovered["attempts"]) == ("completed", 2)
    assert recovered["business_id"] == "task_2"
    assert recovered["effects"] == [["crm-task:evt_crm_2", "recorded"]]
    assert "Exactly one task per event." in output


def test_the_video_example_moves_tasks_only_forward_and_notifies_once(
    db_url: str, tmp_path: Path
) -> None:
    output, summary = run_example("video", tmp_path, "--database", db_url)
    assert summary["outcomes"] == {
        "evt_A1": "applied",
        "evt_A2": "applied",
        "evt_A3": "applied",
        "evt_A4": "rejected_transition",
        "evt_B1": "tenant_mismatch",
        "evt_C1": "parked",
        "evt_C1:after_attach": "applied",
    }
    assert summary["repeat"] == "duplicate"
    assert summary["states"] == {"mine": "ready", "theirs": "submitted", "early": "ready"}
    assert summary["transitions"] == [
        [None, "submitted", "created", None],
        ["submitted", "queued", "applied", None],
        ["queued", "processing", "applied", None],
        ["processing", "ready", "applied", None],
        ["ready", "processing", "rejected", "from_terminal"],
    ]
    ids = summary["ids"]
    expected = sorted([f"video-ready:{ids['mine']}", f"video-ready:{ids['early']}"])
    assert summary["notified"] == expected
    assert summary["notify_requests"] == {key: 1 for key in expected}
    assert ids["theirs"] not in " ".join(summary["notified"])
    assert "each key delivered once" in output
