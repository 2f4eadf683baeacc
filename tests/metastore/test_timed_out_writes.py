"""A write whose etcd call fails after its request was sent: the store finds out whether it
landed (its change record, or the value it leaves and the revision it required), answers as
the write did when it landed, fails with nothing written when it never can land, and with
`OutcomeUnknown` when that cannot be known in time. A real etcd behind a `CuttableProxy`."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator

import pytest

from metastore.cache import WatchedRange
from metastore.change_history import ChangeContext, recording
from metastore.embedded import EmbeddedEtcd
from metastore.errors import OutcomeUnknown, Unavailable
from metastore.etcd_backend import EtcdBackend, at_most
from metastore.store import Endpoint, MetadataStore, Versioned
from tests.support import CuttableProxy, RawEtcd, wait_until, wait_until_async

KEY = "/bookies"
CONTEXT = ChangeContext(role=None, address="127.0.0.1", method="POST",
                        path="/admin/v2/bookies/racks-info/b1:3181")


@pytest.fixture
def proxy(etcd: EmbeddedEtcd) -> Iterator[CuttableProxy]:
    relay = CuttableProxy(etcd.endpoint.port)
    yield relay
    relay.close()


@pytest.fixture
async def cut_store(proxy: CuttableProxy, raw_etcd: RawEtcd) -> AsyncIterator[MetadataStore]:
    """A store reaching etcd through the proxy, with a 1 s call timeout; `KEY` holds v0,
    mirrored by a watch-fed cache (updates start from it: the write is the only call). The
    cache is waited for: a fresh process's first call, its connection made on the way, can
    outlast the 1 s, and the cache retries."""
    raw_etcd.wipe()
    raw_etcd.put(KEY, "v0")
    store = MetadataStore([Endpoint("127.0.0.1", proxy.port)], timeout=1)
    cache = WatchedRange(store, KEY)
    await cache.start()
    await wait_until_async(lambda: isinstance(cache.peek(KEY), Versioned))
    yield store
    await cache.stop()
    await store.close()


async def landed(raw_etcd: RawEtcd, value: bytes) -> None:
    await asyncio.to_thread(wait_until, lambda: raw_etcd.get(KEY) == value)


@pytest.mark.parametrize("history", [False, True], ids=["no-history", "history"])
async def test_a_write_whose_reply_is_lost_answers_as_applied(
    cut_store: MetadataStore, proxy: CuttableProxy, raw_etcd: RawEtcd, history: bool
) -> None:
    proxy.hold(replies=True)
    with recording(CONTEXT if history else None):
        write = asyncio.create_task(cut_store.update(KEY, lambda _: b"v1"))
    await landed(raw_etcd, b"v1")
    proxy.cut()  # the reply is lost with the connection
    after = await write
    assert after is not None and after.value == b"v1"
    assert (await cut_store.get(KEY)) == after  # the revision it was applied at
    records = await cut_store.read_changes()
    assert len(records) == (1 if history else 0)


@pytest.mark.parametrize("history", [False, True], ids=["no-history", "history"])
async def test_a_write_that_never_reached_etcd_can_no_longer_land(
    cut_store: MetadataStore, proxy: CuttableProxy, raw_etcd: RawEtcd, history: bool
) -> None:
    """With its change record absent it was not applied; without a record it may have been
    (and overwritten since): unknown, but settled at once."""
    proxy.hold(requests=True)
    with recording(CONTEXT if history else None):
        write = asyncio.create_task(cut_store.update(KEY, lambda _: b"v1"))
    # the write's own request is sent, and held (not only some earlier frame of the channel)
    await asyncio.to_thread(wait_until, lambda: b"v1" in proxy.held_requests)
    raw_etcd.put(KEY, "other")  # its compare fails from now on
    proxy.cut()  # the request is dropped with the connection
    with pytest.raises(Unavailable) as failed:
        await write
    assert isinstance(failed.value, OutcomeUnknown) is not history
    assert raw_etcd.get(KEY) == b"other"
    assert await cut_store.read_changes() == []


@pytest.mark.parametrize("history", [False, True], ids=["no-history", "history"])
async def test_an_unsettled_write_is_outcome_unknown_and_the_cache_follows_etcd(
    cut_store: MetadataStore, proxy: CuttableProxy, raw_etcd: RawEtcd, history: bool
) -> None:
    proxy.hold(replies=True)  # nothing comes back: neither the reply nor any read
    with recording(CONTEXT if history else None), pytest.raises(OutcomeUnknown) as unknown:
        await cut_store.update(KEY, lambda _: b"v1")
    assert "outcome of the write of /bookies is unknown" in str(unknown.value)
    assert raw_etcd.get(KEY) == b"v1"  # it did land
    assert getattr(cut_store.cached(KEY), "value", None) == b"v0"  # its event is held too
    proxy.cut()
    await wait_until_async(  # the watch broke with the connection: the cache re-read
        lambda: getattr(cut_store.cached(KEY), "value", None) == b"v1")
    assert (await cut_store.get(KEY) or pytest.fail()).value == b"v1"


async def test_an_operation_that_swallows_its_timeout_is_left_behind() -> None:
    """aetcd's stream shutdown (within its client's `close`) ignores a `CancelledError`
    while it awaits its request handler, so a timeout delivered as a cancellation there is
    lost. `at_most` waits for the operation as a task of its own: the caller leaves after
    the timeout whatever the operation does with the cancellation it is sent."""
    release = asyncio.Event()
    cancels = 0

    async def stubborn() -> None:
        nonlocal cancels
        while not release.is_set():
            try:
                await release.wait()
            except asyncio.CancelledError:
                cancels += 1  # swallowed

    waiting = asyncio.ensure_future(at_most(stubborn(), 0.05))
    done, _ = await asyncio.wait({waiting}, timeout=10)
    release.set()  # whatever happened, let it end
    assert waiting in done
    await wait_until_async(lambda: cancels == 1)  # it was told to stop, and was left


async def test_a_cancellation_the_client_swallows_still_cancels_the_caller(
    etcd: EmbeddedEtcd,
) -> None:
    """gRPC's asyncio call can swallow a cancellation that reaches it as its reply comes in,
    and return the reply: a watch loop told to stop then went on to wait for its next event
    for ever. The caller of an etcd call that was cancelled meanwhile is cancelled on return."""
    backend = EtcdBackend([etcd.endpoint], timeout=5)
    started = asyncio.Event()

    async def swallowing(_: object) -> str:
        started.set()
        with contextlib.suppress(asyncio.CancelledError):  # as that call can
            await asyncio.sleep(30)
        return "reply"

    try:
        caller = asyncio.create_task(backend.call(swallowing))
        await started.wait()
        caller.cancel()
        done, _ = await asyncio.wait({caller}, timeout=10)
        assert caller in done and caller.cancelled()
        # and a call nobody cancels answers as before
        assert await backend.call(swallowing, timeout=0.05) == "reply"
    finally:
        await backend.close()


def test_outcome_unknown_is_a_503_with_its_reason() -> None:
    from api.errors import error_status_and_reason

    status, reason = error_status_and_reason(OutcomeUnknown(KEY))
    assert status == 503
    assert reason.startswith("metadata store unavailable: the outcome of the write of /bookies")
