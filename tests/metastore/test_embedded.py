"""The embedded etcd is ready when `start()` returns: the first call of a client succeeds."""

from __future__ import annotations

import asyncio
from pathlib import Path

from metastore.cache import WatchedRange
from metastore.embedded import EmbeddedEtcd
from metastore.store import MetadataStore


async def test_first_calls_after_start_succeed(tmp_path: Path) -> None:
    """Listening is not serving: before its leader election etcd refuses calls, and the
    caches' first loads logged "watch lost" at every clean start."""
    etcd = EmbeddedEtcd(tmp_path)
    await asyncio.to_thread(etcd.start)
    store = MetadataStore([etcd.endpoint], timeout=5)
    try:
        assert await store.get("/bookies") is None
        watches = [WatchedRange(store, "/a"), WatchedRange(store, "/b", prefix=True)]
        await asyncio.gather(*(watch.start() for watch in watches))
        assert all(watch.synced for watch in watches)
        for watch in watches:
            await watch.stop()
    finally:
        await store.close()
        etcd.stop()
