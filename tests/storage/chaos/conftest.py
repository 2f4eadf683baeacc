"""An etcd of their own for the fault tests (they stop bookies, kill services and pause etcd:
nothing another test relies on); each test starts the bookies it needs."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from metastore.embedded import EmbeddedEtcd


@pytest.fixture(scope="module")
def chaos_etcd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedEtcd]:
    etcd = EmbeddedEtcd(tmp_path_factory.mktemp("chaos-etcd"))
    etcd.start()
    yield etcd
    etcd.stop()
