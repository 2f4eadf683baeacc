"""A storage cluster for ledger and managed-ledger tests: its own etcd, real bookie processes
with racks and groups in `/bookies`, and the client side built on them."""

from __future__ import annotations

import json
import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import pytest

from metastore.embedded import EmbeddedEtcd
from metastore.store import MetadataStore, open_metadata_store
from metastore.topology import read_cluster_view
from placement import PlacementConfig, Topology
from storage.bookie_client import BookieClient
from storage.engine import build_ledger_client, build_managed_ledger_factory
from storage.ledger import BookiePool, LedgerClient
from storage.managed_ledger import ManagedLedgerFactory
from tests.storage.bookie.support import BookieProcess
from tests.support import RawEtcd
from tests.zookeeper import EmbeddedZooKeeper, RawZooKeeper

# the service of the topic tests (tests/conftest.py: topic_service)
TOPIC_MAX_MESSAGE = 64 * 1024
TOPIC_CONF = {
    "managedLedgerMaxEntriesPerLedger": "10",
    "managedLedgerMinLedgerRolloverTimeMinutes": "0",
    "maxMessageSize": str(TOPIC_MAX_MESSAGE),
}

GROUP = "iso"
OTHER_GROUP = "other"


@dataclass
class Cluster:
    etcd: EmbeddedEtcd
    raw: RawEtcd
    bookies: list[BookieProcess]

    @property
    def ids(self) -> list[str]:
        return [b.bookie_id for b in self.bookies]

    def set_groups(self, groups: dict[str, list[str]]) -> None:
        """Write the rack map: each bookie in its group, on its own rack."""
        doc = {
            group: {b: {"rack": f"/rack{self.ids.index(b)}", "hostname": "127.0.0.1"}
                    for b in members}
            for group, members in groups.items()
        }
        self.raw.put("/bookies", json.dumps(doc))


def start_cluster(workdir: Path, count: int) -> Cluster:
    etcd = EmbeddedEtcd(workdir / "etcd")
    etcd.start()
    raw = RawEtcd(etcd.endpoint)
    # started one by one from this thread: a bookie dies with the thread that started it
    bookies = [BookieProcess(raw, etcd.url, workdir / f"bookie{i}") for i in range(count)]
    try:
        for bookie in bookies:
            bookie.start()
    except BaseException:
        stop_cluster(Cluster(etcd, raw, bookies))
        raise
    return Cluster(etcd, raw, bookies)


class ZooKeeperStore:
    """What a `Cluster` on ZooKeeper keeps in its `etcd` field: the store's URL (`url`),
    the `RawZooKeeper` closed by `stop`."""

    def __init__(self, url: str, raw: RawZooKeeper) -> None:
        self.url = url
        self.raw = raw

    def stop(self) -> None:
        self.raw.close()


def start_zookeeper_cluster(workdir: Path, count: int, hosts: str, chroot: str) -> Cluster:
    """As `start_cluster`, on a running ZooKeeper (every key under `chroot`, wiped first):
    `cluster.etcd.url` is the `zk:` URL and `cluster.raw` a `RawZooKeeper`."""
    workdir.mkdir(parents=True, exist_ok=True)
    raw = RawZooKeeper(hosts, chroot)
    raw.wipe()
    url = f"zk:{hosts}{chroot}"
    store = cast(EmbeddedEtcd, ZooKeeperStore(url, raw))
    bookies = [BookieProcess(cast(RawEtcd, raw), url, workdir / f"bookie{i}")
               for i in range(count)]
    try:
        for bookie in bookies:
            bookie.start()
    except BaseException:
        stop_cluster(Cluster(store, cast(RawEtcd, raw), bookies))
        raise
    return Cluster(store, cast(RawEtcd, raw), bookies)


def start_cluster_on(request: pytest.FixtureRequest, workdir: Path, count: int,
                     chroot: str) -> Cluster:
    """A cluster on the store a fixture's parameter names: `"etcd"`, an etcd of its own
    (`start_cluster`); `"zookeeper"`, the session's ZooKeeper under `chroot`
    (`start_zookeeper_cluster`)."""
    if request.param == "zookeeper":
        zookeeper: EmbeddedZooKeeper = request.getfixturevalue("zookeeper")
        return start_zookeeper_cluster(workdir, count, zookeeper.hosts(), chroot)
    return start_cluster(workdir, count)


def stop_cluster(cluster: Cluster) -> None:
    for bookie in cluster.bookies:
        bookie.kill()
    cluster.etcd.stop()


@dataclass
class Engine:
    store: MetadataStore
    client: LedgerClient
    factory: ManagedLedgerFactory


@asynccontextmanager
async def engine(cluster: Cluster, config: PlacementConfig | None = None,
                 seed: int = 7) -> AsyncIterator[Engine]:
    """The client side on the cluster; the topology is read from etcd on each placement."""
    async with engine_on(cluster.etcd.url, config, seed) as running:
        yield running


@asynccontextmanager
async def engine_on(store_url: str, config: PlacementConfig | None = None,
                    seed: int = 7) -> AsyncIterator[Engine]:
    """The client side on the store `store_url` names (etcd or ZooKeeper)."""
    config = config or PlacementConfig()
    store = open_metadata_store(store_url)

    async def topology() -> Topology:
        return (await read_cluster_view(store, config)).topology

    client = build_ledger_client(store, BookiePool(BookieClient.connect), topology, config,
                                 random.Random(seed))
    try:
        yield Engine(store, client, build_managed_ledger_factory(store, client))
    finally:
        await client.close()
        await store.close()


@asynccontextmanager
async def ledger_client(cluster: Cluster, config: PlacementConfig | None = None,
                        seed: int = 7) -> AsyncIterator[LedgerClient]:
    async with engine(cluster, config, seed) as running:
        yield running.client
