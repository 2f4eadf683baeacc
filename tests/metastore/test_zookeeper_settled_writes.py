"""A write whose ZooKeeper call fails after its request was sent is settled as on etcd
(`metastore.settling`): it answers as the write did when it landed, fails with nothing
written when it did not (reads on the session that sent it see every write it can make),
and is `OutcomeUnknown` when that cannot be known in time; a write never sent is
`Unavailable`. A real ZooKeeper behind a `CuttableProxy`."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator, Callable, Iterator

import pytest

from metastore.cache import WatchedRange
from metastore.change_history import ChangeContext, recording
from metastore.errors import OutcomeUnknown, Unavailable
from metastore.store import MetadataStore, Versioned
from metastore.zookeeper_backend import ZooKeeperBackend
from tests.support import CuttableProxy, wait_until, wait_until_async
from tests.zookeeper import EmbeddedZooKeeper, RawZooKeeper

CHROOT = "/settle-test"
KEY = "/bookies"
CONTEXT = ChangeContext(role=None, address="127.0.0.1", method="POST",
                        path="/admin/v2/bookies/racks-info/b1:3181")
TIMEOUT = 2.0  # the call 0.8 s of it, finding out 0.8 s


@pytest.fixture
def raw(zookeeper: EmbeddedZooKeeper) -> Iterator[RawZooKeeper]:
    client = RawZooKeeper(zookeeper.hosts(), CHROOT)
    client.wipe()
    yield client
    client.close()


@pytest.fixture
def proxy(zookeeper: EmbeddedZooKeeper) -> Iterator[CuttableProxy]:
    relay = CuttableProxy(zookeeper.port)
    yield relay
    relay.close()


@pytest.fixture
def timeout() -> float:
    return TIMEOUT


@pytest.fixture
async def cut_store(
    proxy: CuttableProxy, raw: RawZooKeeper, timeout: float
) -> AsyncIterator[MetadataStore]:
    """A store reaching ZooKeeper through the proxy; `KEY` holds v0, mirrored by a
    watch-fed cache, and a first recorded write has made the history's parent (updates
    start from the cache: the write's `multi` is the only call)."""
    backend = ZooKeeperBackend(f"127.0.0.1:{proxy.port}", CHROOT, timeout=timeout)
    store = MetadataStore([], timeout=timeout, zookeeper=backend)
    with recording(CONTEXT):
        await store.put(KEY, b"v0")
    cache = WatchedRange(store, KEY)
    await cache.start()
    assert isinstance(cache.peek(KEY), Versioned)
    yield store
    await cache.stop()
    await store.close()


async def landed(raw: RawZooKeeper, value: bytes) -> None:
    await asyncio.to_thread(wait_until, lambda: raw.get(KEY) == value)


@pytest.mark.parametrize("history", [False, True], ids=["no-history", "history"])
async def test_a_write_whose_reply_is_lost_answers_as_applied(
    cut_store: MetadataStore, proxy: CuttableProxy, raw: RawZooKeeper, history: bool
) -> None:
    before = len(await cut_store.read_changes())
    proxy.hold(replies=True)
    with recording(CONTEXT if history else None):
        write = asyncio.create_task(cut_store.update(KEY, lambda _: b"v1"))
    await landed(raw, b"v1")
    proxy.cut()  # the reply is lost with the connection
    after = await write
    assert after is not None and after.value == b"v1"
    assert (await cut_store.get(KEY)) == after  # the revision it was applied at
    assert len(await cut_store.read_changes()) == before + (1 if history else 0)


