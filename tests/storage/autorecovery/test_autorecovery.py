"""Auto-recovery against a real etcd and real bookie processes: one auditor elected at
Pulsar's key, marks in BookKeeper's text format, and a bookie killed (-9) whose ledgers the
auditor marks and the worker restores to full replication inside the ledger's strict group."""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import time
from pathlib import Path

import pytest

from metastore import paths
from metastore.ledger_metadata import decode_ledger_metadata
from metastore.versioned_keys import VersionedKeys
from placement import AffinityGroups, PlacementConfig
from storage.autorecovery import (
    AUDITOR_LEADER,
    Auditor,
    AutoRecovery,
    AutoRecoveryConfig,
    UnderReplication,
)
from storage.autorecovery.worker import ReplicationWorker
from storage.bookie.errors import NoLedger
from storage.bookie_client import BookieClient
from storage.ledger import LedgerSpec
from storage.ledger.metadata import managed_ledger_custom_metadata
from tests.storage.bookie.support import BookieProcess
from tests.storage.chaos.support import FAST
from tests.storage.testbed import Cluster, engine
from tests.support import wait_until_async


@pytest.fixture
def cluster(request: pytest.FixtureRequest, cluster: Cluster) -> Cluster:
    """The session's storage cluster on etcd, or (`parametrize(..., indirect=True)` with
    "zookeeper") the same cluster on ZooKeeper."""
    if getattr(request, "param", "etcd") == "zookeeper":
        on_zookeeper: Cluster = request.getfixturevalue("zk_cluster")
        return on_zookeeper
    return cluster


ON_BOTH_STORES = pytest.mark.parametrize("cluster", ["etcd", "zookeeper"], indirect=True)


def keys_of(cluster: Cluster) -> VersionedKeys:
    return VersionedKeys(cluster.etcd.url)


@ON_BOTH_STORES
async def test_marks_are_in_bookkeepers_text_format_and_merge(cluster: Cluster) -> None:
    keys = keys_of(cluster)
    marks = UnderReplication(keys)
    try:
        await marks.mark(4242, ["127.0.0.1:2"])
        await marks.mark(4242, ["127.0.0.1:1", "127.0.0.1:2"])
        raw = cluster.raw.get(paths.underreplicated_ledger(4242))
        assert raw is not None
        lines = raw.decode().splitlines()
        assert lines[:2] == ['replica: "127.0.0.1:1"', 'replica: "127.0.0.1:2"']
        assert lines[2].startswith("ctime: ")
        assert paths.underreplicated_ledger(4242).endswith("/0000/0000/0000/1092/urL0000004242")
        assert [m.ledger_id for m in await marks.marks()] == [4242]
        taken = await marks.get(4242)
        assert taken is not None
        await marks.mark(4242, ["127.0.0.1:3"])  # marked again while a worker held it
        again = await marks.get(4242)
        assert again is not None and again.version == taken.version + 1
        assert again.ctime is not None and taken.ctime is not None
        assert again.ctime >= taken.ctime  # a replica added: the mark time is now
        assert await marks.unmark(4242, taken.version) is False  # the newer mark stays
        assert [m.replicas for m in await marks.marks()] == [
            ("127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3")]
        assert await marks.unmark(4242, again.version) is True
        assert await marks.marks() == []
        assert await marks.unmark(4242, again.version) is True  # absent already: fine
    finally:
        await keys.close()


@ON_BOTH_STORES
async def test_two_candidates_one_auditor_and_a_successor(cluster: Cluster) -> None:
    config = PlacementConfig()
    keys = [keys_of(cluster), keys_of(cluster)]

    async def no_topology():  # type: ignore[no-untyped-def]
        raise AssertionError("not used")

    auditors = [Auditor(k, UnderReplication(k), no_topology, config, FAST, f"10.0.0.{i}:8080",
                        tick=0.05) for i, k in enumerate(keys)]
    both: list[float] = []
    stop = asyncio.Event()

    async def watch() -> None:  # samples both flags on every loop turn
        while not stop.is_set():
            if all(a.is_leader for a in auditors):
                both.append(time.monotonic())
            await asyncio.sleep(0)

    monitor = asyncio.create_task(watch())
    tasks = [asyncio.create_task(a.run()) for a in auditors]
    try:
        leader = await wait_until_async(
            lambda: next((a for a in auditors if a.is_leader), None), 15, interval=0.1)
        raw = cluster.raw.get(AUDITOR_LEADER)
        assert raw is not None and json.loads(raw) == leader.auditor_id
        assert await UnderReplication(keys[0]).auditor() == leader.auditor_id
        first = auditors.index(leader)
        tasks[first].cancel()  # the leader goes away; its lease is revoked
        other = auditors[1 - first]
        await wait_until_async(lambda: other.is_leader, 15, interval=0.1)
        raw = cluster.raw.get(AUDITOR_LEADER)
        assert raw is not None and json.loads(raw) == other.auditor_id
        assert both == []
    finally:
        stop.set()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, monitor, return_exceptions=True)
        for k in keys:
            await k.close()


