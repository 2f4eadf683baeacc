"""Two bookies of a strict group stopped (kill -9) during a produce loop, E=3/Qw=3/Qa=2:
with five bookies in the group the writes carry on through ensemble changes; with four the add
fails naming the constraint and nothing is written outside the group. Either way nothing
acknowledged is lost, and once auto-recovery runs (with a bookie added where the group was
short) every ledger is back to full replication, byte for byte, on the group's live bookies."""

from __future__ import annotations

import asyncio
import itertools
import random
import time
from pathlib import Path

import pytest

from metastore import paths
from metastore.embedded import EmbeddedEtcd
from metastore.store import parse_metadata_store_url
from metastore.versioned_keys import VersionedKeys
from storage.autorecovery import AutoRecovery
from storage.bookie.errors import NoLedger
from storage.bookie_client import BookieClient
from storage.ledger import EnsembleChangeFailed, WriteHandle
from tests.storage.chaos.support import FAST, Group, Produced, replication_gaps
from tests.storage.testbed import Cluster, engine
from tests.support import RawEtcd, wait_until_async

ROLL_EVERY = 40  # entries per ledger before the producer closes it and starts another
WINDOW = 10  # adds outstanding at once


@pytest.mark.slow
@pytest.mark.parametrize("size", [5, 4], ids=["spare-left", "group-short"])
async def test_two_bookies_stopped_mid_produce(chaos_etcd: EmbeddedEtcd, tmp_path: Path,
                                                size: int) -> None:
    raw = RawEtcd(chaos_etcd.endpoint)
    group = Group(chaos_etcd, raw, tmp_path, f"two{size}")
    keys = VersionedKeys(parse_metadata_store_url(chaos_etcd.url))
    try:
        group.add(size)
        group.add(1, outside=True)  # a writable bookie the strict policy must never use
        rng = random.Random(size)
        produced = Produced()
        async with engine(Cluster(chaos_etcd, raw, []), seed=size) as running:
            client = running.client
            recovery = AutoRecovery(keys, client, FAST, f"127.0.0.1:{size}", tick=0.1)
            recovery.start()
            try:
                handle: WriteHandle = await client.create(group.spec())
                killed: list[str] = []
                last_kill, kill_handle = 0, handle
                failure: EnsembleChangeFailed | None = None
                # Windows go on until both kills are done and 15 windows have passed, within
                # a time bound rather than a window count: the second kill waits for the first
                # bookie's registration to expire, which takes wall time, not windows.
                deadline = time.monotonic() + 60
                for window in itertools.count():
                    if time.monotonic() > deadline:
                        break
                    # Two left of a group of four: no new ledger can be placed, so the
                    # producer stays on this one until an add meets the ensemble change (the
                    # survivors, Qa=2, may acknowledge whole windows before the second
                    # victim's failure is seen).
                    short = size == 4 and len(killed) == 2
                    if handle.last_add_pushed + 1 >= ROLL_EVERY and not short:
                        await handle.close()
                        handle = await client.create(group.spec())
                    futures = [produced.push(handle, rng.randbytes(rng.randint(1, 400)))
                               for _ in range(WINDOW)]
                    # while this window's adds are outstanding; the second once the first is
                    # seen lost (its registration expired), so no ensemble change picks it, and
                    # only while the next window still goes to this ledger: with Qa=2 the two
                    # survivors may acknowledge the kill window's own adds before the victim's
                    # failure is seen, so it is the next window that meets the ensemble change
                    if window == 5 or (len(killed) == 1 and window >= 9
                                       and handle.last_add_pushed + 1 < ROLL_EVERY
                                       and raw.get(paths.bookie_available(killed[0])) is None):
                        victim = next(b for b in handle.metadata.current_ensemble
                                      if b not in killed)
                        group.by_id(victim).kill()
                        killed.append(victim)
                        last_kill, kill_handle = window, handle
                    results = await asyncio.gather(*futures, return_exceptions=True)
                    errors = [r for r in results if isinstance(r, BaseException)]
                    if errors:
                        assert all(isinstance(e, EnsembleChangeFailed) for e in errors), errors
                        failure = errors[0]  # type: ignore[assignment]
                        break
                    if len(killed) == 2 and window >= max(15, last_kill + 2):
                        break
                    await asyncio.sleep(0.05)
                assert len(killed) == 2, (killed, window)
                if size == 5:  # three writable group members left: writes carried on
                    assert failure is None
                    assert kill_handle.ensemble_changes >= 1  # it may have rolled over since
                    await handle.close()
                else:  # two left: E=3 cannot be met inside the strict group
                    assert failure is not None
                    assert failure.constraint, failure
                    assert group.name in str(failure) and killed[1] in str(failure)
                    for outsider in group.outsiders:  # no byte went elsewhere
                        async with await BookieClient.connect(outsider.bookie_id) as conn:
                            for ledger_id in produced.pushed:
                                with pytest.raises(NoLedger):
                                    await conn.read(ledger_id, -1)
                    group.add(1)  # the operator adds a bookie to the group
                acked = sum(map(len, produced.acked.values()))
                assert acked >= 90 if size == 5 else acked >= 50
                async def replicated() -> bool:
                    gaps = await replication_gaps(raw, produced, group.allowed, set(killed))
                    return not gaps or print(gaps[:5]) or False  # type: ignore[func-returns-value]

                await wait_until_async(replicated, 90, interval=0.1)
                reader_checks = 0
                for ledger_id, entries in produced.acked.items():  # and through the client
                    reader = await client.open(ledger_id)
                    for entry_id in sorted(entries):
                        entry = await reader.read(entry_id)
                        assert entry.payload == produced.pushed[ledger_id][entry_id]
                        reader_checks += 1
                assert reader_checks == acked
            finally:
                await recovery.stop()
    finally:
        group.stop_all()
        await keys.close()