@pytest.mark.parametrize("history", [False, True], ids=["no-history", "history"])
async def test_a_write_cut_before_it_reaches_zookeeper_is_unavailable_and_not_applied(
    cut_store: MetadataStore, proxy: CuttableProxy, raw: RawZooKeeper, history: bool
) -> None:
    records = await cut_store.read_changes()
    proxy.hold(requests=True)
    with recording(CONTEXT if history else None):
        write = asyncio.create_task(cut_store.update(KEY, lambda _: b"v1"))
    # the write's own request is sent, and held (not only a ping sent before it)
    await asyncio.to_thread(wait_until, lambda: b"v1" in proxy.held_requests)
    proxy.cut()  # the request is dropped with the connection
    with pytest.raises(Unavailable) as failed:
        await write
    assert not isinstance(failed.value, OutcomeUnknown)
    assert raw.get(KEY) == b"v0"
    assert await cut_store.read_changes() == records
    after = await cut_store.update(KEY, lambda _: b"v2")  # and the store writes again
    assert after is not None and raw.get(KEY) == b"v2"


async def test_a_versioned_set_whose_reply_is_lost_answers_as_written(
    cut_store: MetadataStore, proxy: CuttableProxy, raw: RawZooKeeper
) -> None:
    """A `setData` with a version (ledger metadata's writes), found by the value it leaves."""
    found = await cut_store.get_with_version(KEY)
    assert found is not None
    proxy.hold(replies=True)
    write = asyncio.create_task(cut_store.put_at_version(KEY, b"v1", found[1]))
    await landed(raw, b"v1")
    proxy.cut()
    assert await write == (True, False)
    assert await cut_store.get_with_version(KEY) == (b"v1", found[1] + 1)


@pytest.mark.parametrize("timeout", [0.5])  # waited out in full
async def test_a_write_with_zookeeper_unreachable_is_unavailable_and_never_sent(
    cut_store: MetadataStore, proxy: CuttableProxy, raw: RawZooKeeper
) -> None:
    proxy.listener.shutdown(socket.SHUT_RDWR)  # no connection can be made (accept woken)
    proxy.close()  # and none is open
    with pytest.raises(Unavailable) as failed:
        await cut_store.put(KEY, b"v1", expected_revision=None)
    assert not isinstance(failed.value, OutcomeUnknown)
    assert raw.get(KEY) == b"v0"


@pytest.mark.parametrize("timeout", [1.0])  # waited out in full
@pytest.mark.parametrize("history", [False, True], ids=["no-history", "history"])
async def test_an_unsettled_write_is_outcome_unknown_and_the_cache_follows_zookeeper(
    cut_store: MetadataStore, proxy: CuttableProxy, raw: RawZooKeeper, history: bool
) -> None:
    proxy.hold(replies=True)  # nothing comes back: neither the reply nor any read
    with recording(CONTEXT if history else None), pytest.raises(OutcomeUnknown) as unknown:
        await cut_store.update(KEY, lambda _: b"v1")
    assert "outcome of the write of /bookies is unknown" in str(unknown.value)
    assert raw.get(KEY) == b"v1"  # it did land
    assert getattr(cut_store.cached(KEY), "value", None) == b"v0"  # its notification is held
    proxy.cut()
    await wait_until_async(  # reconnected, the watch resynchronised: the cache re-read
        lambda: getattr(cut_store.cached(KEY), "value", None) == b"v1")
    assert (await cut_store.get(KEY) or pytest.fail()).value == b"v1"


async def expire(store: MetadataStore, zookeeper: EmbeddedZooKeeper) -> None:
    """Expire the store's session, from a client reaching ZooKeeper past the proxy."""
    assert isinstance(store.backend, ZooKeeperBackend)
    await store.backend.expire_session(zookeeper.hosts())


