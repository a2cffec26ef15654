"""An event id without its source is found through the dedup key (source, event_id), one
probe per source of the journal: the receive path writes no index on event_id alone."""

from __future__ import annotations

import dataclasses

from hookinbox.store import Store
from tests.store.test_contract import new_delivery


async def test_an_event_id_is_found_in_every_source_that_has_it(store: Store) -> None:
    rows = [
        dataclasses.replace(new_delivery("evt_shared"), source=source)
        for source in ("alpha", "beta", "gamma")
    ]
    rows.append(dataclasses.replace(new_delivery("evt_other"), source="beta"))
    for row in rows:
        (answer,) = await store.journal.reserve_deliveries([row])
        assert answer.outcome == "accepted"

    found = await store.journal.find_deliveries_by_event("evt_shared")
    assert sorted(v.source for v in found) == ["alpha", "beta", "gamma"]
    only = await store.journal.find_deliveries_by_event("evt_shared", "beta")
    assert [v.id for v in only] == [rows[1].id]
    assert await store.journal.find_deliveries_by_event("evt_missing") == []

    by_event = await store.journal.get_delivery("evt_other")
    assert by_event is not None and by_event.id == rows[3].id
    in_source = await store.journal.get_delivery("evt_shared", "gamma")
    assert in_source is not None and in_source.id == rows[2].id
    by_id = await store.journal.get_delivery(rows[0].id)
    assert by_id is not None and by_id.source == "alpha"
    assert await store.journal.get_delivery("evt_shared", "delta") is None
