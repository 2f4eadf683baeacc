"""The service (`python -m api` with `autoRecoveryDaemonEnabled=true`) killed with SIGKILL while
its replication worker is copying a lost bookie's entries, then started again against the same
etcd and data dir: the lock of the dead worker expires with its lease, the new worker takes
the ledger again and finishes, and every acknowledged entry reads back byte for byte."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from metastore import paths
from metastore.embedded import EmbeddedEtcd
from storage.bookie.errors import BookieError
from storage.bookie_client import BookieClient
from tests.storage.chaos.support import Group, Produced, replication_gaps, stored
from tests.storage.testbed import Cluster, engine
from tests.support import RawEtcd, ServerProcess, wait_until, wait_until_async

ENTRIES = 120
ENTRY_SIZE = 1000
# the copy of one bookie's 120 KB takes about 4 s: long enough to kill the service mid-copy
SERVICE_CONF = {
    "autoRecoveryDaemonEnabled": "true",
    "lostBookieRecoveryDelay": "0",
    "replicationRateByBytes": "30000",
    "rereplicationEntryBatchSize": "5",
    "openLedgerRereplicationGracePeriod": "1000",
    "lockReleaseOfFailedLedgerGracePeriod": "1000",
    "rwRereplicateBackoffMs": "500",
    "metadataStoreSessionTimeoutMillis": "2000",
}


async def holds_entry(bookie: str, ledger_id: int, entry_id: int) -> bool:
    try:
        async with await BookieClient.connect(bookie, timeout=2) as conn:
            await conn.read(ledger_id, entry_id)
    except (BookieError, OSError, TimeoutError):
        return False
    return True


@pytest.mark.slow
async def test_service_killed_mid_copy_restarts_and_recovery_finishes(
    chaos_etcd: EmbeddedEtcd, tmp_path: Path
) -> None:
    raw = RawEtcd(chaos_etcd.endpoint)
    group = Group(chaos_etcd, raw, tmp_path, "restart")
    service = ServerProcess(chaos_etcd.url, tmp_path / "service", extra_conf=SERVICE_CONF,
                            extra_args=["--data-dir", str(tmp_path / "service-data")])
    try:
        group.add(4)
        rng = random.Random(3)
        produced = Produced()
        async with engine(Cluster(chaos_etcd, raw, []), seed=3) as running:
            handle = await running.client.create(group.spec())
            for _ in range(ENTRIES):
                await produced.push(handle, rng.randbytes(ENTRY_SIZE))
            await handle.close()
        ledger_id = handle.ledger_id
        ensemble = handle.metadata.current_ensemble
        victim = ensemble[1]
        target = next(b for b in group.allowed if b not in ensemble)  # the only candidate
        service.start()
        group.by_id(victim).kill()
        lock = paths.underreplication_lock(ledger_id)

        async def copying() -> bool:
            return raw.get(lock) is not None and await holds_entry(target, ledger_id, 0)

        await wait_until_async(copying, 30, interval=0.1)
        service.kill()  # SIGKILL: no cleanup, the lock stays until its lease expires
        assert victim in stored(raw, ledger_id).current_ensemble, "copy already finished"
        assert not await holds_entry(target, ledger_id, ENTRIES - 1), "copy already finished"
        wait_until(lambda: raw.get(lock) is None, timeout=15)  # the dead worker's lease
        service.start()  # the same etcd, the same data dir

        async def replicated() -> bool:
            return not await replication_gaps(raw, produced, group.allowed, {victim})

        await wait_until_async(replicated, 60, interval=0.1)
        md = stored(raw, ledger_id)
        assert md.current_ensemble == (ensemble[0], target, ensemble[2])
        assert md.last_entry_id == ENTRIES - 1
        async with engine(Cluster(chaos_etcd, raw, []), seed=4) as running:
            reader = await running.client.open(ledger_id)
            for entry_id, payload in produced.pushed[ledger_id].items():
                assert (await reader.read(entry_id)).payload == payload
    finally:
        service.kill()
        group.stop_all()
