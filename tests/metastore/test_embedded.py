"""The embedded etcd and ZooKeeper are ready when `start()` returns: the first call of a
client succeeds."""

from __future__ import annotations

import asyncio
from pathlib import Path

from metastore.cache import WatchedRange
from metastore.embedded import EmbeddedEtcd
from metastore.embedded_zookeeper import EmbeddedZooKeeper
from metastore.store import MetadataStore, open_metadata_store


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


async def test_zookeeper_serves_sessions_when_start_returns(tmp_path: Path) -> None:
    """Answering `ruok` is not serving: ZooKeeper answers it before it has loaded its data,
    and a session request in that time can be left unanswered for the client's whole connect
    timeout (the module docstring of `metastore.embedded_zookeeper`). Started, and restarted
    on its data after a kill, it serves at once: a store's first call succeeds within the
    store timeout, far below the 30 s a client left unanswered waits."""
    server = EmbeddedZooKeeper(tmp_path)
    try:
        for restart in range(3):
            if restart:
                assert server.process is not None
                server.process.kill()
                server.process.wait()
            await asyncio.to_thread(server.start)
            assert server.serving()
            store = open_metadata_store(f"zk:{server.hosts()}/p", timeout=5)
            try:
                await store.put(f"/started/{restart}", b"x")
            finally:
                await store.close()
    finally:
        server.stop()
