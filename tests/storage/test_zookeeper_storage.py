"""The storage engine on ZooKeeper: bookie processes register as ephemeral znodes of their
own sessions (a killed bookie's registration goes when its session times out), ledgers are
written and read with their V3 metadata in the hierarchical znodes, and recovery fences the
writer."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from metastore import paths
from metastore.ledger_metadata import LedgerState, decode_ledger_metadata
from metastore.store import open_metadata_store
from metastore.zookeeper_backend import ZooKeeperBackend
from placement import AffinityGroups
from storage.bookie.registration import Registration
from storage.ledger import LedgerFenced, LedgerSpec
from storage.ledger.metadata import managed_ledger_custom_metadata
from storage.ledger.recovery import recover
from tests.storage.bookie.support import BookieProcess
from tests.storage.testbed import engine_on
from tests.support import wait_until
from tests.zookeeper import EmbeddedZooKeeper, RawZooKeeper

CHROOT = "/storage"
GROUPS = AffinityGroups(("iso",), strict=True)


class ZooKeeperCluster:
    def __init__(self, raw: RawZooKeeper, url: str, bookies: list[BookieProcess]) -> None:
        self.raw = raw
        self.url = url
        self.bookies = bookies


@pytest.fixture(scope="module")
def zk_cluster(
    zookeeper: EmbeddedZooKeeper, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ZooKeeperCluster]:
    """Three bookie processes on ZooKeeper (every key under `/storage`), group `iso`."""
    raw = RawZooKeeper(zookeeper.hosts(), CHROOT)
    raw.wipe()
    url = f"zk:{zookeeper.hosts()}{CHROOT}"
    workdir = tmp_path_factory.mktemp("zk-storage")
    bookies = [BookieProcess(raw, url, workdir / f"bookie{i}", lease_ttl=4)  # type: ignore[arg-type]
               for i in range(3)]
    try:
        for bookie in bookies:
            bookie.start()
        raw.put("/bookies", json.dumps({"iso": {
            b.bookie_id: {"rack": f"/rack{i}", "hostname": "127.0.0.1"}
            for i, b in enumerate(bookies)}}))
        yield ZooKeeperCluster(raw, url, bookies)
    finally:
        for bookie in bookies:
            bookie.kill()
        raw.close()


def spec() -> LedgerSpec:
    return LedgerSpec(3, 3, 2, managed_ledger_custom_metadata("t/ns/persistent/zk", GROUPS),
                      GROUPS)


def test_bookies_register_as_ephemeral_znodes_of_their_own_sessions(
    zk_cluster: ZooKeeperCluster,
) -> None:
    owners = set()
    for bookie in zk_cluster.bookies:
        _, stat = zk_cluster.raw.client.get(paths.bookie_available(bookie.bookie_id))
        assert stat.ephemeralOwner != 0
        owners.add(stat.ephemeralOwner)
    assert len(owners) == 3


async def test_ledgers_write_read_and_recover_with_fencing(
    zk_cluster: ZooKeeperCluster,
) -> None:
    data = [f"entry-{i}".encode() for i in range(20)]
    async with engine_on(zk_cluster.url) as writer_side:
        writer = await writer_side.client.create(spec())
        for payload in data:
            await writer.add(payload)
        stored = zk_cluster.raw.get(paths.ledger(writer.ledger_id))
        assert stored is not None
        metadata = decode_ledger_metadata(writer.ledger_id, stored)
        assert sorted(metadata.ensembles[0]) == sorted(b.bookie_id for b in zk_cluster.bookies)
        async with engine_on(zk_cluster.url) as other:
            recovered = await recover(other.client, writer.ledger_id)
            assert recovered.state is LedgerState.CLOSED
            assert recovered.last_entry_id == len(data) - 1
            reader = await other.client.open(writer.ledger_id)
            assert [(await reader.read(i)).payload for i in range(len(data))] == data
            with pytest.raises(LedgerFenced):
                await writer.add(b"late")
        closed = zk_cluster.raw.get(paths.ledger(writer.ledger_id))
        assert closed is not None
        assert decode_ledger_metadata(writer.ledger_id, closed).state is LedgerState.CLOSED


async def test_a_killed_bookies_registration_goes_with_its_session(
    zk_cluster: ZooKeeperCluster, tmp_path: Path
) -> None:
    extra = BookieProcess(zk_cluster.raw, zk_cluster.url, tmp_path / "extra",  # type: ignore[arg-type]
                          lease_ttl=4).start()
    path = paths.bookie_available(extra.bookie_id)
    assert zk_cluster.raw.get(path) is not None
    extra.kill()
    await asyncio.to_thread(wait_until, lambda: zk_cluster.raw.get(path) is None, 30.0)
    again = BookieProcess(zk_cluster.raw, zk_cluster.url, tmp_path / "again",  # type: ignore[arg-type]
                          lease_ttl=4).start()
    again.stop()  # a graceful stop ends the registration at once
    assert zk_cluster.raw.get(paths.bookie_available(again.bookie_id)) is None


async def test_an_expired_session_registers_again_on_a_new_one(
    zk_cluster: ZooKeeperCluster,
) -> None:
    """A bookie's registration (`storage.bookie.registration`, as the bookie process runs
    it) whose ZooKeeper session expires: the znode goes with the session, and the bookie
    registers again on a new session of its own."""
    store = open_metadata_store(zk_cluster.url, timeout=5, session_timeout=4)
    registration = Registration(store, "10.9.9.9:3181", ttl=4)
    path = paths.bookie_available("10.9.9.9:3181")

    def owner() -> int:
        stat = zk_cluster.raw.client.exists(path)
        return int(stat.ephemeralOwner) if stat else 0

    await registration.start(readonly=False)
    try:
        first = await asyncio.to_thread(wait_until, owner, 30.0)
        assert isinstance(store.backend, ZooKeeperBackend)
        await store.backend.expire_session()
        await asyncio.to_thread(
            wait_until, lambda: owner() not in (0, first), 30.0, 0.1)
        assert zk_cluster.raw.get(path) == registration.value
    finally:
        await registration.stop()
        await store.close()
    assert zk_cluster.raw.get(path) is None
