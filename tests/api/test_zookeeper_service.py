"""The service on ZooKeeper where it could differ from etcd: a write by another ZooKeeper
client served from the cache, the change history, the SSE watch, and ZooKeeper paused and
resumed (503 within the request deadline, then serving again)."""

from __future__ import annotations

import json
import signal

import httpx
import pytest

from tests.api.test_watch import sse_events
from tests.support import ServerProcess, wait_until
from tests.zookeeper import EmbeddedZooKeeper, RawZooKeeper

pytestmark = pytest.mark.parametrize("store_kind", ["zookeeper"], indirect=True)

RACK = {"rack": "/rack-1", "hostname": "b1"}


def test_a_write_by_another_client_is_served_within_a_second(
    admin: httpx.Client, clean_store: RawZooKeeper
) -> None:
    clean_store.put("/bookies", {"default": {"b9:3181": {"rack": "/r9"}}})
    wait_until(lambda: admin.get("/admin/v2/bookies/racks-info").json() ==
               {"default": {"b9:3181": {"rack": "/r9"}}}, timeout=1.0)  # fmt: skip
    clean_store.delete("/bookies")
    wait_until(lambda: admin.get("/admin/v2/bookies/racks-info").json() == {}, timeout=1.0)


def test_rack_writes_land_in_the_znode_with_their_history(
    admin: httpx.Client, clean_store: RawZooKeeper
) -> None:
    for rack in ("/rack-1", "/rack-2"):
        response = admin.post("/admin/v2/bookies/racks-info/b1:3181",
                              params={"group": "default"}, json={**RACK, "rack": rack})
        assert response.status_code == 204, response.text
    assert clean_store.get_json("/bookies") == {
        "default": {"b1:3181": {"rack": "/rack-2", "hostname": "b1"}}}
    records = admin.get("/admin/v2/changes", params={"prefix": "/bookies"}).json()
    assert [r["changes"][0]["key"] for r in records] == ["/bookies", "/bookies"]
    assert records[0]["revision"] < records[1]["revision"]
    assert records[1]["changes"][0]["before"] == {
        "default": {"b1:3181": {"rack": "/rack-1", "hostname": "b1"}}}


def test_sse_watch_streams_changes(
    store_server: ServerProcess, clean_store: RawZooKeeper
) -> None:
    with (
        httpx.Client(base_url=store_server.url, timeout=10) as client,
        client.stream("GET", "/admin/v2/watch", params={"prefix": "bookies"}) as response,
    ):
        assert response.status_code == 200
        lines = response.iter_lines()
        assert next(lines).startswith(": watching bookies from revision ")
        written = client.post("/admin/v2/bookies/racks-info/b1:3181",
                              params={"group": "default"}, json=RACK)
        assert written.status_code == 204, written.text
        clean_store.put("/ledgers/available/b2:3181", b"x")
        seen = []
        for event in sse_events(lines):
            seen.append((event.event, json.loads(event.data)["key"]))
            if ("put", "/ledgers/available/b2:3181") in seen:
                break
    assert ("put", "/bookies") in seen


def test_paused_zookeeper_is_503_then_serves_again(
    admin: httpx.Client, clean_store: RawZooKeeper, zookeeper: EmbeddedZooKeeper
) -> None:
    assert zookeeper.process is not None
    zookeeper.pause()
    try:
        response = admin.post("/admin/v2/bookies/racks-info/b1:3181",
                              params={"group": "default"}, json=RACK, timeout=30)
        assert response.status_code == 503, response.text
        assert response.json()["reason"]
    finally:
        zookeeper.process.send_signal(signal.SIGCONT)

    def written() -> bool:
        again = admin.post("/admin/v2/bookies/racks-info/b1:3181",
                           params={"group": "default"}, json=RACK, timeout=30)
        return again.status_code == 204

    wait_until(written, timeout=60, interval=0.5)
    assert admin.get("/admin/v2/bookies/racks-info").json() == {"default": {"b1:3181": RACK}}
