"""Auto-recovery against a real etcd and real bookie processes: one auditor elected at
Pulsar's key, marks in BookKeeper's text format, and a bookie killed (-9) whose ledgers the
auditor marks and the worker restores to full replication inside the ledger's strict group."""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

from metastore import paths
from metastore.ledger_metadata import decode_ledger_metadata
from metastore.store import parse_metadata_store_url
from metastore.versioned_keys import VersionedKeys
from placement import AffinityGroups, PlacementConfig
from storage.autorecovery import (
    AUDITOR_LEADER,
    Auditor,
    AutoRecovery,
    AutoRecoveryConfig,
    UnderReplication,
)
from storage.bookie.client import BookieClient
from storage.ledger import LedgerSpec
from storage.ledger.metadata import managed_ledger_custom_metadata
from tests.storage.bookie.support import BookieProcess
from tests.storage.cluster import Cluster, engine

T = TypeVar("T")

FAST = AutoRecoveryConfig(
    autoRecoveryDaemonEnabled=True,
    openLedgerRereplicationGracePeriod=1000,
    lockReleaseOfFailedLedgerGracePeriod=1000,
    rwRereplicateBackoffMs=500,
    metadataStoreSessionTimeoutMillis=2000,
)


async def eventually(check: Callable[[], Awaitable[T]], timeout: float = 30.0) -> T:
    """Poll `check` until it returns something truthy; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        last = await check()
        if last:
            return last  # type: ignore[return-value]
        await asyncio.sleep(0.1)
    raise AssertionError(f"not met within {timeout}s; last: {last!r}")


def keys_of(cluster: Cluster) -> VersionedKeys:
    return VersionedKeys(parse_metadata_store_url(cluster.etcd.url))


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
        await marks.unmark(4242)
        assert await marks.marks() == []
    finally:
        await keys.close()


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
        leader = await eventually(
            lambda: asyncio.sleep(0, next((a for a in auditors if a.is_leader), None)), 15)
        raw = cluster.raw.get(AUDITOR_LEADER)
        assert raw is not None and json.loads(raw) == leader.auditor_id
        assert await UnderReplication(keys[0]).auditor() == leader.auditor_id
        first = auditors.index(leader)
        tasks[first].cancel()  # the leader goes away; its lease is revoked
        other = auditors[1 - first]
        await eventually(lambda: asyncio.sleep(0, other.is_leader), 15)
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

                now = await eventually(restored, 60)
                assert recovery.auditor.stats.ledgers_marked >= 1
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
