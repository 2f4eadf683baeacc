"""The auditor's periodic data checks against real bookie processes on an etcd of their own
(a wiped bookie must not disturb the shared cluster): a healthy cluster is marked nothing; a
bookie whose data directory was wiped and which came back under the same id is found by the
all-ledgers check (the ledger marked with it) and by the replicas check (reported short of
copies); an OPEN ledger's last fragment is checked up to its LAC; a bookie holding only part
of a ledger is found by the replicas check through its list of entries; the replication worker
repairs a ledger marked for a bookie that is registered but lost its data (instead of dropping
the mark), and drops a mark whose bookie still holds its data."""

from __future__ import annotations

import asyncio
import shutil
import time
from collections.abc import Iterable, Iterator
from dataclasses import replace
from pathlib import Path

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
    forget_last_runs,
    shortfall,
    stripe_bounds,
)
from storage.autorecovery.worker import ReplicationWorker
from storage.bookie_client import BookieClient
from storage.ledger import LedgerSpec
from storage.ledger.handle import WriteHandle, master_key
from storage.ledger.metadata import managed_ledger_custom_metadata
from tests.storage.bookie.support import BookieProcess
from tests.storage.testbed import Cluster, engine, start_cluster, stop_cluster
from tests.support import wait_until_async

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


def test_shortfall_classes_a_ledger_by_its_most_missed_entry() -> None:
    # Qw=3, Qa=2; entry -> how many bookies of its write set lack it
    assert shortfall({}, 3, 2) is None
    assert shortfall({4: 1, 5: 1}, 3, 2) == "below_write_quorum"  # 2 copies: at Qa, below Qw
    assert shortfall({4: 1, 5: 2}, 3, 2) == "below_ack_quorum"  # entry 5 has 1 copy
    assert shortfall({4: 3, 5: 2}, 3, 2) == "no_replica"


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
                await wait_until_async(  # both checks ran
                    lambda: periodic.all_ledgers.runs >= 1 and periodic.replicas.runs >= 1, 30)
                assert own_cluster.raw.get(path) is None  # healthy: nothing marked
                stored = own_cluster.raw.get(CHECK_ALL_LEDGERS_CTIME)
                assert stored is not None and stored.startswith(b"checkAllLedgersCTime: ")
                assert decode_ctime(stored) is not None

                victim = handle.metadata.current_ensemble[2]
                wipe_and_restart(own_cluster, victim)
                raw = await wait_until_async(lambda: own_cluster.raw.get(path), 30)  # marked
                assert decode_underreplicated_ledger(raw).replicas == (victim,)
            finally:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
    finally:
        await keys.close()


async def test_open_ledgers_last_fragment_is_checked_up_to_its_lac(own_cluster: Cluster) -> None:
    """Ten entries (LAC 8 on the last), one entry (LAC -1: the first entry is probed on its
    write set) and none (every bookie says "no such ledger": nothing to check), all OPEN."""
    spec = LedgerSpec(3, 3, 2, managed_ledger_custom_metadata("t/ns/persistent/open", None))
    keys = VersionedKeys(parse_metadata_store_url(own_cluster.etcd.url))
    marked: dict[int, set[str]] = {}

    async def record(ledger_id: int, missing: Iterable[str]) -> None:
        marked.setdefault(ledger_id, set()).update(missing)

    try:
        async with engine(own_cluster) as writer, engine(own_cluster) as running:
            ten = await writer.client.create(spec)
            for i in range(10):
                await ten.add(b"entry %d" % i)
            one = await writer.client.create(spec)
            await one.add(b"only")
            empty = await writer.client.create(spec)
            mine = {ten.ledger_id, one.ledger_id, empty.ledger_id}
            checks = PeriodicChecks(keys, UnderReplication(keys), running.client.bookies,
                                    CONFIG, record)
            assert not (await checks.check_all_ledgers()) & mine
            victim = ten.metadata.current_ensemble[0]
            wipe_and_restart(own_cluster, victim)
            assert (await checks.check_all_ledgers()) & mine == {ten.ledger_id, one.ledger_id}
            assert {k: v for k, v in marked.items() if k in mine} == {
                ten.ledger_id: {victim}, one.ledger_id: {victim}}
            # never fenced: the writer goes on
            assert await ten.add(b"entry 10") == 10
    finally:
        await keys.close()


