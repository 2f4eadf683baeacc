"""The change history (`GET /admin/v2/changes`; its CLI: tests/cli/commands/test_changes.py)
and the per-client write rate limit, against real servers on the session's etcd.

Two servers on the same etcd, and two on the same ZooKeeper, take 32 concurrent writers; every
acknowledged write must have exactly one record, in revision order, each key's before/after
chain unbroken and ending at what the store holds."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from metastore import paths
from metastore.embedded import EmbeddedEtcd
from tests.support import RawEtcd, RawStore, ServerProcess, TokenServers, token, wait_until
from tests.zookeeper import EmbeddedZooKeeper, RawZooKeeper

WRITERS = 32
ROUNDS = 3
GROUP = {"group": "default"}
SUPER = "history-admin"
ROLES = ("writer-a", "writer-b", "writer-c", "writer-d")  # super-users: each its own budget


def history_conf(**extra: str) -> dict[str, str]:
    return {"initializeClusterMetadata": "false", **extra}


def start_both(first: ServerProcess, second: ServerProcess) -> None:
    """Start both servers, or neither: `first` is stopped when `second` fails to start."""
    first.start()
    try:
        second.start()
    except BaseException:
        first.stop()
        raise


@pytest.fixture(scope="module")
def two_servers(
    etcd: EmbeddedEtcd, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    first = ServerProcess(etcd.url, tmp_path_factory.mktemp("history-a"),
                          extra_conf=history_conf())  # fmt: skip
    second = ServerProcess(etcd.url, tmp_path_factory.mktemp("history-b"),
                           extra_conf=history_conf())  # fmt: skip
    start_both(first, second)
    yield first, second
    first.stop()
    second.stop()


@pytest.fixture
def store(raw_etcd: RawEtcd, two_servers: tuple[ServerProcess, ServerProcess]) -> RawEtcd:
    raw_etcd.wipe()
    for server in two_servers:
        wait_until(lambda s=server: httpx.get(f"{s.url}/admin/v2/bookies/racks-info").json() == {})
    raw_etcd.put(paths.cluster("test"), {"serviceUrl": "http://localhost:8080"})
    return raw_etcd


@pytest.fixture(scope="module")
def zookeeper_servers(
    zookeeper: EmbeddedZooKeeper, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[ServerProcess, ServerProcess, RawZooKeeper]]:
    """Two servers on the session's ZooKeeper (keys under `/history-test`), and direct
    access to it."""
    url = f"zk:{zookeeper.hosts()}/history-test"
    first = ServerProcess(url, tmp_path_factory.mktemp("history-zk-a"), extra_conf=history_conf())
    second = ServerProcess(url, tmp_path_factory.mktemp("history-zk-b"),
                           extra_conf=history_conf())  # fmt: skip
    raw = RawZooKeeper(zookeeper.hosts(), "/history-test")
    start_both(first, second)
    yield first, second, raw
    first.stop()
    second.stop()
    raw.close()


@pytest.fixture(params=["etcd", "zookeeper"])
def history_servers(request: pytest.FixtureRequest
                    ) -> tuple[ServerProcess, ServerProcess, RawStore]:  # fmt: skip
    """Two servers on one store, each on etcd and on ZooKeeper, over an empty store with a
    cluster `test`."""
    if request.param == "etcd":
        first, second = request.getfixturevalue("two_servers")
        return first, second, request.getfixturevalue("store")
    first, second, raw = request.getfixturevalue("zookeeper_servers")
    raw.wipe()
    for server in (first, second):
        wait_until(lambda s=server: httpx.get(f"{s.url}/admin/v2/bookies/racks-info").json() == {})
    raw.put(paths.cluster("test"), {"serviceUrl": "http://localhost:8080"})
    return first, second, raw


def all_changes(url: str, since: int = 0, page: int = 50, **params: str) -> list[dict[str, Any]]:
    """Every record after `since`, read in pages of `page` (exercises paging by revision)."""
    found: list[dict[str, Any]] = []
    with httpx.Client(base_url=url, timeout=30) as http:
        while True:
            response = http.get("/admin/v2/changes",
                                params={"since": since, "limit": page, **params})  # fmt: skip
            assert response.status_code == 200, response.text
            batch = response.json()
            if not batch:
                return found
            found += batch
            since = batch[-1]["revision"]


def last_revision(url: str) -> int:
    records = all_changes(url)
    return records[-1]["revision"] if records else 0


def writer(url: str, index: int, acked: list[tuple[str, str]], errors: list[str]) -> None:
    """Rack writes (fast path, group commit on `/bookies`), a tenant's create, update and
    delete (guarded commits), each acknowledged one noted as (method, path)."""
    bookie = f"10.1.0.{index}:3181"
    tenant = f"tenant-{index}"
    steps: list[tuple[str, str, Any]] = [
        ("POST", f"/admin/v2/bookies/racks-info/{bookie}", {"rack": f"/rack-{index}-{k}"})
        for k in range(ROUNDS)
    ]
    steps += [
        ("PUT", f"/admin/v2/tenants/{tenant}", {"allowedClusters": ["test"]}),
        ("POST", f"/admin/v2/tenants/{tenant}", {"allowedClusters": ["test"], "adminRoles": ["a"]}),
        ("DELETE", f"/admin/v2/tenants/{tenant}", None),
    ]
    with httpx.Client(base_url=url, timeout=60) as http:
        for method, path, body in steps:
            response = http.request(method, path, json=body,
                                    params={"group": "default"} if "racks" in path else None)
            if response.status_code < 300:
                acked.append((method, path))
            else:
                errors.append(f"{method} {path}: {response.status_code} {response.text}")


def test_history_is_complete_and_ordered_under_concurrent_writers_on_two_servers(
    history_servers: tuple[ServerProcess, ServerProcess, RawStore],
) -> None:
    first, second, store = history_servers
    since = last_revision(first.url)
    acked: list[tuple[str, str]] = []
    errors: list[str] = []
    threads = [
        threading.Thread(target=writer, args=((first, second)[i % 2].url, i, acked, errors))
        for i in range(WRITERS)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads)
    assert errors == []
    assert len(acked) == WRITERS * (ROUNDS + 3)

    records = all_changes(second.url, since)
    # Exactly one record per acknowledged write.
    assert Counter((r["method"], r["path"]) for r in records) == Counter(acked)
    # In revision order; the records of one transaction share its revision.
    revisions = [r["revision"] for r in records]
    assert revisions == sorted(revisions)
    assert len(set(revisions)) < len(revisions)  # group commit shared transactions
    assert {r["clientAddress"] for r in records} == {"127.0.0.1"}
    assert {r["role"] for r in records} == {None}
    # Each key's before/after chain is unbroken and ends at what etcd holds.
    last_after: dict[str, Any] = {}
    for record in records:
        for change in record["changes"]:
            key = change["key"]
            if key in last_after:
                assert change["before"] == last_after[key], (key, record)
            last_after[key] = change["after"]
    assert last_after[paths.BOOKIES_RACK_CONFIG] == store.get_json(paths.BOOKIES_RACK_CONFIG)
    rack_records = [r for r in records if r["path"].startswith("/admin/v2/bookies/")]
    assert rack_records[0]["changes"][0]["before"] is None  # the first write created the map
    for index in range(WRITERS):
        tenant_key = paths.tenant(f"tenant-{index}")
        assert last_after[tenant_key] is None and store.get(tenant_key) is None


def test_a_failed_write_records_nothing_and_prefix_filters(
    two_servers: tuple[ServerProcess, ServerProcess], store: RawEtcd
) -> None:
    url = two_servers[0].url
    with httpx.Client(base_url=url, timeout=30) as http:
        assert http.put("/admin/v2/tenants/kept", json={"allowedClusters": ["test"]}).is_success
        since = last_revision(url)
        failures = [
            http.delete("/admin/v2/bookies/racks-info/10.9.9.9:3181"),  # 404
            http.put("/admin/v2/tenants/kept", json={"allowedClusters": ["test"]}),  # 409
            http.put("/admin/v2/tenants/other", json={"allowedClusters": ["nope"]}),  # 412
            http.post("/admin/v2/bookies/racks-info/10.9.9.9:3181", json={"rack": [5]}),  # 400
        ]
        assert [r.status_code for r in failures] == [404, 409, 412, 400]
        assert all_changes(url, since) == []
        assert http.post("/admin/v2/bookies/racks-info/10.9.9.8:3181",
                         json={"rack": "/r1"}, params=GROUP).status_code == 204  # fmt: skip
        assert http.delete("/admin/v2/tenants/kept").status_code == 204
    after = all_changes(url, since)
    assert [(r["method"], r["path"]) for r in after] == [
        ("POST", "/admin/v2/bookies/racks-info/10.9.9.8:3181"),
        ("DELETE", "/admin/v2/tenants/kept"),
    ]
    deleted = after[1]["changes"]
    assert deleted == [{"key": paths.tenant("kept"), "partial": False,
                        "before": {"allowedClusters": ["test"]},
                        "after": None}]  # fmt: skip
    assert [r["path"] for r in all_changes(url, since, prefix="/admin/policies")] == [
        "/admin/v2/tenants/kept"
    ]
    assert [r["path"] for r in all_changes(url, since, prefix="/bookies")] == [
        "/admin/v2/bookies/racks-info/10.9.9.8:3181"
    ]


@pytest.fixture(scope="module")
def limited_server(token_server: TokenServers, raw_etcd: RawEtcd) -> ServerProcess:
    """Authentication on, and one write per 5 s per client: the second write of a burst is
    over the limit however slow the machine is."""
    raw_etcd.wipe()
    return token_server(",".join((SUPER, *ROLES)),
                        httpWriteRequestsPerClientLimitEnabled="true",
                        httpWriteRequestsPerClientMaxPerSecond="0.2")


def bearer(role: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token(role)}"}


def test_records_carry_the_role_never_the_token_and_need_super_user(
    limited_server: ServerProcess, raw_etcd: RawEtcd
) -> None:
    url = limited_server.url
    since = 0
    with httpx.Client(base_url=url, timeout=30) as http:
        since = (http.get("/admin/v2/changes", headers=bearer(SUPER)).json() or [{}])[-1].get(
            "revision", 0
        )
        assert http.post("/admin/v2/bookies/racks-info/10.4.0.1:3181", json={"rack": "/r1"},
                         params=GROUP, headers=bearer(ROLES[0])).status_code == 204  # fmt: skip
        assert http.put("/admin/v2/clusters/c1", json={"serviceUrl": "http://c1"},
                        headers=bearer(ROLES[1])).is_success  # fmt: skip
        records = http.get("/admin/v2/changes", params={"since": since},
                           headers=bearer(SUPER)).json()  # fmt: skip
        assert [(r["role"], r["path"]) for r in records] == [
            (ROLES[0], "/admin/v2/bookies/racks-info/10.4.0.1:3181"),
            (ROLES[1], "/admin/v2/clusters/c1"),
        ]
        refused = http.get("/admin/v2/changes", headers=bearer("someone"))
        assert refused.status_code == 401
        assert refused.json() == {"reason": "This operation requires super-user access"}
        assert http.get("/admin/v2/changes").status_code == 401
    stored = b"".join(raw_etcd.snapshot().values())
    log = (limited_server.workdir / "server.log").read_text()
    for role in (SUPER, *ROLES[:2]):
        assert token(role).encode() not in stored and token(role) not in log
    assert b"Bearer" not in stored


def test_write_rate_limit_per_client_answers_429_and_never_limits_reads(
    limited_server: ServerProcess, raw_etcd: RawEtcd
) -> None:
    first, second = bearer(ROLES[2]), bearer(ROLES[3])
    with httpx.Client(base_url=limited_server.url, timeout=30) as http:
        rack = "/admin/v2/bookies/racks-info/10.5.0.1:3181"
        written = http.post(rack, json={"rack": "/r1"}, headers=first, params=GROUP)
        assert written.status_code == 204
        for _ in range(20):  # reads are never limited
            assert http.get("/admin/v2/bookies/racks-info", headers=first).status_code == 200
        # The fast path (JSON rack write) and a routed write are both limited.
        over = [http.post(rack, json={"rack": "/r2"}, headers=first, params=GROUP),
                http.put("/admin/v2/clusters/c2", json={"serviceUrl": "http://c2"},
                         headers=first)]  # fmt: skip
        for response in over:
            assert response.status_code == 429
            assert 1 <= int(response.headers["Retry-After"]) <= 5
            assert "per second" in response.json()["reason"]
        # Another role has its own budget.
        other = http.post(rack, json={"rack": "/r3"}, headers=second, params=GROUP)
        assert other.status_code == 204
        # Without a valid token the client is its address (then refused by authentication).
        assert http.post(rack, json={"rack": "/r4"}, params=GROUP).status_code == 401
        assert http.post(rack, json={"rack": "/r4"}, params=GROUP).status_code == 429
    # The refused writes changed nothing.
    assert raw_etcd.get_json(paths.BOOKIES_RACK_CONFIG)["default"]["10.5.0.1:3181"] == {
        "rack": "/r3"
    }
    assert raw_etcd.get(paths.cluster("c2")) is None


def test_x_forwarded_for_is_honoured_only_when_trusted(
        etcd: EmbeddedEtcd, store: RawEtcd, two_servers: tuple[ServerProcess, ServerProcess],
        tmp_path: Path) -> None:
    """Pulsar's webServiceTrustXForwardedFor: off (the default), the peer's address is
    recorded whatever the header says; on, the header's."""
    untrusting = two_servers[0]
    trusting = ServerProcess(etcd.url, tmp_path / "trusting", extra_conf={
        **history_conf(), "webServiceTrustXForwardedFor": "true"}).start()
    try:
        since = max([0, *(r["revision"] for r in all_changes(untrusting.url))])
        spoof = {"X-Forwarded-For": "203.0.113.9"}
        for server, rack in ((untrusting, "/r1"), (trusting, "/r2")):
            assert httpx.post(f"{server.url}/admin/v2/bookies/racks-info/b1:3181",
                              params={"group": "g"}, json={"rack": rack},
                              headers=spoof).status_code == 204
        records = all_changes(untrusting.url, since)
        addresses = [r["clientAddress"] for r in records]
        assert addresses == ["127.0.0.1", "203.0.113.9"]
    finally:
        trusting.stop()
