"""`MetadataStore` on ZooKeeper where it could differ from etcd: znodes under the chroot,
compare-and-swap between processes, the watch-fed cache fed by another ZooKeeper client,
and leases as the session."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError

from metastore import paths
from metastore.backend import Change, ChangeKind, ChangeStream
from metastore.cache import WatchedRange
from metastore.change_history import ChangeContext, ChangeLog, KeyChange, recording
from metastore.errors import BadVersion, Unavailable
from metastore.guards import Guard
from metastore.ledger_ids import LedgerIdGenerator
from metastore.store import MetadataStore, open_metadata_store
from metastore.versioned import Versioned
from metastore.versioned_keys import VersionedKeys
from metastore.zookeeper_backend import ZooKeeperBackend
from tests.support import CuttableProxy, wait_until_async
from tests.zookeeper import EmbeddedZooKeeper

CHROOT = "/pulsar-test"
BOOKIE = "/ledgers/available/b1:3181"
StoreFactory = Callable[..., Awaitable[MetadataStore]]


@pytest.fixture
def kazoo(zookeeper: EmbeddedZooKeeper) -> Iterator[KazooClient]:
    """Another ZooKeeper client, as zkCli.sh or a Pulsar broker would be (no chroot)."""
    zookeeper.wipe()
    client = KazooClient(hosts=zookeeper.hosts(), timeout=10)
    client.start(10)
    yield client
    client.stop()
    client.close()


@pytest.fixture
async def open_store(
    zookeeper: EmbeddedZooKeeper, kazoo: KazooClient
) -> AsyncIterator[StoreFactory]:
    opened: list[MetadataStore] = []

    async def open_one(
        session_timeout: float = 30.0, pipeline_depth: int = 1
    ) -> MetadataStore:
        backend = ZooKeeperBackend(zookeeper.hosts(), CHROOT, timeout=5,
                                   session_timeout=session_timeout)
        store = MetadataStore([], timeout=5, zookeeper=backend, pipeline_depth=pipeline_depth)
        opened.append(store)
        return store

    yield open_one
    for store in opened:
        await store.close()


async def test_paths_are_znodes_under_the_chroot(
    open_store: StoreFactory, kazoo: KazooClient
) -> None:
    store = await open_store()
    await store.put("/admin/clusters/us-west", b'{"serviceUrl":"http://x:8080"}')
    data, _ = kazoo.get(f"{CHROOT}/admin/clusters/us-west")
    assert data == b'{"serviceUrl":"http://x:8080"}'
    kazoo.create(f"{CHROOT}/admin/clusters/eu", b'{"serviceUrl":"http://y"}')
    found = await store.get_json("/admin/clusters/eu")
    assert found == {"serviceUrl": "http://y"}
    assert await store.children("/admin/clusters") == ["eu", "us-west"]


async def test_concurrent_updates_from_two_processes_lose_nothing(
    open_store: StoreFactory,
) -> None:
    first, second = await open_store(), await open_store()

    def add(name: str) -> Callable[[object], object]:
        def mutate(doc: object) -> object:
            racks = dict(doc) if isinstance(doc, dict) else {}
            racks[name] = {"rack": "/r1"}
            return racks
        return mutate

    writes = [store.update_json("/bookies", add(f"b{i}:3181"))
              for i in range(40) for store in [(first, second)[i % 2]]]
    await asyncio.gather(*writes)
    stored = await first.get_json("/bookies")
    assert sorted(stored) == sorted(f"b{i}:3181" for i in range(40))


async def test_a_group_commit_batch_keeps_its_change_records_in_one_znode(
    open_store: StoreFactory, kazoo: KazooClient
) -> None:
    store = await open_store()

    async def add(item: int) -> None:
        with recording(ChangeContext(None, None, "POST", f"/item/{item}")):
            await store.update_json("/bookies", lambda doc: [*(doc or []), item])

    await asyncio.gather(*(add(i) for i in range(20)))
    records = await store.read_changes()
    assert sorted(r.body["path"] for r in records) == sorted(f"/item/{i}" for i in range(20))
    znodes = kazoo.get_children(CHROOT + paths.CHANGE_HISTORY)
    assert len(znodes) == len({r.revision for r in records}) < 20  # one znode a batch
    assert sum(ChangeLog.records_in(name) for name in znodes) == 20


async def test_pipelined_batches_lose_no_update_beside_other_writers(
    open_store: StoreFactory, kazoo: KazooClient
) -> None:
    """Batches sent while the one before is in flight (recorded, so guarded by that batch's
    record and version), from two processes, while a third client writes the same znode."""
    first, second = await open_store(pipeline_depth=2), await open_store(pipeline_depth=2)
    await first.put("/bookies", b"{}")

    async def add(index: int) -> None:
        store = (first, second)[index % 2]
        with recording(ChangeContext(None, None, "POST", f"/item/{index}")):
            await store.update_json("/bookies", lambda doc: {**doc, f"b{index}": index})

    def outside() -> None:  # compare-and-swap, as zkCli.sh or a broker would
        for index in range(20):
            while True:
                raw, stat = kazoo.get(CHROOT + "/bookies")
                doc = {**json.loads(raw), f"k{index}": index}
                try:
                    kazoo.set(CHROOT + "/bookies", json.dumps(doc).encode(), stat.version)
                    break
                except BadVersionError:
                    continue

    await asyncio.gather(asyncio.to_thread(outside), *(add(i) for i in range(80)))
    stored = await first.get_json("/bookies")
    assert stored == {**{f"b{i}": i for i in range(80)}, **{f"k{i}": i for i in range(20)}}
    records = await first.read_changes(limit=1000)
    assert sorted(r.body["path"] for r in records) == sorted(f"/item/{i}" for i in range(80))
    for record in records:  # each record's before and after are what its own update saw
        change = record.body["changes"][0]
        index = int(record.body["path"].rsplit("/", 1)[1])
        assert f"b{index}" not in change["before"] and change["after"][f"b{index}"] == index
        assert change["after"] == {**change["before"], f"b{index}": index}


async def test_a_batch_sent_behind_one_that_fails_fails_too(
    open_store: StoreFactory, kazoo: KazooClient
) -> None:
    """Group commit's two writes in flight at once: the second is guarded by the first's
    record and the version it leaves, so it lands exactly when the first did."""
    store = await open_store()
    context = ChangeContext(None, None, "POST", "/item")

    def record(before: bytes, after: bytes) -> tuple[str, bytes]:
        return store.change_record(context, KeyChange("/k", before, after))

    async def two_writes(revision: int) -> list[int | BaseException]:
        first = asyncio.create_task(store.swap("/k", Guard("/k", revision), b"2",
                                               [record(b"1", b"2")]))  # fmt: skip
        second = asyncio.create_task(store.swap("/k", Guard.holds("/k", b"2"), b"3",
                                                [record(b"2", b"3")]))  # fmt: skip
        return await asyncio.gather(first, second, return_exceptions=True)

    revision = await store.put("/k", b"1")
    kazoo.set(CHROOT + "/k", b"X")  # another client: the first write's guard fails
    first, second = await two_writes(revision)
    assert isinstance(first, BadVersion) and isinstance(second, BadVersion)
    assert kazoo.get(CHROOT + "/k")[0] == b"X"
    assert await store.read_changes() == []

    revision = await store.put("/k", b"1")
    first, second = await two_writes(revision)
    assert isinstance(first, int) and isinstance(second, int) and first < second
    assert kazoo.get(CHROOT + "/k")[0] == b"3"
    assert [r.body["changes"][0]["after"] for r in await store.read_changes()] == [2, 3]


async def test_cache_serves_another_clients_writes(
    open_store: StoreFactory, kazoo: KazooClient
) -> None:
    store = await open_store()
    await store.put("/bookies", b"{}")
    cache = WatchedRange(store, "/bookies")
    children = WatchedRange(store, "/ledgers/available", prefix=True)
    await cache.start()
    await children.start()
    try:
        assert cache.synced and children.synced
        kazoo.set(f"{CHROOT}/bookies", b'{"default":{}}')
        def updated() -> bool:
            found = cache.peek("/bookies")
            return isinstance(found, Versioned) and found.value == b'{"default":{}}'

        await wait_until_async(updated, timeout=1.0)
        kazoo.create(f"{CHROOT}/ledgers/available/b1:3181", b"reg", makepath=True)
        await wait_until_async(lambda: isinstance(children.peek(BOOKIE), Versioned))
        kazoo.delete(f"{CHROOT}/ledgers/available/b1:3181")
        await wait_until_async(lambda: children.peek(BOOKIE) is None)
        kazoo.delete(f"{CHROOT}/bookies")
        await wait_until_async(lambda: cache.peek("/bookies") is None)
    finally:
        await cache.stop()
        await children.stop()


async def test_a_watch_takes_this_processs_own_write_from_its_reply(
    open_store: StoreFactory, kazoo: KazooClient, zookeeper: EmbeddedZooKeeper
) -> None:
    """The notification of a write this process has in flight is answered with what the
    write wrote, without reading ZooKeeper (here paused); another client's write is read."""
    store = await open_store()
    backend = store.backend
    assert isinstance(backend, ZooKeeperBackend)
    await store.put("/bookies", b"{}")
    stream = await backend.watch()
    await store.put("/bookies", b'{"mine":{}}')
    mine = await _next_change(stream, "/bookies")
    zookeeper.pause()
    try:
        async with asyncio.timeout(1):
            found = await backend.state_after(mine)
    finally:
        zookeeper.resume()
    assert found is not None and found.value == b'{"mine":{}}'
    assert found.revision == (await store.get("/bookies") or Versioned(b"", 0)).revision
    kazoo.set(f"{CHROOT}/bookies", b'{"theirs":{}}')
    theirs = await _next_change(stream, "/bookies")
    found = await backend.state_after(theirs)
    assert found is not None and found.value == b'{"theirs":{}}'
    stream.close()


