"""The auditor's periodic data checks against real bookie processes on an etcd of their own
(a wiped bookie must not disturb the shared cluster): a healthy cluster is marked nothing; a
bookie whose data directory was wiped and which came back under the same id is found by the
all-ledgers check (the ledger marked with it) and by the replicas check (reported short of
copies)."""

from __future__ import annotations

import asyncio
import shutil
import time
from collections.abc import Iterable, Iterator
from dataclasses import replace

import pytest

from metastore import paths
from metastore.store import parse_metadata_store_url
from metastore.underreplication_marks import decode_underreplicated_ledger
from metastore.versioned_keys import VersionedKeys
from placement import PlacementConfig
from storage.autorecovery import Auditor, AutoRecoveryConfig, UnderReplication
from storage.autorecovery.checker import (
    CHECK_ALL_LEDGERS_CTIME,
    PeriodicChecks,
    decode_ctime,
    stripe_bounds,
)
from storage.ledger import LedgerSpec
from storage.ledger.handle import WriteHandle
from storage.ledger.metadata import managed_ledger_custom_metadata
from tests.storage.cluster import Cluster, engine, start_cluster, stop_cluster

CONFIG = AutoRecoveryConfig(
    autoRecoveryDaemonEnabled=True,
    auditorPeriodicCheckInterval=1,
    auditorReplicasCheckInterval=1,
    auditorPeriodicBookieCheckInterval=0,
    metadataStoreSessionTimeoutMillis=2000,
    auditorCheckReadsPerSecond=0,
)


@pytest.fixture(scope="module")
def own_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    running = start_cluster(tmp_path_factory.mktemp("checker"), 3)
    running.set_groups({"default": running.ids})
    yield running
    stop_cluster(running)


def test_stripe_bounds_follow_round_robin_striping() -> None:
    # E=5, Qw=3: member 0 stores entries 0, 3, 4, 5, 8, 9, ...
    assert stripe_bounds(0, 0, 9, 5, 3) == (0, 9)
    assert stripe_bounds(2, 0, 9, 5, 3) == (0, 7)  # 0, 1, 2, 5, 6, 7
    assert stripe_bounds(3, 0, 9, 5, 3) == (1, 8)  # 1, 2, 3, 6, 7, 8
    assert stripe_bounds(4, 2, 3, 5, 3) == (2, 3)
    assert stripe_bounds(4, 0, 1, 5, 3) is None  # stores nothing of [0, 1]
    assert stripe_bounds(2, 7, 7, 5, 3) == (7, 7)


async def write_ledger(cluster: Cluster, entries: int) -> WriteHandle:
    async with engine(cluster) as running:
        handle = await running.client.create(LedgerSpec(
            3, 3, 2, managed_ledger_custom_metadata("t/ns/persistent/check", None)))
        for i in range(entries):
            await handle.add(b"entry %d" % i)
        await handle.close()
        return handle


def wipe_and_restart(cluster: Cluster, bookie_id: str) -> None:
    bookie = next(b for b in cluster.bookies if b.bookie_id == bookie_id)
    bookie.kill()
    shutil.rmtree(bookie.data_dir)
    # the dead process's registration outlives it (its lease): drop it, so that `start`
    # waits for the new process to register
    cluster.raw.delete(paths.bookie_available(bookie_id))
    bookie.start()


async def test_checks_mark_nothing_when_healthy_and_find_a_wiped_bookie(
    own_cluster: Cluster,
) -> None:
    handle = await write_ledger(own_cluster, 12)
    keys = VersionedKeys(parse_metadata_store_url(own_cluster.etcd.url))
    marked: dict[int, set[str]] = {}

    async def record(ledger_id: int, missing: Iterable[str]) -> None:
        marked.setdefault(ledger_id, set()).update(missing)

    try:
        async with engine(own_cluster) as running:
            checks = PeriodicChecks(keys, UnderReplication(keys), running.client.bookies,
                                    CONFIG, record)
            assert await checks.check_all_ledgers() == set()
            assert (await checks.check_replicas()).ledgers == frozenset()
            assert checks.all_ledgers.ledgers_checked >= 1 and checks.all_ledgers.runs == 1
            assert checks.all_ledgers.entries_read == 6  # first and last entry per bookie
            assert marked == {}
            every = PeriodicChecks(keys, UnderReplication(keys), running.client.bookies,
                                   replace(CONFIG, auditorLedgerVerificationPercentage=100),
                                   record)
            assert await every.check_all_ledgers() == set()
            assert every.all_ledgers.entries_read == 3 * 12  # every entry from each bookie

            victim = handle.metadata.current_ensemble[1]
            wipe_and_restart(own_cluster, victim)
            assert await checks.check_all_ledgers() == {handle.ledger_id}
            assert marked == {handle.ledger_id: {victim}}
            report = await checks.check_replicas()
            # every entry is on 2 of its 3 write-set bookies: at Qa, below Qw
            assert report.below_write_quorum == {handle.ledger_id}
            assert report.no_replica == set() and report.below_ack_quorum == set()
            assert checks.replicas.found == frozenset({handle.ledger_id})
    finally:
        await keys.close()


async def test_leading_auditor_runs_the_all_ledgers_check_and_marks_the_ledger(
    own_cluster: Cluster,
) -> None:
    handle = await write_ledger(own_cluster, 7)
    keys = VersionedKeys(parse_metadata_store_url(own_cluster.etcd.url))
    path = paths.underreplicated_ledger(handle.ledger_id)

    async def no_topology():  # type: ignore[no-untyped-def]
        raise AssertionError("the placement check is off")

    try:
        async with engine(own_cluster) as running:
            auditor = Auditor(keys, UnderReplication(keys), no_topology, PlacementConfig(),
                              CONFIG, "127.0.0.1:8080", tick=0.1,
                              bookies=running.client.bookies)
            assert auditor.periodic is not None
            task = asyncio.create_task(auditor.run())
            try:
                periodic = auditor.periodic
                deadline = time.monotonic() + 30
                while periodic.all_ledgers.runs < 1 or periodic.replicas.runs < 1:
                    assert time.monotonic() < deadline, "the checks did not run"
                    await asyncio.sleep(0.05)
                assert own_cluster.raw.get(path) is None  # healthy: nothing marked
                stored = own_cluster.raw.get(CHECK_ALL_LEDGERS_CTIME)
                assert stored is not None and stored.startswith(b"checkAllLedgersCTime: ")
                assert decode_ctime(stored) is not None

                victim = handle.metadata.current_ensemble[2]
                wipe_and_restart(own_cluster, victim)
                deadline = time.monotonic() + 30
                while (raw := own_cluster.raw.get(path)) is None:
                    assert time.monotonic() < deadline, "the periodic check marked nothing"
                    await asyncio.sleep(0.1)
                assert decode_underreplicated_ledger(raw).replicas == (victim,)
            finally:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
    finally:
        await keys.close()
