"""One storage cluster (etcd + four bookie processes) shared by the ledger and managed-ledger
tests of the session; each test uses ledgers and topics of its own."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.storage.testbed import (
    GROUP,
    OTHER_GROUP,
    Cluster,
    start_cluster,
    start_zookeeper_cluster,
    stop_cluster,
)
from tests.zookeeper import EmbeddedZooKeeper


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """Bookies 0-2 in group `iso`, bookie 3 in group `other`."""
    running = start_cluster(tmp_path_factory.mktemp("storage"), 4)
    running.set_groups({GROUP: running.ids[:3], OTHER_GROUP: running.ids[3:]})
    yield running
    stop_cluster(running)


@pytest.fixture(scope="session")
def zk_cluster(
    zookeeper: EmbeddedZooKeeper, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    """The same cluster on the session's ZooKeeper (keys under `/storage-cluster`)."""
    running = start_zookeeper_cluster(tmp_path_factory.mktemp("storage-zk"), 4,
                                      zookeeper.hosts(), "/storage-cluster")
    running.set_groups({GROUP: running.ids[:3], OTHER_GROUP: running.ids[3:]})
    yield running
    stop_cluster(running)
