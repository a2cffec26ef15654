"""Issue 10 on the admin: what an operator's browser (or anyone's) sends is checked and
refused with 400, never a 500; a logout ends the session for good; failed logins are
throttled. Store-agnostic, so once, on SQLite."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

import httpx
import pytest

from hookinbox.admin.auth import COOKIE, Sessions
from tests.admin.support import TOKEN, admin_config, login, serving
from tests.support.inbox import running_inbox
from tests.support.signing import delivery
from tests.support.waiting import wait_for


def csrf_of(page: str) -> str:
    return page.split('name="csrf" value="', 1)[1].split('"', 1)[0]


@pytest.mark.parametrize(
    "query",
    [
        "since=" + "9" * 400,
        "until=" + "9" * 400,
        "since=%C2%B2",  # "²"
        "since=1e400",
        "since=10000-01-01T00:00",
        "since=" + "2026-01-01T00:00" + "0" * 100,
        "ref=evt%00x",
        "type=crm%0Alead",
        "source=" + "s" * 500,
        "before=dlv%00",
    ],
)
async def test_a_delivery_search_with_an_odd_filter_is_a_400_page(
    sqlite_url: str, query: str
) -> None:
    async with running_inbox(admin_config(sqlite_url)) as inbox, httpx.AsyncClient() as client:
        await login(client, inbox.base_url)
        answer = await client.get(f"{inbox.base_url}/admin/deliveries?{query}")
    assert answer.status_code == 400, answer.text[:300]
    assert "invalid_argument" in answer.text or "not" in answer.text


async def test_a_time_filter_in_range_still_works(sqlite_url: str) -> None:
    async with running_inbox(admin_config(sqlite_url)) as inbox, httpx.AsyncClient() as client:
        await login(client, inbox.base_url)
        for since in ("1700000000", "1700000000.5", "2026-01-31T12:00", "2026-01-31T12:00Z"):
            answer = await client.get(f"{inbox.base_url}/admin/deliveries?since={quote(since)}")
            assert answer.status_code == 200, since


async def test_the_filter_forms_empty_fields_are_any_not_a_400(sqlite_url: str) -> None:
    """The admin's filter forms send every field, empty for "any" (the JSON API refuses
    an empty filter: a client's never means "any"); each page reads them as not given."""
    forms = {
        "/admin/deliveries": ("ref", "source", "type", "status", "since", "until", "where"),
        "/admin/dead-letters": ("source", "reason"),
        "/admin/dead-letters/retry-matching": ("source", "action", "reason", "since", "until"),
    }
    async with running_inbox(admin_config(sqlite_url)) as inbox, httpx.AsyncClient() as client:
        await login(client, inbox.base_url)
        for path, fields in forms.items():
            empty = "&".join(f"{field}=" for field in fields)
            answer = await client.get(f"{inbox.base_url}{path}?{empty}")
            assert answer.status_code == 200, (path, answer.text[:300])


@pytest.mark.parametrize(
    "path",
    [
        "/admin/deliveries/dlv%00x",
        "/admin/dead-letters?source=a%00",
        "/admin/dead-letters?before=%1B",
    ],
)
async def test_a_control_character_in_an_id_or_filter_is_a_400_page(
    sqlite_url: str, path: str
) -> None:
    async with running_inbox(admin_config(sqlite_url)) as inbox, httpx.AsyncClient() as client:
        await login(client, inbox.base_url)
        answer = await client.get(inbox.base_url + path)
    assert answer.status_code == 400


async def test_a_dead_letter_page_cursor_that_is_not_a_job_id_is_a_400_page(
    tmp_path: Path,
) -> None:
    """The dead letters' page cursor is held to the form the page hands out (a job id), as
    the deliveries' and the rejected deliveries' are: anything else is invalid_argument,
    never read as a cursor (a whole first page). Served by the real ``hookinbox serve``."""
    with serving(tmp_path) as (port, _):
        base = f"http://127.0.0.1:{port}"
        async with httpx.AsyncClient(timeout=10) as client:
            await login(client, base)
            pages = {
                cursor: await client.get(f"{base}/admin/dead-letters?before={quote(cursor)}")
                for cursor in (
                    "garbage",
                    "dlv_x:crm",
                    "dlv_" + "0" * 32,
                    "dlv_" + "0" * 32 + ":crm",
                )
            }
    for cursor in ("garbage", "dlv_x:crm", "dlv_" + "0" * 32):
        answer = pages[cursor]
        assert answer.status_code == 400, (cursor, answer.text[:300])
        assert "invalid_argument" in answer.text and "page cursor" in answer.text, cursor
    assert pages["dlv_" + "0" * 32 + ":crm"].status_code == 200


