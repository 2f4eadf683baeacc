"""Garbage collection of real bookie processes: ledgers deleted from the metadata store are
dropped and their entry-log space reclaimed by compaction; kill -9 in the middle of a
compaction loses no live entry."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from metastore import paths
from metastore.embedded import EmbeddedEtcd
from metastore.ledger_metadata import LedgerMetadata, LedgerState, encode_ledger_metadata
from metastore.ledgers import LedgerMetadataStore
from metastore.store import MetadataStore, parse_metadata_store_url
from metastore.versioned_keys import VersionedKeys
from storage.bookie.bookie import Bookie, BookieSettings
from storage.bookie.errors import NoLedger
from storage.bookie.gc import GarbageCollector, GcSettings
from storage.bookie.protocol import AddRequest, ResultCode
from storage.bookie.service import MetadataLedgers
from storage.bookie_client import BookieClient
from tests.storage.bookie.conftest import BookieFactory
from tests.storage.bookie.support import MASTER_KEY, BookieProcess, entry
from tests.support import RawEtcd, wait_until

# Small logs (many complete ones), frequent checkpoints, GC only when forced.
GC_CONF = {
    "logSizeLimit": str(64 * 1024),
    "flushInterval": "100",
    "gcWaitTime": "3600000",
    "compactionRateByEntries": "100000",
}
# Forced runs compact whatever the disk usage of the machine running the tests.
FORCE_BOTH = '{"forceMajor": true, "forceMinor": true}'


def create_metadata(raw: RawEtcd, bookie: BookieProcess, ledger_id: int) -> None:
    metadata = LedgerMetadata(ledger_id, 1, 1, 1, {0: (bookie.bookie_id,)})
    raw.put(paths.ledger(ledger_id), encode_ledger_metadata(metadata))


def log_bytes(bookie: BookieProcess) -> int:
    return sum(p.stat().st_size for p in (bookie.data_dir / "ledgers" / "current").glob("*.log"))


def gc_runs(bookie: BookieProcess) -> int:
    return bookie.log_path.read_text().count("garbage collection run")


def force_gc(raw: RawEtcd, bookie: BookieProcess) -> None:
    """Ask for a forced run through the metadata store and wait until the bookie finished it."""
    before = gc_runs(bookie)
    raw.put(paths.BOOKIE_GC_REQUEST, FORCE_BOTH)
    wait_until(lambda: gc_runs(bookie) > before, timeout=60)


async def write(bookie: BookieProcess, ledgers: list[int], rounds: int, per_round: int,
                rng: random.Random) -> dict[tuple[int, int], bytes]:
    """Interleaved entries of `ledgers`, so every entry log holds some of each."""
    written: dict[tuple[int, int], bytes] = {}
    async with await BookieClient.connect(bookie.bookie_id) as client:
        for r in range(rounds):
            batch = []
            for ledger_id in ledgers:
                for i in range(r * per_round, (r + 1) * per_round):
                    data = entry(ledger_id, i, rng.randbytes(rng.randint(500, 1500)))
                    written[(ledger_id, i)] = data
                    batch.append(client.add(ledger_id, i, MASTER_KEY, data))
            await asyncio.gather(*batch)
    return written


async def assert_reads(bookie: BookieProcess, entries: dict[tuple[int, int], bytes]) -> None:
    """Every entry reads back byte for byte (the bookie checks each one's CRC32C digest
    before answering, and the client compares the bytes)."""
    async with await BookieClient.connect(bookie.bookie_id) as client:
        keys = sorted(entries)
        got = await asyncio.gather(*(client.read(lid, eid) for lid, eid in keys))
    for key, data in zip(keys, got, strict=True):
        assert data == entries[key], key


async def assert_gone(bookie: BookieProcess, ledger_id: int) -> None:
    async with await BookieClient.connect(bookie.bookie_id) as client:
        with pytest.raises(NoLedger):
            await client.read(ledger_id, 0)


def checkpointed(bookie: BookieProcess, at_least: int) -> None:
    wait_until(lambda: log_bytes(bookie) >= at_least, timeout=20)


async def test_gc_drops_deleted_ledgers_and_compacts(
    start_bookie: BookieFactory, raw_etcd: RawEtcd
) -> None:
    bookie = start_bookie(conf=GC_CONF)
    keep, dropped, never = 7001, 7002, 7003  # `never` had no metadata at all
    for ledger_id in (keep, dropped):
        create_metadata(raw_etcd, bookie, ledger_id)
    rng = random.Random(5)
    written = await write(bookie, [keep, dropped, never], rounds=6, per_round=30, rng=rng)
    checkpointed(bookie, sum(len(v) for v in written.values()))
    live = {k: v for k, v in written.items() if k[0] == keep}

    force_gc(raw_etcd, bookie)  # everything still has metadata but `never`
    await assert_gone(bookie, never)
    await assert_reads(bookie, {k: v for k, v in written.items() if k[0] != never})

    raw_etcd.delete(paths.ledger(dropped))
    force_gc(raw_etcd, bookie)
    await assert_gone(bookie, dropped)
    await assert_reads(bookie, live)
    # The log compaction wrote to was still being written: the next run finds it complete
    # (nothing live left in it) and deletes it.
    force_gc(raw_etcd, bookie)
    await assert_reads(bookie, live)
    total, after = sum(len(v) for v in written.values()), log_bytes(bookie)
    assert after < total * 0.45, (total, after)  # a third of it is live

    bookie.kill()  # and the result is durable
    bookie.start()
    await assert_reads(bookie, live)
    await assert_gone(bookie, dropped)


@pytest.mark.parametrize("seed", [1])
async def test_kill_9_during_compaction_loses_nothing(
    start_bookie: BookieFactory, raw_etcd: RawEtcd, seed: int
) -> None:
    rng = random.Random(seed)
    slow = {**GC_CONF, "compactionRateByEntries": "400"}  # ~2.5 s of copying
    bookie = start_bookie(conf=slow)
    keep, dropped = 7100 + seed * 10, 7101 + seed * 10
    for ledger_id in (keep, dropped):
        create_metadata(raw_etcd, bookie, ledger_id)
    written = await write(bookie, [keep, dropped], rounds=10, per_round=100, rng=rng)
    checkpointed(bookie, sum(len(v) for v in written.values()))
    live = {k: v for k, v in written.items() if k[0] == keep}
    before = log_bytes(bookie)

    raw_etcd.delete(paths.ledger(dropped))
    raw_etcd.put(paths.BOOKIE_GC_REQUEST, FORCE_BOTH)
    wait_until(lambda: "compacting entry log" in bookie.log_path.read_text(), timeout=30)
    await asyncio.sleep(rng.uniform(0.1, 1.5))  # a seeded moment inside the compaction
    assert "entry log" in bookie.log_path.read_text()
    bookie.kill()

    bookie.conf = {**GC_CONF}
    bookie.start()
    await assert_reads(bookie, live)
    force_gc(raw_etcd, bookie)  # finishes the job after the crash
    await assert_reads(bookie, live)
    await assert_gone(bookie, dropped)
    force_gc(raw_etcd, bookie)  # and deletes the log that was current then
    assert log_bytes(bookie) < before * 0.7, (before, log_bytes(bookie))
    bookie.kill()
    bookie.start()
    await assert_reads(bookie, live)


def test_settings_follow_upstream_rules() -> None:
    GcSettings().validate()  # the defaults are valid
    with pytest.raises(ValueError, match="Too short minor compaction interval"):
        GcSettings(gcWaitTime=7_200_000).validate()
    with pytest.raises(ValueError, match="Invalid minor/major compaction settings"):
        GcSettings(minorCompactionThreshold=0.9).validate()
    with pytest.raises(ValueError, match="Invalid major compaction threshold"):
        GcSettings(majorCompactionThreshold=1.5).validate()
    # A threshold or interval <= 0 disables that compaction (and its checks).
    GcSettings(minorCompactionInterval=0, majorCompactionThreshold=0).validate()


def test_bad_gc_setting_stops_the_bookie(tmp_path: Path) -> None:
    from storage.bookie.__main__ import parse

    with pytest.raises(SystemExit):
        parse(["--bookie-id", "127.0.0.1:1", "--data-dir", str(tmp_path),
               "--metadata-store-url", "etcd:http://127.0.0.1:1",
               "-c", "minorCompactionThreshold=0.9"])
    settings = parse(["--bookie-id", "127.0.0.1:1", "--data-dir", str(tmp_path),
                      "--metadata-store-url", "etcd:http://127.0.0.1:1",
                      "-c", "gcWaitTime=1000", "-c", "isThrottleByBytes=true"])
    assert settings.gc.gcWaitTime == 1000 and settings.gc.isThrottleByBytes


class WritesDuringTheScan(MetadataLedgers):
    """The real metadata store's ledgers; while the scan runs, a ledger that has no metadata
    yet gets its first entry on the bookie (a creator racing the collector)."""

    def __init__(self, ledgers: LedgerMetadataStore, bookie: Bookie, ledger_id: int) -> None:
        super().__init__(ledgers)
        self.bookie = bookie
        self.ledger_id = ledger_id

    async def _ids(self) -> AsyncIterator[int]:
        done: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        request = AddRequest(self.ledger_id, 0, MASTER_KEY, entry(self.ledger_id, 0))
        self.bookie.add(request, done.set_result)
        assert await done == ResultCode.EOK
        async for ledger_id in self.ledgers.ledger_ids():
            yield ledger_id

    def ledger_ids(self) -> AsyncIterator[int]:
        return self._ids()


async def test_ledger_first_written_during_the_scan_is_kept(
    etcd: EmbeddedEtcd, tmp_path: Path
) -> None:
    store = MetadataStore(parse_metadata_store_url(etcd.url))
    keys = VersionedKeys.of(store)
    bookie = Bookie(BookieSettings(tmp_path / "bookie"))
    await bookie.open()
    try:
        stale = 7901  # on the bookie before the run, no metadata: garbage
        done: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        bookie.add(AddRequest(stale, 0, MASTER_KEY, entry(stale, 0)), done.set_result)
        assert await done == ResultCode.EOK
        source = WritesDuringTheScan(LedgerMetadataStore(keys), bookie, 7902)
        collector = GarbageCollector(bookie, GcSettings(), source)
        await collector.run_once(force=True)
        collector.close()
        assert bookie.read(stale, 0)[0] == ResultCode.ENOLEDGER
        assert bookie.read(7902, 0) == (ResultCode.EOK, entry(7902, 0))
    finally:
        await bookie.close()
        await keys.close()
        await store.close()


async def test_over_replicated_copies_are_dropped_under_the_lock(
    etcd: EmbeddedEtcd, tmp_path: Path
) -> None:
    me, other = "127.0.0.1:1", "127.0.0.1:2"
    moved, mine, still_open, being_repaired = 7950, 7951, 7952, 7953
    ensembles = {moved: other, mine: me, still_open: other, being_repaired: other}
    store = MetadataStore(parse_metadata_store_url(etcd.url))
    keys = VersionedKeys.of(store)
    ledgers = LedgerMetadataStore(keys)
    repairing = paths.underreplication_lock(being_repaired)
    for ledger_id, holder in ensembles.items():
        state = LedgerState.OPEN if ledger_id == still_open else LedgerState.CLOSED
        await ledgers.create(LedgerMetadata(ledger_id, 1, 1, 1, {0: (holder,)}, state=state,
                                            last_entry_id=-1 if ledger_id == still_open else 0))
    await keys.create(repairing, b"a replication worker")
    bookie = Bookie(BookieSettings(tmp_path / "bookie"))
    await bookie.open()
    try:
        for ledger_id in ensembles:
            done: asyncio.Future[int] = asyncio.get_running_loop().create_future()
            bookie.add(AddRequest(ledger_id, 0, MASTER_KEY, entry(ledger_id, 0)),
                       done.set_result)
            assert await done == ResultCode.EOK
        settings = GcSettings(gcOverreplicatedLedgerWaitTime=1)
        collector = GarbageCollector(bookie, settings, MetadataLedgers(ledgers, me),
                                     bookie_id=me)
        await asyncio.sleep(0.01)  # past gcOverreplicatedLedgerWaitTime since it started
        await collector.run_once()
        collector.close()
        assert bookie.read(moved, 0)[0] == ResultCode.ENOLEDGER
        for kept in (mine, still_open, being_repaired):
            assert bookie.read(kept, 0) == (ResultCode.EOK, entry(kept, 0))
        assert not await keys.exists(paths.underreplication_lock(moved))  # released
        assert await keys.exists(repairing)  # someone else's lock: left alone
    finally:
        await bookie.close()
        for ledger_id in ensembles:
            await ledgers.delete(ledger_id)
        await keys.delete(repairing)
        await keys.close()
        await store.close()