@ON_BOTH_STORES
async def test_lost_bookie_is_marked_and_its_ledgers_restored_inside_the_group(
    cluster: Cluster, tmp_path: Path
) -> None:
    group = "rep"
    spares = [BookieProcess(cluster.raw, cluster.etcd.url, tmp_path / f"rep{i}", lease_ttl=2)
              for i in range(4)]
    keys = keys_of(cluster)
    try:
        for bookie in spares:
            bookie.start()
        doc = cluster.raw.get_json("/bookies")
        doc[group] = {b.bookie_id: {"rack": f"/rep{i}"} for i, b in enumerate(spares)}
        cluster.raw.put("/bookies", json.dumps(doc))
        members = {b.bookie_id for b in spares}
        groups = AffinityGroups((group,), strict=True)
        rng = random.Random(21)
        data = [rng.randbytes(rng.randint(1, 300)) for _ in range(40)]
        async with engine(cluster) as running:
            client = running.client
            handle = await client.create(LedgerSpec(
                3, 3, 2, managed_ledger_custom_metadata("t/ns/persistent/rep", groups), groups))
            for p in data:
                await handle.add(p)
            await handle.close()
            ensemble = handle.metadata.current_ensemble
            victim = next(b for b in spares if b.bookie_id == ensemble[1])
            recovery = AutoRecovery(keys, client, FAST, "127.0.0.1:8080", tick=0.1)
            recovery.start()
            try:
                victim.kill()

                async def restored() -> tuple[str, ...] | None:
                    raw = cluster.raw.get(paths.ledger(handle.ledger_id))
                    assert raw is not None
                    md = decode_ledger_metadata(handle.ledger_id, raw)
                    marked = cluster.raw.get(paths.underreplicated_ledger(handle.ledger_id))
                    now = md.current_ensemble
                    return now if victim.bookie_id not in now and marked is None else None

                now = await wait_until_async(restored, 60, interval=0.1)
                # marked by the bookie audit once the registration expired, or before that
                # by the all-ledgers check that runs on taking the lead (the dead bookie
                # cannot be read; the worker re-reads it and repairs at once)
                auditor = recovery.auditor
                checked = auditor.periodic.all_ledgers.found if auditor.periodic else set()
                assert auditor.stats.ledgers_marked >= 1 or handle.ledger_id in checked
                assert recovery.worker.replicated_ledgers >= 1
                assert set(now) <= members and len(set(now)) == 3
                assert now[0] == ensemble[0] and now[2] == ensemble[2]
                # full replication: the new bookie holds every entry, byte for byte as a
                # surviving replica does
                async with await BookieClient.connect(now[1]) as fresh, \
                        await BookieClient.connect(now[0]) as old:
                    for entry_id in range(len(data)):
                        assert await fresh.read(handle.ledger_id, entry_id) == \
                            await old.read(handle.ledger_id, entry_id)
                reader = await client.open(handle.ledger_id)
                assert [(await reader.read(i)).payload for i in range(len(data))] == data
            finally:
                await recovery.stop()
    finally:
        for bookie in spares:
            bookie.kill()
        doc = cluster.raw.get_json("/bookies")
        doc.pop(group, None)
        cluster.raw.put("/bookies", json.dumps(doc))
        await keys.close()