async def test_retry_selected_with_a_limit_of_superscript_two_is_a_400(sqlite_url: str) -> None:
    async with running_inbox(admin_config(sqlite_url)) as inbox, httpx.AsyncClient() as client:
        await client.post(inbox.url(), content=(d := delivery("evt_dead"))[0], headers=d[1])
        await login(client, inbox.base_url)

        async def dead() -> bool:
            found = await inbox.store.journal.get_delivery("evt_dead")
            return found is not None and found.status == "failed"

        await wait_for(dead, 15, "the flaky handler to dead-letter")
        found = await inbox.store.journal.get_delivery("evt_dead")
        assert found is not None
        page = await client.get(f"{inbox.base_url}/admin/dead-letters")
        form = {"csrf": csrf_of(page.text), "job_id": found.jobs[0].id}
        for limit in ("\u00b2", "9" * 400, "-1", "1.5"):
            answer = await client.post(
                f"{inbox.base_url}/admin/dead-letters/retry-selected", data={**form, "limit": limit}
            )
            assert answer.status_code == 400, limit


async def test_pausing_with_a_control_character_in_the_reason_is_a_400(sqlite_url: str) -> None:
    async with running_inbox(admin_config(sqlite_url)) as inbox, httpx.AsyncClient() as client:
        await login(client, inbox.base_url)
        page = await client.get(f"{inbox.base_url}/admin/sources")
        answer = await client.post(
            f"{inbox.base_url}/admin/sources/test/pause",
            data={"csrf": csrf_of(page.text), "reason": "maintenance\x00"},
        )
        assert answer.status_code == 400
        assert not any(state.paused for state in await inbox.store.sources.list_source_states())


async def test_pausing_with_a_reason_over_200_characters_is_refused_not_cut(
    sqlite_url: str,
) -> None:
    """The reason is checked where every surface pauses (``ops.pause_source``): 200
    characters at most, as the CLI and the API take, never a cut one stored as given."""
    async with running_inbox(admin_config(sqlite_url)) as inbox, httpx.AsyncClient() as client:
        await login(client, inbox.base_url)
        page = await client.get(f"{inbox.base_url}/admin/sources")
        url = f"{inbox.base_url}/admin/sources/test/pause"
        form = {"csrf": csrf_of(page.text)}
        answer = await client.post(url, data={**form, "reason": "r" * 201})
        assert answer.status_code == 400, answer.text[:300]
        assert "<code>invalid_argument</code>: the reason is not valid" in answer.text
        assert not any(state.paused for state in await inbox.store.sources.list_source_states())
        # The spaces around a reason are not part of it: 200 characters within them fit.
        taken = await client.post(url, data={**form, "reason": f" {'r' * 200} "})
        assert taken.status_code == 303, taken.text[:300]
        (state,) = await inbox.store.sources.list_source_states()
        assert (state.paused, state.reason) == (True, "r" * 200)


@pytest.mark.parametrize("expiry", ["\u00b2", "9" * 400, "-1"])
async def test_a_correctly_signed_cookie_with_an_odd_expiry_is_no_session(
    sqlite_url: str, expiry: str
) -> None:
    body = f"0123456789abcdef.{expiry}.tester"
    forged = f"{body}.{Sessions(TOKEN)._mac(body)}"
    async with running_inbox(admin_config(sqlite_url)) as inbox, httpx.AsyncClient() as client:
        answer = await client.get(
            f"{inbox.base_url}/admin/",
            headers={"cookie": f"{COOKIE}={forged}".encode("latin-1")},  # type: ignore[dict-item]
            follow_redirects=False,
        )
    assert answer.status_code == 303
    assert answer.headers["location"].startswith("/admin/login")


async def test_a_session_cookie_is_worthless_after_its_logout(sqlite_url: str) -> None:
    async with running_inbox(admin_config(sqlite_url)) as inbox, httpx.AsyncClient() as client:
        await login(client, inbox.base_url)
        copied = client.cookies[COOKIE]
        page = await client.get(f"{inbox.base_url}/admin/")
        assert page.status_code == 200
        out = await client.post(
            f"{inbox.base_url}/admin/logout",
            data={"csrf": csrf_of(page.text)},
            follow_redirects=False,
        )
        assert out.status_code == 303
        async with httpx.AsyncClient(cookies={COOKIE: copied}) as thief:
            again = await thief.get(f"{inbox.base_url}/admin/", follow_redirects=False)
    assert again.status_code == 303
    assert again.headers["location"].startswith("/admin/login")


async def test_failed_logins_are_throttled_with_429_even_for_the_right_token(
    sqlite_url: str,
) -> None:
    async with running_inbox(admin_config(sqlite_url)) as inbox, httpx.AsyncClient() as client:
        url = f"{inbox.base_url}/admin/login"
        statuses = [
            (await client.post(url, data={"token": f"guess-{n}"})).status_code for n in range(5)
        ]
        assert statuses == [401] * 5
        throttled = await client.post(url, data={"token": "guess-6"})
        assert throttled.status_code == 429
        assert 1 <= int(throttled.headers["retry-after"]) <= 61
        assert "Too many failed logins" in throttled.text
        right = await client.post(url, data={"token": TOKEN}, follow_redirects=False)
        assert right.status_code == 429  # the token is not even compared meanwhile