async def _next_change(stream: ChangeStream, path: str) -> Change:
    while True:
        change = await stream.next(timeout=10)
        assert change is not None
        if change.path == path and change.kind is not ChangeKind.RESYNC:
            return change


async def test_cache_ends_at_the_stored_value_after_interleaved_writers(
    open_store: StoreFactory, kazoo: KazooClient
) -> None:
    """This process's writes (answered from their replies) and another client's (read)
    interleaved on one key: the watch-fed cache ends where ZooKeeper is, both ways round."""
    store = await open_store()
    await store.put("/bookies", b"{}")
    cache = WatchedRange(store, "/bookies")
    await cache.start()

    def other_client(rounds: int) -> None:
        for n in range(rounds):
            kazoo.set(f"{CHROOT}/bookies", f'{{"other":{{"n":{n}}}}}'.encode())

    def stored() -> bool:
        found = cache.peek("/bookies")
        value, _ = kazoo.get(f"{CHROOT}/bookies")
        return isinstance(found, Versioned) and found.value == value

    try:
        ours = [store.update_json("/bookies", lambda doc, n=n: {**(doc or {}), "ours": n})
                for n in range(100)]
        await asyncio.gather(asyncio.to_thread(other_client, 100), *ours)
        await wait_until_async(stored)
        await store.update_json("/bookies", lambda doc: {**(doc or {}), "last": True})
        await wait_until_async(stored)
        other_client(1)
        await wait_until_async(stored)
    finally:
        await cache.stop()


