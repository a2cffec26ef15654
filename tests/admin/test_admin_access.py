"""Who gets into /admin: a token, a cookie, a CSRF token on every POST; nothing else."""

from __future__ import annotations

import httpx
import pytest

from hookinbox.admin.views import COOKIE
from tests.admin.support import TOKEN, admin_config, login
from tests.support.inbox import running_inbox
from tests.support.signing import delivery
from tests.support.waiting import wait_for

GET_ROUTES = [
    "/admin/",
    "/admin/deliveries",
    "/admin/deliveries?ref=evt_1&status=failed",
    "/admin/deliveries/dlv_X",
    "/admin/dead-letters",
    "/admin/dead-letters/confirm?job_id=dlv_X:crm",
    "/admin/sources",
    "/admin/sources?reconcile=1",
    "/admin/rejected",
    "/admin/destinations",
]
POST_ROUTES = [
    "/admin/logout",
    "/admin/deliveries/dlv_X/payload",
    "/admin/deliveries/dlv_X/replay",
    "/admin/dead-letters/retry",
    "/admin/dead-letters/retry-selected",
    "/admin/sources/test/pause",
    "/admin/sources/test/resume",
]


async def test_every_admin_route_without_the_cookie_is_refused(sqlite_url: str) -> None:
    async with running_inbox(admin_config(sqlite_url)) as inbox, httpx.AsyncClient() as client:
        for path in GET_ROUTES:
            answer = await client.get(inbox.base_url + path, follow_redirects=False)
            assert answer.status_code == 303, path
            assert answer.headers["location"].startswith("/admin/login?next="), path
        for path in POST_ROUTES:
            answer = await client.post(inbox.base_url + path, data={"csrf": "x"})
            assert answer.status_code == 401, path
        # A forged or tampered cookie is no better than none.
        client.cookies.set(COOKIE, "abc.9999999999.tester.forged", path="/admin")
        answer = await client.get(inbox.base_url + "/admin/", follow_redirects=False)
        assert answer.status_code == 303


async def test_a_wrong_token_is_refused_and_the_right_one_sets_a_strict_cookie(
    sqlite_url: str,
) -> None:
    async with running_inbox(admin_config(sqlite_url)) as inbox, httpx.AsyncClient() as client:
        base = inbox.base_url
        wrong = await client.post(f"{base}/admin/login", data={"token": TOKEN + "x"})
        assert wrong.status_code == 401
        assert "not valid" in wrong.text
        assert COOKIE not in client.cookies
        right = await client.post(
            f"{base}/admin/login",
            data={"token": TOKEN, "name": "ana", "next": "/admin/sources"},
            follow_redirects=False,
        )
        assert right.status_code == 303
        assert right.headers["location"] == "/admin/sources"
        cookie = right.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/admin" in cookie
        assert TOKEN not in cookie
        page = await client.get(f"{base}/admin/sources")
        assert page.status_code == 200 and "ana" in page.text
        assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
        # next= never leads out of the admin.
        away = await client.post(
            f"{base}/admin/login",
            data={"token": TOKEN, "next": "https://evil.example/"},
            follow_redirects=False,
        )
        assert away.headers["location"] == "/admin/"


async def test_a_post_without_the_csrf_token_changes_nothing(sqlite_url: str) -> None:
    async with running_inbox(admin_config(sqlite_url)) as inbox, httpx.AsyncClient() as client:
        await login(client, inbox.base_url)
        answer = await client.post(
            f"{inbox.base_url}/admin/sources/test/pause", data={"reason": "x", "csrf": "bad"}
        )
        assert answer.status_code == 403
        states = await inbox.store.sources.list_source_states()
        assert not any(state.paused for state in states)


async def test_the_admin_is_off_without_a_token(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HOOKINBOX_ADMIN_TOKEN")
    async with running_inbox(admin_config(sqlite_url)) as inbox, httpx.AsyncClient() as client:
        for path in ("/admin/", "/admin/login"):
            assert (await client.get(inbox.base_url + path)).status_code == 404
        answer = await client.post(f"{inbox.base_url}/admin/login", data={"token": ""})
        assert answer.status_code == 404


async def test_viewing_a_payload_is_an_explicit_post_and_is_audited(sqlite_url: str) -> None:
    async with running_inbox(admin_config(sqlite_url)) as inbox, httpx.AsyncClient() as client:
        body, headers = delivery("evt_secretive", note="PAYLOAD-MARKER")
        await client.post(inbox.url(), content=body, headers=headers)
        await login(client, inbox.base_url)
        found = await inbox.store.journal.get_delivery("evt_secretive")
        assert found is not None
        page = await client.get(f"{inbox.base_url}/admin/deliveries/{found.id}")
        assert page.status_code == 200
        assert "PAYLOAD-MARKER" not in page.text and "Show payload" in page.text
        csrf = page.text.split('name="csrf" value="', 1)[1].split('"', 1)[0]
        shown = await client.post(
            f"{inbox.base_url}/admin/deliveries/{found.id}/payload", data={"csrf": csrf}
        )
        assert shown.status_code == 303 and "PAYLOAD-MARKER" not in shown.text
        for _ in range(2):  # the page it leads to, and a reload of it
            page = await client.get(inbox.base_url + shown.headers["location"])
            assert page.status_code == 200 and "PAYLOAD-MARKER" in page.text
        audit = await inbox.store.audit.list_operator_actions(delivery_id=found.id)
        assert [(a.command, a.actor) for a in audit] == [("view-payload", "admin:tester")]
        # The grant in that address is this session's and this delivery's only.
        location = shown.headers["location"]
        async with httpx.AsyncClient() as other:
            await login(other, inbox.base_url)
            assert "PAYLOAD-MARKER" not in (await other.get(inbox.base_url + location)).text

        async def failed() -> bool:
            d = await inbox.store.journal.get_delivery(found.id)
            return d is not None and d.status == "failed"

        await wait_for(failed, 10, "the flaky handler to dead-letter")