async def test_replicas_check_lists_entries_and_finds_a_bookie_missing_part_of_a_ledger(
    own_cluster: Cluster,
) -> None:
    handle = await write_ledger(own_cluster, 12)
    lid, ensemble = handle.ledger_id, handle.metadata.current_ensemble
    victim, donor = ensemble[2], ensemble[0]
    wipe_and_restart(own_cluster, victim)
    key = master_key(handle.metadata.password or b"")
    async with await BookieClient.connect(donor) as source, \
            await BookieClient.connect(victim) as target:
        for entry_id in range(6):  # the victim gets entries 0-5 back, not 6-11
            packaged = await source.read(lid, entry_id)
            await target.add(lid, entry_id, key, packaged, recovery=True)
        held = await target.entries_of_ledger(lid)
        assert [e for e in range(12) if e in held] == list(range(6))
    keys = VersionedKeys(parse_metadata_store_url(own_cluster.etcd.url))

    async def no_mark(ledger_id: int, missing: Iterable[str]) -> None:
        raise AssertionError("the replicas check marks nothing")

    try:
        async with engine(own_cluster) as running:
            checks = PeriodicChecks(keys, UnderReplication(keys), running.client.bookies,
                                    CONFIG, no_mark)
            report = await checks.check_replicas()
            # entries 6-11 have 2 of 3 copies: at Qa, below Qw
            assert lid in report.below_write_quorum
            assert lid not in report.no_replica | report.below_ack_quorum
            assert lid not in report.unavailable
            # one list request per bookie per ledger, no entry reads
            progress = checks.replicas
            assert progress.entries_read == 0
            assert 0 < progress.requests <= 3 * progress.ledgers_checked
    finally:
        await keys.close()


async def test_worker_repairs_a_registered_bookie_that_lost_its_data(
    own_cluster: Cluster, tmp_path: Path,
) -> None:
    handle = await write_ledger(own_cluster, 8)
    lid, ensemble = handle.ledger_id, handle.metadata.current_ensemble
    victim, healthy = ensemble[1], ensemble[0]
    spare = BookieProcess(own_cluster.raw, own_cluster.etcd.url, tmp_path / "spare").start()
    keys = VersionedKeys(parse_metadata_store_url(own_cluster.etcd.url))
    marks = UnderReplication(keys)
    try:
        wipe_and_restart(own_cluster, victim)  # registered again, without its data
        await marks.mark(lid, [victim])  # as the all-ledgers check marks it
        async with engine(own_cluster) as running:
            worker = ReplicationWorker(running.client, marks, CONFIG, "worker-1")
            mark = await marks.get(lid)
            assert mark is not None
            await worker.rereplicate(mark)
            md = await running.client.read_metadata(lid)
            assert md.ensembles[0] == (ensemble[0], spare.bookie_id, ensemble[2])
            assert await marks.get(lid) is None  # repaired, then unmarked
            async with await BookieClient.connect(spare.bookie_id) as copy:
                held = await copy.entries_of_ledger(lid)
                assert [e for e in range(8) if e in held] == list(range(8))
            # a mark naming a bookie that still holds its part: dropped, nothing copied
            await marks.mark(lid, [healthy])
            mark = await marks.get(lid)
            assert mark is not None
            await worker.rereplicate(mark)
            assert await marks.get(lid) is None
            assert (await running.client.read_metadata(lid)).ensembles == md.ensembles
            assert worker.copied_entries == 8
    finally:
        await keys.close()
        spare.kill()
        own_cluster.raw.delete(paths.bookie_available(spare.bookie_id))


async def test_a_check_cut_short_is_not_taken_for_a_completed_one(own_cluster: Cluster) -> None:
    handle = await write_ledger(own_cluster, 4)
    wipe_and_restart(own_cluster, handle.metadata.current_ensemble[0])
    keys = VersionedKeys(parse_metadata_store_url(own_cluster.etcd.url))
    config = replace(CONFIG, auditorReplicasCheckInterval=0)
    marked: set[int] = set()

    async def cut_short(ledger_id: int, missing: Iterable[str]) -> None:
        raise RuntimeError("leadership lost while marking")

    async def record(ledger_id: int, missing: Iterable[str]) -> None:
        marked.add(ledger_id)

    try:
        await forget_last_runs(keys)
        async with engine(own_cluster) as running:
            first = PeriodicChecks(keys, UnderReplication(keys), running.client.bookies,
                                   config, cut_short)
            with pytest.raises(RuntimeError):
                await first.run()
            # not stored: the next leader runs the check at once, not an interval later
            assert own_cluster.raw.get(CHECK_ALL_LEDGERS_CTIME) is None
            before_ms = int(time.time() * 1000)
            second = PeriodicChecks(keys, UnderReplication(keys), running.client.bookies,
                                    config, record, tick=0.05)
            task = asyncio.create_task(second.run())
            try:
                stored = await wait_until_async(  # the check ran
                    lambda: own_cluster.raw.get(CHECK_ALL_LEDGERS_CTIME), 30)
            finally:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
            assert handle.ledger_id in marked
            completed = decode_ctime(stored)
            assert completed is not None and completed >= before_ms
    finally:
        await keys.close()
