"""The store seam's contract, run on both backends against real servers: versions and
compare-and-swap, create-if-absent, children, atomic multi, sequential ids, ephemeral
lifetime, session loss, the change stream's order and its resync."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from metastore.backend import (
    CREATE,
    Change,
    ChangeKind,
    ChangeStream,
    Check,
    Delete,
    Put,
    SessionEvent,
    StoreBackend,
)
from metastore.embedded import EmbeddedEtcd
from metastore.errors import AlreadyExists, BadVersion, NotFound, Unavailable
from metastore.etcd_backend import EtcdBackend
from metastore.zookeeper_backend import ZooKeeperBackend
from tests.support import RawEtcd, pause
from tests.zookeeper import EmbeddedZooKeeper

BackendFactory = Callable[..., Awaitable[StoreBackend]]


@pytest.fixture(params=["etcd", "zookeeper"])
async def open_backend(
    request: pytest.FixtureRequest, etcd: EmbeddedEtcd, raw_etcd: RawEtcd
) -> AsyncIterator[BackendFactory]:
    """Opens backends on a wiped store (as many as a test needs: each its own session)."""
    opened: list[StoreBackend] = []
    kind = request.param
    if kind == "zookeeper":
        zookeeper: EmbeddedZooKeeper = request.getfixturevalue("zookeeper")
        zookeeper.wipe()
    else:
        raw_etcd.wipe()

    async def open_one(session_timeout: float = 30.0) -> StoreBackend:
        backend: StoreBackend
        if kind == "zookeeper":
            backend = ZooKeeperBackend(zookeeper.hosts(), "/pulsar", timeout=5,
                                       session_timeout=session_timeout)
        else:
            backend = EtcdBackend([etcd.endpoint], timeout=5,
                                  session_timeout=max(int(session_timeout), 2))
        opened.append(backend)
        return backend

    yield open_one
    for backend in opened:
        await backend.close()


async def test_versions_and_compare_and_swap(open_backend: BackendFactory) -> None:
    store = await open_backend()
    assert await store.get("/admin/clusters/c1") is None
    created = await store.put("/admin/clusters/c1", b"one", CREATE)
    assert created.version == 0
    found = await store.get("/admin/clusters/c1")
    assert found is not None and (found.value, found.version) == (b"one", 0)
    assert found.revision == created.revision
    second = await store.put("/admin/clusters/c1", b"two", 0)
    assert second.version == 1 and second.revision > created.revision
    with pytest.raises(BadVersion):
        await store.put("/admin/clusters/c1", b"lost", 0)
    with pytest.raises(BadVersion):
        await store.put("/admin/clusters/absent", b"x", 3)
    third = await store.put("/admin/clusters/c1", b"three")
    assert third.version == 2
    found = await store.get("/admin/clusters/c1")
    assert found is not None and found.value == b"three"


async def test_create_if_absent(open_backend: BackendFactory) -> None:
    store = await open_backend()
    await store.put("/bookies", b"{}", CREATE)
    with pytest.raises(AlreadyExists):
        await store.put("/bookies", b"other", CREATE)
    found = await store.get("/bookies")
    assert found is not None and found.value == b"{}"


async def test_delete_with_and_without_version(open_backend: BackendFactory) -> None:
    store = await open_backend()
    await store.put("/a/b", b"1", CREATE)
    await store.put("/a/b", b"2", 0)
    with pytest.raises(BadVersion):
        await store.delete("/a/b", 0)
    await store.delete("/a/b", 1)
    assert await store.get("/a/b") is None
    with pytest.raises(NotFound):
        await store.delete("/a/b")


async def test_children_one_level_sorted(open_backend: BackendFactory) -> None:
    store = await open_backend()
    for path in ("/admin/policies/t2", "/admin/policies/t1", "/admin/policies/t1/ns1"):
        await store.put(path, b"{}")
    await store.put("/admin/policiesX/other", b"{}")
    assert await store.children("/admin/policies") == ["t1", "t2"]
    assert await store.children("/admin/policies/t1") == ["ns1"]
    assert await store.children("/nothing/here") == []


async def test_multi_is_all_or_nothing(open_backend: BackendFactory) -> None:
    store = await open_backend()
    await store.put("/m/a", b"a0", CREATE)
    await store.put("/m/gone", b"g", CREATE)
    results = await store.multi([
        Put("/m/a", b"a1", 0), Put("/m/new", b"n", CREATE), Put("/m/free", b"f"),
        Delete("/m/gone"), Check("/m/absent", CREATE),
    ])  # fmt: skip
    assert [r is None for r in results] == [False, False, False, True, True]
    assert results[0] is not None and results[0].version == 1
    assert results[1] is not None and results[1].version == 0
    assert results[1].revision > 0
    assert await store.get("/m/gone") is None
    assert await store.get("/m/absent") is None
    before = {p: await store.get(p) for p in ("/m/a", "/m/new", "/m/free")}
    for failing in (Check("/m/a", 0), Check("/m/new", CREATE), Put("/m/free", b"x", 7)):
        with pytest.raises(BadVersion):
            await store.multi([Put("/m/a", b"lost", 1), Delete("/m/new"), failing])
        assert {p: await store.get(p) for p in before} == before


async def test_sequential_ids_are_numbered_as_pulsar_does(open_backend: BackendFactory) -> None:
    store = await open_backend()
    first = await store.create_sequential("/ledgers/idgen/ID-", b"", ephemeral=False)
    second = await store.create_sequential("/ledgers/idgen/ID-", b"", ephemeral=True)
    assert first.startswith("/ledgers/idgen/ID-") and len(first) == len("/ledgers/idgen/ID-") + 10
    assert int(second[-10:]) > int(first[-10:])
    found = await store.get(second)
    assert found is not None and found.ephemeral


async def test_ephemeral_entries_live_with_their_session(open_backend: BackendFactory) -> None:
    owner = await open_backend()
    reader = await open_backend()
    await owner.put("/ledgers/available/b1:3181", b"reg", CREATE, ephemeral=True)
    found = await reader.get("/ledgers/available/b1:3181")
    assert found is not None and found.ephemeral
    await owner.close()
    assert await reader.get("/ledgers/available/b1:3181") is None


async def test_session_loss_drops_ephemerals_and_is_announced(
    open_backend: BackendFactory,
) -> None:
    owner = await open_backend(session_timeout=4)
    reader = await open_backend()
    events: list[SessionEvent] = []
    owner.add_session_listener(events.append)
    await owner.put("/loadbalance/brokers/b1", b"up", CREATE, ephemeral=True)
    await owner.put("/persistent/doc", b"stays")
    await owner.expire_session()
    deadline = asyncio.get_running_loop().time() + 20
    while SessionEvent.SESSION_REESTABLISHED not in events:
        assert asyncio.get_running_loop().time() < deadline, events
        await asyncio.sleep(0.05)
    assert SessionEvent.SESSION_LOST in events
    assert events.index(SessionEvent.SESSION_LOST) < events.index(
        SessionEvent.SESSION_REESTABLISHED)
    assert await reader.get("/loadbalance/brokers/b1") is None
    found = await reader.get("/persistent/doc")
    assert found is not None and found.value == b"stays"
    # the new session carries ephemerals again
    await owner.put("/loadbalance/brokers/b1", b"again", CREATE, ephemeral=True)
    found = await reader.get("/loadbalance/brokers/b1")
    assert found is not None and found.ephemeral


async def _changes(stream: ChangeStream, count: int) -> list[Change]:
    seen: list[Change] = []
    while len(seen) < count:
        change = await stream.next(timeout=10)
        assert change is not None
        if change.kind is not ChangeKind.RESYNC:
            seen.append(change)
    return seen


async def test_change_stream_in_store_order(open_backend: BackendFactory) -> None:
    watcher = await open_backend()
    writer = await open_backend()
    await writer.put("/w/existing", b"0")
    stream = await watcher.watch()
    await writer.put("/w/k", b"1", CREATE)
    for version in range(5):
        await writer.put("/w/k", f"v{version}".encode(), version)
    await writer.delete("/w/k")
    await writer.multi([Put("/w/existing", b"1"), Put("/w/t", b"t", CREATE)])
    seen = await _changes(stream, 9)
    assert seen[:7] == [Change(ChangeKind.CREATED, "/w/k"),
                        *[Change(ChangeKind.MODIFIED, "/w/k")] * 5,
                        Change(ChangeKind.DELETED, "/w/k")]
    assert sorted(seen[7:], key=lambda c: c.path) == [
        Change(ChangeKind.MODIFIED, "/w/existing"), Change(ChangeKind.CREATED, "/w/t")]
    stream.close()


async def test_unreachable_store_fails_in_time_and_recovers(
    request: pytest.FixtureRequest, open_backend: BackendFactory
) -> None:
    """Paused server: a call fails with `Unavailable` within the timeout; resumed: the same
    backend serves again, and its change stream carries the writes after it (on ZooKeeper
    after a `RESYNC`: the server forgot the connection's watch, and a write sent before the
    watch is added again is not notified; the `RESYNC` that follows it tells readers to read
    again)."""
    store = await open_backend(session_timeout=6)
    await store.put("/f/k", b"before")
    stream = await store.watch()
    fixture = "zookeeper" if isinstance(store, ZooKeeperBackend) else "etcd"
    process = request.getfixturevalue(fixture).process
    assert process is not None
    loop = asyncio.get_running_loop()
    pause(process)
    try:
        started = loop.time()
        with pytest.raises(Unavailable):
            await store.put("/f/k", b"during")
        assert loop.time() - started < 10
    finally:
        process.send_signal(signal.SIGCONT)
    deadline = loop.time() + 30
    while True:  # serving again; a write that timed out may still land (its outcome is
        try:     # unknown to the caller), so write until the value read back is ours
            await store.put("/f/k", b"after")
            found = await store.get("/f/k")
            if found is not None and found.value == b"after":
                break
        except Unavailable:
            pass
        assert loop.time() < deadline
        await asyncio.sleep(0.2)
    if fixture == "zookeeper":
        # The write above may have reached ZooKeeper before the watch was added again (the
        # client reports connected before its state listener queues `addWatch`): the writes
        # the stream carries are those after its `RESYNC`.
        while (change := await stream.next(timeout=20)) != Change(ChangeKind.RESYNC, "/"):
            assert change is not None
        await store.put("/f/k", b"after the resync")
    while True:
        change = await stream.next(timeout=20)
        assert change is not None
        if change == Change(ChangeKind.MODIFIED, "/f/k"):
            break