def start_group(cluster: Cluster, tmp_path: Path, group: str, count: int) -> list[BookieProcess]:
    spares = [BookieProcess(cluster.raw, cluster.etcd.url, tmp_path / f"{group}{i}",
                            lease_ttl=2) for i in range(count)]
    for bookie in spares:
        bookie.start()
    doc = cluster.raw.get_json("/bookies")
    doc[group] = {b.bookie_id: {"rack": f"/{group}{i}"} for i, b in enumerate(spares)}
    cluster.raw.put("/bookies", json.dumps(doc))
    return spares


def drop_group(cluster: Cluster, spares: list[BookieProcess], *groups: str) -> None:
    for bookie in spares:
        bookie.kill()
    doc = cluster.raw.get_json("/bookies")
    for group in groups:
        doc.pop(group, None)
    cluster.raw.put("/bookies", json.dumps(doc))


def stored(cluster: Cluster, ledger_id: int):  # type: ignore[no-untyped-def]
    raw = cluster.raw.get(paths.ledger(ledger_id))
    assert raw is not None
    return decode_ledger_metadata(ledger_id, raw)


async def test_placement_repair_moves_a_foreign_member_back_inside_the_group(
    cluster: Cluster, tmp_path: Path
) -> None:
    spares = start_group(cluster, tmp_path, "pr", 4)
    keys = keys_of(cluster)
    groups = AffinityGroups(("pr",), strict=True)
    config = AutoRecoveryConfig(**{**FAST.__dict__,
                                   "auditorPeriodicPlacementPolicyCheckInterval": 1,
                                   "repairedPlacementPolicyNotAdheringBookieEnable": True})
    try:
        async with engine(cluster) as running:
            client = running.client
            handle = await client.create(LedgerSpec(
                3, 3, 2, managed_ledger_custom_metadata("t/ns/persistent/pr", groups), groups))
            data = [bytes([i]) * (i + 1) for i in range(20)]
            for p in data:
                await handle.add(p)
            await handle.close()
            first = handle.metadata.current_ensemble
            moved = first[0]
            doc = cluster.raw.get_json("/bookies")  # the operator moves a bookie away
            doc["elsewhere"] = {moved: doc["pr"].pop(moved)}
            cluster.raw.put("/bookies", json.dumps(doc))
            allowed = set(doc["pr"])
            recovery = AutoRecovery(keys, client, config, "127.0.0.1:8081", tick=0.1)
            recovery.start()
            try:
                async def repaired() -> bool:
                    md = stored(cluster, handle.ledger_id)
                    unmarked = cluster.raw.get(paths.underreplicated_ledger(handle.ledger_id))
                    return set(md.current_ensemble) <= allowed and unmarked is None

                try:
                    await wait_until_async(repaired, 30, interval=0.1)
                except AssertionError:
                    raise AssertionError(f"{recovery.worker.stuck} {recovery.auditor.stats} "
                                         f"{stored(cluster, handle.ledger_id)}") from None
                assert handle.ledger_id in recovery.auditor.stats.not_adhering or \
                    recovery.auditor.stats.placement_checks >= 1
                now = stored(cluster, handle.ledger_id).current_ensemble
                assert moved not in now and now[1:] == first[1:]
                async with await BookieClient.connect(now[0]) as fresh:
                    for entry_id in range(len(data)):
                        await fresh.read(handle.ledger_id, entry_id)
                reader = await client.open(handle.ledger_id)
                assert [(await reader.read(i)).payload for i in range(len(data))] == data
            finally:
                await recovery.stop()
    finally:
        drop_group(cluster, spares, "pr", "elsewhere")
        await keys.close()