@pytest.mark.parametrize("timeout", [4.0])  # room for the expiry within the deadline
async def test_a_write_applied_before_its_session_expired_answers_as_applied(
    cut_store: MetadataStore, proxy: CuttableProxy, raw: RawZooKeeper,
    zookeeper: EmbeddedZooKeeper,
) -> None:
    """Its reply is lost and its session expires: reads on the new session find its record
    (not sent again), and the cache follows ZooKeeper on the new session."""
    before = len(await cut_store.read_changes())
    proxy.hold(replies=True)
    with recording(CONTEXT):
        write = asyncio.create_task(cut_store.update(KEY, lambda _: b"v1"))
    await landed(raw, b"v1")
    await expire(cut_store, zookeeper)
    proxy.cut()
    after = await write
    assert after is not None and after.value == b"v1"
    assert (await cut_store.get(KEY)) == after
    assert len(await cut_store.read_changes()) == before + 1  # applied once
    await wait_until_async(lambda: getattr(cut_store.cached(KEY), "value", None) == b"v1")


@pytest.mark.parametrize("timeout", [1.0])  # waited out in full
async def test_a_write_in_flight_when_its_session_expired_is_outcome_unknown_not_resent(
    cut_store: MetadataStore, proxy: CuttableProxy, raw: RawZooKeeper,
    zookeeper: EmbeddedZooKeeper,
) -> None:
    """Sent, but dropped before ZooKeeper took it; the session expires. Reads on a new
    session cannot prove it will never apply: `OutcomeUnknown`, and it is not sent again
    (nothing lands); the store writes on the new session."""
    proxy.hold(requests=True)
    with recording(CONTEXT):
        write = asyncio.create_task(cut_store.update(KEY, lambda _: b"v1"))
    await asyncio.to_thread(wait_until, lambda: b"v1" in proxy.held_requests)
    await expire(cut_store, zookeeper)
    proxy.cut()
    with pytest.raises(OutcomeUnknown):
        await write
    assert raw.get(KEY) == b"v0"
    after = await cut_store.update(KEY, lambda _: b"v2")
    assert after is not None and raw.get(KEY) == b"v2"
    await wait_until_async(lambda: getattr(cut_store.cached(KEY), "value", None) == b"v2")


async def test_group_commit_across_cuts_loses_no_update_and_applies_none_twice(
    cut_store: MetadataStore, proxy: CuttableProxy, raw: RawZooKeeper
) -> None:
    """Writers append items of their own one after another, sending one again while the
    store says it was not applied; under them, replies are held and the connection cut,
    then requests. Every acknowledged item is stored once, no item twice, and none that
    was not applied."""
    await cut_store.put(KEY, b"[]", expected_revision=None)
    items = [writer * 10 + k for writer in range(12) for k in range(6)]
    acknowledged: set[int] = set()
    unknown: set[int] = set()

    def append(item: int) -> Callable[[bytes | None], bytes]:
        return lambda value: json.dumps([*json.loads(value or b"[]"), item]).encode()

    async def write(item: int) -> None:
        for _ in range(20):
            try:
                with recording(CONTEXT):
                    await cut_store.update(KEY, append(item))
            except OutcomeUnknown:
                unknown.add(item)
                return
            except Unavailable:
                await asyncio.sleep(0.05)  # not applied: safe to send again
                continue
            acknowledged.add(item)
            return

    async def writer(first: int) -> None:
        for item in range(first, first + 6):
            await write(item)

    writers = [asyncio.create_task(writer(w * 10)) for w in range(12)]
    for least, replies in ((3, True), (30, False)):  # a write applied, then one not

        def stored(least: int = least) -> bool:
            return len(json.loads(raw.get(KEY) or b"[]")) >= least

        await asyncio.to_thread(wait_until, stored)
        proxy.hold(replies=replies, requests=not replies)
        await asyncio.to_thread(wait_until, proxy.holding.is_set)
        proxy.cut()
    await asyncio.gather(*writers)
    stored_items = json.loads(raw.get(KEY) or b"[]")
    assert len(stored_items) == len(set(stored_items))  # no mutation applied twice
    assert acknowledged <= set(stored_items)  # no acknowledged update lost
    assert set(stored_items) <= acknowledged | unknown
    assert acknowledged | unknown == set(items)
    await wait_until_async(lambda: getattr(cut_store.cached(KEY), "value", None) == raw.get(KEY))
