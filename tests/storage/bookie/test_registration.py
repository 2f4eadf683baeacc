"""A bookie's registration (`storage.bookie.registration.Registration`) on etcd: it registers in
the background and a clean stop leaves nothing behind, not even a put still in flight."""

from __future__ import annotations

import asyncio

import pytest

from metastore import paths
from metastore.store import MetadataStore
from storage.bookie.registration import Registration
from tests.support import RawEtcd, wait_until_async

BOOKIE = "10.8.8.8:3181"


async def test_a_clean_stop_deletes_the_key_and_ends_the_lease(
    store: MetadataStore, raw_etcd: RawEtcd
) -> None:
    registration = Registration(store, BOOKIE, ttl=30)
    await registration.start(readonly=False)
    await wait_until_async(lambda: raw_etcd.get(paths.bookie_available(BOOKIE)) is not None, 10)
    lease = await store.lease_of(paths.bookie_available(BOOKIE))
    assert lease is not None
    await registration.stop()
    assert raw_etcd.get(paths.bookie_available(BOOKIE)) is None
    # A registration put still in flight when the bookie stopped lands on a dead lease: refused.
    with pytest.raises(Exception, match="lease not found"):
        await store.put_ephemeral(paths.bookie_available(BOOKIE), registration.value, lease)
    assert raw_etcd.get(paths.bookie_available(BOOKIE)) is None


async def test_a_stop_while_registering_leaves_no_key(
    store: MetadataStore, raw_etcd: RawEtcd
) -> None:
    # Stopped at every point of its first registration, it never leaves the key behind.
    for delay in [i * 0.0005 for i in range(30)]:
        registration = Registration(store, BOOKIE, ttl=30)
        await registration.start(readonly=False)
        await asyncio.sleep(delay)
        await registration.stop()
        assert raw_etcd.get(paths.bookie_available(BOOKIE)) is None, delay


async def test_a_stop_deletes_the_key_a_killed_run_left_on_its_lease(
    store: MetadataStore, raw_etcd: RawEtcd
) -> None:
    # The previous run of the same bookie was killed: its key stays until its lease expires.
    left = await store.grant_lease(30)
    await store.put_ephemeral(paths.bookie_available(BOOKIE), b"previous run", left)
    registration = Registration(store, BOOKIE, ttl=30)
    await registration.start(readonly=False)
    await registration.stop()
    assert raw_etcd.get(paths.bookie_available(BOOKIE)) is None
