"""A rack write whose store reply never comes: the server answers 503 within its deadline
with a reason saying the outcome is unknown, and serves the write once the store is
reachable again (it was applied). The real server reaches a real etcd, or a real ZooKeeper,
through a `CuttableProxy`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from metastore.embedded import EmbeddedEtcd
from tests.support import CuttableProxy, RawEtcd, RawStore, ServerProcess, wait_until
from tests.zookeeper import EmbeddedZooKeeper, RawZooKeeper

RACKS = "/admin/v2/bookies/racks-info"
ZOOKEEPER_CHROOT = "/timed-out-writes"


@pytest.fixture
def proxied(etcd: EmbeddedEtcd, raw_etcd: RawEtcd, tmp_path: Path
            ) -> Iterator[tuple[ServerProcess, CuttableProxy]]:
    raw_etcd.wipe()
    proxy = CuttableProxy(etcd.endpoint.port)
    server = ServerProcess(proxy.url, tmp_path / "server",
                           extra_conf={"metadataStoreOperationTimeoutSeconds": "2"}).start()
    try:
        yield server, proxy
    finally:
        server.stop()
        proxy.close()


@pytest.fixture
def zookeeper_proxied(zookeeper: EmbeddedZooKeeper, tmp_path: Path
                      ) -> Iterator[tuple[ServerProcess, CuttableProxy, RawZooKeeper]]:
    raw = RawZooKeeper(zookeeper.hosts(), ZOOKEEPER_CHROOT)
    raw.wipe()
    proxy = CuttableProxy(zookeeper.port)
    server = ServerProcess(f"zk:127.0.0.1:{proxy.port}{ZOOKEEPER_CHROOT}", tmp_path / "server",
                           extra_conf={"metadataStoreOperationTimeoutSeconds": "2"}).start()
    try:
        yield server, proxy, raw
    finally:
        server.stop()
        proxy.close()
        raw.close()


def test_a_rack_write_whose_reply_is_lost_is_503_outcome_unknown(
    proxied: tuple[ServerProcess, CuttableProxy], raw_etcd: RawEtcd
) -> None:
    rack_write_with_its_reply_lost(*proxied, raw_etcd)


def test_a_rack_write_whose_zookeeper_reply_is_lost_is_503_outcome_unknown(
    zookeeper_proxied: tuple[ServerProcess, CuttableProxy, RawZooKeeper],
) -> None:
    rack_write_with_its_reply_lost(*zookeeper_proxied)


def rack_write_with_its_reply_lost(server: ServerProcess, proxy: CuttableProxy,
                                   raw: RawStore) -> None:
    rack = f"{server.url}{RACKS}/b1:3181"
    assert httpx.post(rack, params={"group": "default"}, json={"rack": "/r1"}).status_code == 204
    wait_until(lambda: httpx.get(rack).status_code == 200)
    proxy.hold(replies=True)
    answer = httpx.post(rack, params={"group": "default"}, json={"rack": "/r2"}, timeout=10)
    assert answer.status_code == 503
    assert answer.json()["reason"] == (
        "metadata store unavailable: the outcome of the write of /bookies is unknown "
        "(it may have been applied); read it again before retrying")
    assert b'"/r2"' in (raw.get("/bookies") or b"")  # it was applied
    proxy.cut()
    wait_until(lambda: httpx.get(rack).json() == {"rack": "/r2"})
