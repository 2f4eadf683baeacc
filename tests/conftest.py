"""Fixtures: a real etcd on free ports and the real server over HTTP, shared by the session;
every test starts from an empty store."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from metastore.embedded import EmbeddedEtcd
from tests.support import RawEtcd, ServerProcess, wait_until


@pytest.fixture(scope="session")
def etcd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedEtcd]:
    server = EmbeddedEtcd(tmp_path_factory.mktemp("etcd"))
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def raw_etcd(etcd: EmbeddedEtcd) -> RawEtcd:
    return RawEtcd(etcd.endpoint)


@pytest.fixture(scope="session")
def server(etcd: EmbeddedEtcd, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    process = ServerProcess(etcd.url, tmp_path_factory.mktemp("server")).start()
    yield process
    process.stop()


@pytest.fixture
def clean_store(raw_etcd: RawEtcd, server: ServerProcess) -> RawEtcd:
    """An empty store, with the server's rack cache caught up with the wipe."""
    raw_etcd.wipe()
    wait_until(lambda: httpx.get(f"{server.url}/admin/v2/bookies/racks-info").json() == {})
    return raw_etcd


@pytest.fixture
def admin(server: ServerProcess, clean_store: RawEtcd) -> Iterator[httpx.Client]:
    """An HTTP client on the shared server, over an empty store."""
    with httpx.Client(base_url=server.url, timeout=10) as client:
        yield client


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    return tmp_path