async def test_lease_is_the_session(open_store: StoreFactory, kazoo: KazooClient) -> None:
    owner, other = await open_store(session_timeout=4), await open_store()
    lease = await owner.grant_lease(ttl=4)
    await owner.put_ephemeral("/ledgers/available/b1:3181", b"reg", lease)
    assert await other.lease_of("/ledgers/available/b1:3181") == lease
    _, stat = kazoo.get(f"{CHROOT}/ledgers/available/b1:3181")
    assert stat.ephemeralOwner == lease
    assert await owner.refresh_lease(lease)
    await owner.revoke_lease(lease)
    assert await other.get("/ledgers/available/b1:3181") is None

    lease = await owner.grant_lease(ttl=4)
    await owner.put_ephemeral("/ledgers/available/b1:3181", b"reg", lease)
    assert isinstance(owner.backend, ZooKeeperBackend)
    await owner.backend.expire_session()
    await wait_until_async(lambda: not kazoo.exists(f"{CHROOT}/ledgers/available/b1:3181"), 20)
    assert not await owner.refresh_lease(lease)
    renewed = await owner.grant_lease(ttl=4)
    assert renewed != lease
    await owner.put_ephemeral("/ledgers/available/b1:3181", b"again", renewed)
    assert await other.lease_of("/ledgers/available/b1:3181") == renewed
    # another process ends the registration (a bookie stopped by the service): it goes now
    await other.revoke_lease(renewed)
    assert await owner.get("/ledgers/available/b1:3181") is None


async def test_ledger_ids_are_zookeeper_sequential_znodes(
    open_store: StoreFactory, kazoo: KazooClient
) -> None:
    """As BookKeeper's `ZkLedgerIdGenerator`: an ephemeral-sequential `ID-` znode per id,
    deleted at once; two generators (two sessions) never share an id."""
    first, second = await open_store(), await open_store()
    generators = [LedgerIdGenerator(VersionedKeys(store)) for store in (first, second)]
    ids = await asyncio.gather(*(generators[i % 2].generate() for i in range(40)))
    assert len(set(ids)) == 40
    assert kazoo.get_children(f"{CHROOT}/ledgers/idgen") == []
    for generator in generators:
        await generator.close()