async def test_open_ledger_of_a_dead_writer_is_recovered_then_repaired_and_strict_stays_inside(
    cluster: Cluster, tmp_path: Path
) -> None:
    spares = start_group(cluster, tmp_path, "ol", 4)
    keys = keys_of(cluster)
    groups = AffinityGroups(("ol",), strict=True)
    try:
        async with engine(cluster) as writer:
            handle = await writer.client.create(LedgerSpec(
                3, 3, 2, managed_ledger_custom_metadata("t/ns/persistent/ol", groups), groups))
            data = [bytes([i]) * 7 for i in range(30)]
            for p in data:
                await handle.add(p)
        # the writer is gone, its ledger OPEN; now a bookie of the ensemble dies too
        first = handle.metadata.current_ensemble
        by_id = {b.bookie_id: b for b in spares}
        by_id[first[2]].kill()
        async with engine(cluster) as running:
            recovery = AutoRecovery(keys, running.client, FAST, "127.0.0.1:8082", tick=0.1)
            recovery.start()
            try:
                async def closed_and_repaired() -> bool:
                    md = stored(cluster, handle.ledger_id)
                    unmarked = cluster.raw.get(paths.underreplicated_ledger(handle.ledger_id))
                    return md.is_closed and first[2] not in md.current_ensemble and \
                        unmarked is None

                await wait_until_async(closed_and_repaired, 60, interval=0.1)
                md = stored(cluster, handle.ledger_id)
                assert md.last_entry_id == len(data) - 1
                assert set(md.current_ensemble) <= set(by_id)
                reader = await running.client.open(handle.ledger_id)
                assert [(await reader.read(i)).payload for i in range(len(data))] == data

                # a second loss: the strict group has no spare left, so the ledger stays
                # marked with the reason, and nothing is written outside the group
                by_id[md.current_ensemble[0]].kill()

                async def stuck() -> str | None:
                    return recovery.worker.stuck.get(handle.ledger_id)

                reason = await wait_until_async(stuck, 60, interval=0.1)
                assert "'ol'" in reason
                assert cluster.raw.get(paths.underreplicated_ledger(handle.ledger_id))
                assert stored(cluster, handle.ledger_id).current_ensemble == md.current_ensemble
                for outsider in cluster.ids:
                    async with await BookieClient.connect(outsider) as connection:
                        with pytest.raises(NoLedger):
                            await connection.read(handle.ledger_id, -1)
            finally:
                await recovery.stop()
    finally:
        drop_group(cluster, spares, "ol")
        await keys.close()


async def test_a_checks_mark_on_a_registered_but_silent_bookie_is_repaired_at_once(
    cluster: Cluster, tmp_path: Path
) -> None:
    """A data check marks a ledger with a bookie that is still registered (killed a moment
    ago: its session has not expired) but cannot give its entries back. The worker judges
    the marked replica by reading it, as upstream's does, and repairs now: it must not take
    the registration's word and drop the mark (the auditor's later mark of the same replica
    would merge into it and be lost with it)."""
    spares = start_group(cluster, tmp_path, "sil", 4)
    keys = keys_of(cluster)
    groups = AffinityGroups(("sil",), strict=True)
    victim = BookieProcess(cluster.raw, cluster.etcd.url, tmp_path / "sil-long", lease_ttl=120)
    try:
        victim.start()
        doc = cluster.raw.get_json("/bookies")
        doc["sil"][victim.bookie_id] = {"rack": "/sil-long"}
        cluster.raw.put("/bookies", json.dumps(doc))
        async with engine(cluster) as running:
            client = running.client
            while True:  # a ledger on the long-session bookie
                handle = await client.create(LedgerSpec(
                    3, 3, 2, managed_ledger_custom_metadata("t/ns/persistent/sil", groups),
                    groups))
                if victim.bookie_id in handle.metadata.current_ensemble:
                    break
                await handle.close()
            data = [bytes([i]) * 11 for i in range(25)]
            for p in data:
                await handle.add(p)
            await handle.close()
            victim.kill()
            marks = UnderReplication(keys)
            await marks.mark(handle.ledger_id, [victim.bookie_id])
            worker = ReplicationWorker(client, marks, FAST, "127.0.0.1:8083", tick=0.1)
            task = asyncio.create_task(worker.run())
            try:
                async def repaired() -> bool:
                    md = stored(cluster, handle.ledger_id)
                    unmarked = cluster.raw.get(paths.underreplicated_ledger(handle.ledger_id))
                    return victim.bookie_id not in md.current_ensemble and unmarked is None

                await wait_until_async(repaired, 30, interval=0.1)
                # repaired while the victim's registration still stood
                assert cluster.raw.get(paths.bookie_available(victim.bookie_id)) is not None
                md = stored(cluster, handle.ledger_id)
                assert set(md.current_ensemble) <= {b.bookie_id for b in spares}
                reader = await client.open(handle.ledger_id)
                assert [(await reader.read(i)).payload for i in range(len(data))] == data
            finally:
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
    finally:
        victim.kill()
        drop_group(cluster, spares, "sil")
        await keys.close()
