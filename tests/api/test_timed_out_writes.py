"""A rack write whose etcd reply never comes: the server answers 503 within its deadline
with a reason saying the outcome is unknown, and serves the write once etcd is reachable
again (it was applied). The real server reaches a real etcd through a `CuttableProxy`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from metastore.embedded import EmbeddedEtcd
from tests.support import CuttableProxy, RawEtcd, ServerProcess, wait_until

RACKS = "/admin/v2/bookies/racks-info"


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


def test_a_rack_write_whose_reply_is_lost_is_503_outcome_unknown(
    proxied: tuple[ServerProcess, CuttableProxy], raw_etcd: RawEtcd
) -> None:
    server, proxy = proxied
    rack = f"{server.url}{RACKS}/b1:3181"
    assert httpx.post(rack, params={"group": "default"}, json={"rack": "/r1"}).status_code == 204
    wait_until(lambda: httpx.get(rack).status_code == 200)
    proxy.hold(replies=True)
    answer = httpx.post(rack, params={"group": "default"}, json={"rack": "/r2"}, timeout=10)
    assert answer.status_code == 503
    assert answer.json()["reason"] == (
        "metadata store unavailable: the outcome of the write of /bookies is unknown "
        "(it may have been applied); read it again before retrying")
    assert b'"/r2"' in (raw_etcd.get("/bookies") or b"")  # it was applied
    proxy.cut()
    wait_until(lambda: httpx.get(rack).json() == {"rack": "/r2"})