async def test_key_range_scans_page_in_key_order(open_store: StoreFactory) -> None:
    store = await open_store()
    keys = [f"/ledgers/00/000{h}/L000{n}" for h in range(3) for n in range(4)]
    for key in keys:
        await store.put(key, key.encode())
    await store.put("/ledgers/LAYOUT", b"layout")
    await store.put("/ledgers/underreplication/ledgers/0000/0000/urL0001", b"mark")
    seen: list[str] = []
    start = "/ledgers/0"
    while True:
        items, more = await store.scan(start, "/ledgers/:", limit=5)
        seen += [path for path, _, _ in items]
        assert all(value == path.encode() and version == 1 for path, value, version in items)
        if not more:
            break
        start = items[-1][0] + "\0"
    assert seen == keys
    marks, more = await store.scan("/ledgers/underreplication/ledgers/",
                                   "/ledgers/underreplication/ledgers0", limit=10)
    assert [path for path, _, _ in marks] == [
        "/ledgers/underreplication/ledgers/0000/0000/urL0001"] and not more


async def test_a_session_request_left_unanswered_is_given_up_after_the_store_timeout(
    zookeeper: EmbeddedZooKeeper, kazoo: KazooClient
) -> None:
    """ZooKeeper 3.8 leaves a session request that reaches it while it starts unanswered
    (`metastore.embedded_zookeeper`); a relay that accepts connections and delivers nothing
    stands for it here, then delivers again. The store gives that request up after the store
    timeout (2 s), not the session timeout, and writes again on its next connection."""
    proxy = CuttableProxy(zookeeper.port)
    backend = ZooKeeperBackend(f"127.0.0.1:{proxy.port}", CHROOT, timeout=2,
                               session_timeout=60)  # fmt: skip
    store = MetadataStore([], timeout=2, zookeeper=backend)
    try:
        await store.put("/k", b"1")
        proxy.hold(requests=True)
        proxy.cut(keep_holding=True)
        await wait_until_async(lambda: len(proxy.held_requests) > 0)  # the session request
        proxy.release()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 10  # kazoo alone waited 16-19 s here
        while True:
            try:
                await store.put("/k", b"2")
                break
            except Unavailable:
                assert loop.time() < deadline, "no ZooKeeper session in time"
        assert kazoo.get(f"{CHROOT}/k")[0] == b"2"
    finally:
        await store.close()
        proxy.close()


async def test_zookeeper_killed_and_restarted_under_writers_loses_no_acknowledged_update(
    tmp_path: Path,
) -> None:
    """Two stores add bookies to `/bookies` while ZooKeeper is killed (-9) and restarted on
    its data: both writers go on once it is back, and every update acknowledged to a writer
    is in the document afterwards."""
    server = EmbeddedZooKeeper(tmp_path / "zk")
    server.start()
    stores = [open_metadata_store(f"zk:{server.hosts()}/p", timeout=3) for _ in range(2)]
    acknowledged: list[str] = []
    stop = asyncio.Event()

    async def writer(store: MetadataStore, name: str) -> None:
        n = 0
        while not stop.is_set():
            bookie = f"{name}-{n}:3181"
            try:
                await store.update_json("/bookies", lambda doc, b=bookie: {
                    **(doc or {}), b: {"rack": "/r"}})
                acknowledged.append(bookie)
            except Unavailable:
                await asyncio.sleep(0.05)
            n += 1

    def each_wrote(count: int, since: int = 0) -> Callable[[], bool]:
        return lambda: all(
            sum(b.startswith(f"w{i}-") for b in acknowledged[since:]) >= count
            for i in range(len(stores)))

    try:
        tasks = [asyncio.create_task(writer(store, f"w{i}")) for i, store in enumerate(stores)]
        await wait_until_async(each_wrote(10), 30)
        assert server.process is not None
        server.process.kill()
        server.process.wait()
        written_before = len(acknowledged)
        server.start()
        # A writer whose reconnection reached the server while it was starting gets no
        # answer from ZooKeeper 3.8 (`metastore.embedded_zookeeper`): it gives the request up
        # after the store timeout (3 s) and reconnects (`metastore.zookeeper_backend`).
        await wait_until_async(each_wrote(10, since=written_before), 60)
        stop.set()
        await asyncio.gather(*tasks)
        stored = await stores[0].get_json("/bookies")
        assert set(acknowledged) <= set(stored)
    finally:
        stop.set()
        for store in stores:
            await store.close()
        server.stop()
