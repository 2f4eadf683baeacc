"""The watch-fed cache follows etcd: writes, deletes, and a restart of etcd."""

from __future__ import annotations

from pathlib import Path

import pytest

from metastore.cache import WatchedRange
from metastore.embedded import EmbeddedEtcd
from metastore.store import MetadataStore
from tests.support import RawEtcd, wait_until_async


async def test_key_cache_sees_puts_and_deletes(store: MetadataStore, raw_etcd: RawEtcd) -> None:
    cache = WatchedRange(store, "/bookies")
    await cache.start()
    try:
        assert cache.synced and await cache.get() is None
        raw_etcd.put("/bookies", b"v1")
        await wait_until_async(lambda: cache.peek("/bookies") is not None)
        assert (await cache.get()).value == b"v1"  # type: ignore[union-attr]
        raw_etcd.put("/bookies-other", b"x")  # a sibling with the same prefix is not ours
        raw_etcd.delete("/bookies")
        await wait_until_async(lambda: cache.peek("/bookies") is None)
        assert await cache.entries() == {}
    finally:
        await cache.stop()


async def test_prefix_cache_mirrors_children(store: MetadataStore, raw_etcd: RawEtcd) -> None:
    raw_etcd.put("/ledgers/available/a:3181", b"")
    cache = WatchedRange(store, "/ledgers/available", prefix=True)
    changes: list[int] = []
    cache.add_listener(lambda: changes.append(1))
    await cache.start()
    try:
        assert list(await cache.entries()) == ["/ledgers/available/a:3181"]
        changes.clear()  # the initial load notifies too; only the watch event counts here
        raw_etcd.put("/ledgers/available/b:3181", b"")
        await wait_until_async(lambda: cache.peek("/ledgers/available/b:3181") is not None)
        assert changes == [1]
    finally:
        await cache.stop()


async def test_observe_ignores_older_revisions(store: MetadataStore) -> None:
    cache = WatchedRange(store, "/k")
    await cache.start()
    try:
        cache.observe("/k", b"new", 100)
        cache.observe("/k", b"old", 99)
        assert (await cache.get()).value == b"new"  # type: ignore[union-attr]
    finally:
        await cache.stop()


@pytest.mark.slow
async def test_cache_resyncs_after_etcd_restart(tmp_path: Path) -> None:
    etcd = EmbeddedEtcd(tmp_path / "etcd")
    etcd.start()
    store = MetadataStore([etcd.endpoint], timeout=2)
    cache = WatchedRange(store, "/bookies")
    try:
        await cache.start()
        etcd.kill()
        await wait_until_async(lambda: not cache.synced)
        etcd.start()
        RawEtcd(etcd.endpoint).put("/bookies", b"after-restart")
        await wait_until_async(lambda: cache.synced and cache.peek("/bookies") is not None,
                               timeout=15)
        assert (await cache.get()).value == b"after-restart"  # type: ignore[union-attr]
    finally:
        await cache.stop()
        await store.close()
        etcd.stop()
