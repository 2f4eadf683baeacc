"""Ledgers under failure, against real bookie processes and a real etcd (E=3/Qw=3/Qa=2):
a bookie killed (-9) during a write loop is replaced by an ensemble change inside the ledger's
recorded groups; a strict group with no spare fails the add naming the constraint and writes
nothing elsewhere; recovery fences the ledger, keeps every acknowledged entry and closes it."""

from __future__ import annotations

import asyncio
import json
import logging
import random
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from metastore import paths
from metastore.ledger_metadata import LedgerState, decode_ledger_metadata
from placement import AffinityGroups
from storage.bookie.errors import NoLedger
from storage.bookie_client import BookieClient
from storage.ledger import (
    BookiePool,
    ClientClosed,
    EnsembleChangeFailed,
    LedgerFenced,
    LedgerSpec,
)
from storage.ledger.bookies import BookieConnection
from storage.ledger.metadata import managed_ledger_custom_metadata
from storage.ledger.recovery import recover
from tests.storage.bookie.support import BookieProcess
from tests.storage.testbed import Cluster, ledger_client


def spec(groups: AffinityGroups) -> LedgerSpec:
    return LedgerSpec(3, 3, 2, managed_ledger_custom_metadata("t/ns/persistent/r", groups),
                      groups)


def payloads(count: int, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    return [rng.randbytes(rng.randint(1, 512)) for _ in range(count)]


@contextmanager
def group_of_spares(cluster: Cluster, tmp_path: Path, group: str,
                    count: int) -> Iterator[list[BookieProcess]]:
    """`count` extra bookie processes in their own group, each on its own rack."""
    spares = [BookieProcess(cluster.raw, cluster.etcd.url, tmp_path / f"{group}{i}")
              for i in range(count)]
    try:
        for bookie in spares:
            bookie.start()
        doc = cluster.raw.get_json("/bookies")
        doc[group] = {b.bookie_id: {"rack": f"/{group}{i}"} for i, b in enumerate(spares)}
        cluster.raw.put("/bookies", json.dumps(doc))
        yield spares
    finally:
        for bookie in spares:
            bookie.kill()
        doc = cluster.raw.get_json("/bookies")
        doc.pop(group, None)
        cluster.raw.put("/bookies", json.dumps(doc))
        for bookie in spares:
            cluster.raw.delete(paths.bookie_available(bookie.bookie_id))


def stored_metadata(cluster: Cluster, ledger_id: int):  # type: ignore[no-untyped-def]
    raw = cluster.raw.get(paths.ledger(ledger_id))
    assert raw is not None
    return decode_ledger_metadata(ledger_id, raw)


@pytest.mark.slow
async def test_a_bookie_killed_mid_write_is_replaced_inside_the_group_and_nothing_is_lost(
    cluster: Cluster, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="storage.ledger.handle")
    with group_of_spares(cluster, tmp_path, "chg", 4) as bookies:
        members = {b.bookie_id for b in bookies}
        groups = AffinityGroups(("chg",), strict=True)
        data = payloads(120, seed=11)
        async with ledger_client(cluster) as client:
            handle = await client.create(spec(groups))
            first = handle.metadata.current_ensemble
            victim = next(b for b in bookies if b.bookie_id in first)
            acked: list[int] = []
            for start in range(0, len(data), 10):
                window = [handle.add_nowait(p) for p in data[start:start + 10]]
                if start == 50:
                    victim.kill()  # while this window's adds are outstanding
                acked += await asyncio.gather(*window)
            assert acked == list(range(len(data)))
            assert handle.ensemble_changes >= 1
            now = handle.metadata.current_ensemble
            assert victim.bookie_id not in now and set(now) <= members
            stored = stored_metadata(cluster, handle.ledger_id)
            assert stored.state is LedgerState.OPEN and len(stored.ensembles) >= 2
            assert all(set(e) <= members for e in stored.ensembles.values())
            assert max(stored.ensembles) <= 60  # the new segment starts at LAC + 1
            # the failed add and the ensemble change are logged with the ledger's id, once
            lines = [r.getMessage() for r in caplog.records]
            failed = [line for line in lines if f"to bookie {victim.bookie_id} failed" in line]
            assert len(failed) == 1 and f"ledger {handle.ledger_id}:" in failed[0]
            assert any(f"ledger {handle.ledger_id}: ensemble changed" in line
                       for line in lines)
        # the writer is gone without closing; recovery with one bookie dead keeps every entry
        async with ledger_client(cluster) as other:
            md = await recover(other, handle.ledger_id)
            assert md.state is LedgerState.CLOSED
            assert md.last_entry_id == len(data) - 1 and md.length == sum(map(len, data))
            reader = await other.open(handle.ledger_id)
            assert [(await reader.read(i)).payload for i in range(len(data))] == data


async def test_a_closing_client_fails_its_handles_and_changes_no_ensemble(
    cluster: Cluster, tmp_path: Path
) -> None:
    """A client closed while a copy is unanswered past the ack quorum (a slow third bookie):
    the connections it closes are its own doing, not a bookie's failure, so no ensemble
    change is made (a spare in the group would be there to take it), and the handle adds
    nothing more (upstream's ClientClosedException). A writer's shutdown must not move its
    open ledger off a healthy bookie while someone else may be recovering it."""
    with group_of_spares(cluster, tmp_path, "cc", 4) as bookies:
        groups = AffinityGroups(("cc",), strict=True)
        stopped: subprocess.Popen[bytes] | None = None
        try:
            async with ledger_client(cluster) as client:
                handle = await client.create(spec(groups))
                first = handle.metadata.current_ensemble
                stopped = next(b for b in bookies if b.bookie_id == first[2]).process
                assert stopped is not None
                stopped.send_signal(signal.SIGSTOP)
                assert await handle.add(b"acked by two") == 0
            # the client closed with the stopped bookie's copy unanswered
            with pytest.raises(ClientClosed, match="BookKeeper client is closed"):
                await handle.add(b"late")
            assert handle.ensemble_changes == 0 and handle.last_add_confirmed == 0
            with pytest.raises(ClientClosed):  # and creates no ledger
                await client.create(spec(groups))
        finally:
            if stopped is not None:
                stopped.send_signal(signal.SIGCONT)
        stored = stored_metadata(cluster, handle.ledger_id)
        assert stored.state is LedgerState.OPEN
        assert stored.ensembles == {0: first}


async def test_a_closed_pool_dials_nothing_and_drops_a_dial_it_outlived(
    cluster: Cluster,
) -> None:
    """`BookiePool.close` during a dial: the connection the dial brings back is closed, not
    kept, and its waiter gets ClientClosed; after close nothing dials at all."""
    entered, release = asyncio.Event(), asyncio.Event()
    dialled: list[BookieClient] = []

    async def connect(bookie: str) -> BookieConnection:
        entered.set()
        await release.wait()
        connection = await BookieClient.connect(bookie)
        dialled.append(connection)
        return connection

    pool = BookiePool(connect)
    bookie = cluster.ids[0]
    waiting = asyncio.ensure_future(pool.get(bookie))
    await asyncio.wait_for(entered.wait(), 10)  # the dial is under way, held at `release`
    await pool.close()
    assert pool.closed
    release.set()
    with pytest.raises(ClientClosed):
        await waiting
    assert len(dialled) == 1 and not dialled[0].connected
    assert pool.cached(bookie) is None
    with pytest.raises(ClientClosed):
        await pool.get(bookie)
    assert len(dialled) == 1  # no second dial


@pytest.mark.slow
async def test_strict_group_without_a_spare_fails_the_add_naming_the_constraint(
    cluster: Cluster, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with group_of_spares(cluster, tmp_path, "tight", 3) as bookies:
        groups = AffinityGroups(("tight",), strict=True)
        async with ledger_client(cluster) as client:
            handle = await client.create(spec(groups))
            for p in payloads(5, seed=12):
                await handle.add(p)
            bookies[1].kill()
            with pytest.raises(EnsembleChangeFailed) as failed:
                for p in payloads(3, seed=13):
                    await handle.add(p)
            assert failed.value.constraint
            assert any(f"ledger {handle.ledger_id}: no more adds" in r.getMessage()
                       for r in caplog.records)
            assert "tight" in str(failed.value)
            assert bookies[1].bookie_id in str(failed.value)
            stored = stored_metadata(cluster, handle.ledger_id)
            assert list(stored.ensembles) == [0]  # no segment outside the group
            assert set(stored.current_ensemble) == {b.bookie_id for b in bookies}
        for outsider in cluster.ids:  # no byte went to a bookie outside the group
            async with await BookieClient.connect(outsider) as connection:
                with pytest.raises(NoLedger):
                    await connection.read(handle.ledger_id, -1)


async def test_recovery_fences_the_writer_and_keeps_every_acknowledged_entry(
    cluster: Cluster,
) -> None:
    groups = AffinityGroups(("iso",), strict=True)
    data = payloads(40, seed=14)
    async with ledger_client(cluster) as writer_client:
        writer = await writer_client.create(spec(groups))
        for p in data[:30]:
            await writer.add(p)
        in_flight = [writer.add_nowait(p) for p in data[30:]]
        lac_before = writer.last_add_confirmed
        async with ledger_client(cluster) as other:
            md = await recover(other, writer.ledger_id)
            assert md.state is LedgerState.CLOSED
            await asyncio.gather(*in_flight, return_exceptions=True)
            acked = [30 + i for i, f in enumerate(in_flight) if f.exception() is None]
            # LAC never goes back, and every acknowledged entry is in the closed ledger
            assert md.last_entry_id >= max([lac_before, *acked])
            reader = await other.open(writer.ledger_id)
            assert [(await reader.read(i)).payload for i in range(md.last_entry_id + 1)] == \
                data[:md.last_entry_id + 1]
            with pytest.raises(LedgerFenced):  # the old writer can add nothing more
                await writer.add(b"late")
            assert await recover(other, writer.ledger_id) == md  # a second recovery: no change
            assert stored_metadata(cluster, writer.ledger_id).last_entry_id == md.last_entry_id
