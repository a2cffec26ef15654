"""Every surface shows every trace layer and reconcile check the inbox has: the
``hookinbox`` command in a subprocess, the JSON API and the admin over HTTP against a real
``hookinbox serve``, and the library. A late event's rejected transition is in each trace,
and each reconciliation runs the tracked resources' checks beside the pipeline's."""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Any

import httpx

from hookinbox import ops
from hookinbox.app import Inbox, standard_operator_views
from hookinbox.ops.reconcile import PIPELINE_CHECKS
from hookinbox.resources.checks import CHECKS as RESOURCE_CHECKS
from hookinbox.resources.trace import TRACE_LAYERS
from tests.resources.support import video_event
from tests.support.inbox import make_config
from tests.support.processes import (
    HookinboxProcess,
    free_port,
    hookinbox_env,
    run_hookinbox,
    wait_until,
)
from tests.support.signing import SECRET_ENV

ADMIN_TOKEN = "admin-token-for-surfaces-0123456789"
API_TOKEN = "reader-token-for-surfaces-0123456789"
#: What the inbox has: the pipeline's checks and the tracked resources' ones and layers.
CHECKS = {c.name for c in PIPELINE_CHECKS} | {c.name for c in RESOURCE_CHECKS}
TITLES = {c.title for c in (*PIPELINE_CHECKS, *RESOURCE_CHECKS)}
LAYERS = set(TRACE_LAYERS)


def _config(path: Path, db_url: str, port: int) -> Path:
    path.write_text(
        f"database = {json.dumps(db_url)}\n"
        f'[server]\nhost = "127.0.0.1"\nport = {port}\n'
        "[worker]\nconcurrency = 2\npoll_interval_seconds = 0.1\nlease_seconds = 2\n"
        f'[sources.test]\nscheme = "standard-webhooks"\nsecret_env = "{SECRET_ENV}"\n'
        '[[sources.test.routes]]\nevents = ["video.*"]\naction = "video"\n'
        '[sources.test.routes.resource]\nkind = "video"\nref = "/data/task_id"\n'
        'tenant = "/data/tenant_id"\nowner = "/data/owner_id"\nevent_time = "/data/at"\n'
        "[outbox]\nunsent_after_seconds = 0.001\n"
    )
    return path


def _transitions(trace: dict[str, Any]) -> list[tuple[str, str]]:
    (traced,) = trace["deliveries"]
    assert set(traced) >= LAYERS, sorted(traced)
    return [(t["outcome"], t["reason"]) for t in traced["transitions"]]


def test_the_library_builds_the_full_set_and_no_call_can_leave_it_out(db_url: str) -> None:
    views = standard_operator_views()
    assert {c.name for c in views.checks} == CHECKS
    assert set(views.trace_layers) == LAYERS
    inbox = Inbox(make_config(db_url), run_workers=False)
    assert {c.name for c in inbox.views.checks} == CHECKS
    assert set(inbox.views.trace_layers) == LAYERS
    # No default stands in for a forgotten argument.
    required = [
        inspect.signature(ops.reconcile).parameters["checks"],
        inspect.signature(ops.trace).parameters["layers"],
        *inspect.signature(ops.OperatorViews).parameters.values(),
    ]
    assert [p.name for p in required if p.default is not inspect.Parameter.empty] == []


def test_cli_api_and_admin_show_every_check_and_trace_layer(db_url: str, tmp_path: Path) -> None:
    port = free_port()
    config = _config(tmp_path / "hookinbox.toml", db_url, port)
    env = hookinbox_env(
        {"HOOKINBOX_ADMIN_TOKEN": ADMIN_TOKEN, "HOOKINBOX_API_TOKENS": f"ci:read:{API_TOKEN}"}
    )
    server = HookinboxProcess(["serve", "--config", str(config)], env, tmp_path / "serve.log")
    base = f"http://127.0.0.1:{port}"
    try:
        server.start()
        server.wait_healthy(base)
        created = run_hookinbox(config, "resources", "create", "video", "--tenant", "acme",
                       "--owner", "user-1", "--ref", "prov-1", "--json")  # fmt: skip
        assert created.returncode == 0, created.stderr
        auth = {"authorization": f"Bearer {API_TOKEN}"}
        with httpx.Client(timeout=10) as client:
            for event_id, status in (("evt_ready", "ready"), ("evt_late", "processing")):
                body, headers = video_event(event_id, status, "prov-1")
                answer = client.post(f"{base}/webhooks/test", content=body, headers=headers)
                assert answer.json()["status"] == "accepted"

                def settled(event_id: str = event_id) -> bool:
                    found = client.get(f"{base}/api/v1/deliveries/{event_id}", headers=auth)
                    return found.status_code == 200 and found.json()["journal"]["status"] == (
                        "completed"
                    )

                wait_until(settled, 20, f"{event_id} to complete", step=0.2)

            # The CLI.
            traced = run_hookinbox(config, "trace", "evt_late", "--json")
            assert traced.returncode == 0, traced.stderr
            assert _transitions(json.loads(traced.stdout)) == [("rejected", "from_terminal")]
            reconciled = run_hookinbox(config, "reconcile", "--json")
            cli_checks = {f["check"] for f in json.loads(reconciled.stdout)["findings"]}
            assert cli_checks == CHECKS
            # An outbox row nobody sends (no [outbox] sender here) is found, not "clean".
            assert reconciled.returncode == 1

            # The API.
            api_trace = client.get(f"{base}/api/v1/deliveries/evt_late", headers=auth)
            assert api_trace.status_code == 200, api_trace.text
            late = {"deliveries": [api_trace.json()]}
            assert _transitions(late) == [("rejected", "from_terminal")]
            api_report = client.get(f"{base}/api/v1/reconcile", headers=auth)
            assert {f["check"] for f in api_report.json()["findings"]} == CHECKS

            # The admin.
            login = client.post(f"{base}/admin/login", data={"token": ADMIN_TOKEN, "name": "t"})
            assert login.status_code == 303, login.text[:300]
            page = client.get(f"{base}/admin/sources", params={"reconcile": "1"}).text
            assert [t for t in TITLES if t not in page] == []
            delivery_id = api_trace.json()["journal"]["delivery_id"]
            shown = client.get(f"{base}/admin/deliveries/{delivery_id}").text
            assert "rejected: from_terminal" in shown
    finally:
        server.stop()
