"""The checkpoint writes the swapped write cache to the entry log sorted by (ledger, entry),
each entry once, whatever order and repeats the adds came in."""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path

from storage.bookie.bookie import FLUSH_AT, Bookie, BookieSettings
from storage.bookie.format import RECORD_HEADER_LEN
from storage.bookie.protocol import AddRequest, ResultCode
from tests.storage.bookie.support import MASTER_KEY, entry
from tests.support import wait_until_async


async def test_checkpoint_writes_entries_sorted_and_once(tmp_path: Path) -> None:
    bookie = Bookie(BookieSettings(tmp_path / "bookie"))
    await bookie.open()
    try:
        # Interleaved ledgers, entries out of order, one entry added twice.
        order = [(9, 2), (7, 1), (9, 0), (8, 5), (7, 0), (9, 1), (8, 4), (7, 1), (8, 3)]
        loop = asyncio.get_running_loop()
        for ledger_id, entry_id in order:
            done: asyncio.Future[int] = loop.create_future()
            bookie.add(AddRequest(ledger_id, entry_id, MASTER_KEY, entry(ledger_id, entry_id)),
                       done.set_result)
            assert await done == ResultCode.EOK
        await bookie.checkpoint()
        assert bookie.write_cache_size == 0
        assert bookie.index is not None
        keys = sorted(set(order))
        locations = [bookie.index.get(ledger_id, entry_id) for ledger_id, entry_id in keys]
        assert all(location is not None for location in locations)
        offsets = [(loc.log_id, loc.offset) for loc in locations if loc is not None]
        assert offsets == sorted(offsets)  # the log holds them in (ledger, entry) order
        # Each once: every record follows the previous one directly (no second copy between).
        found = [loc for loc in locations if loc is not None]
        for before, after in itertools.pairwise(found):
            assert after.log_id == before.log_id
            assert after.offset == before.offset + before.size + RECORD_HEADER_LEN
        for ledger_id, entry_id in keys:
            assert bookie.read(ledger_id, entry_id) == (ResultCode.EOK, entry(ledger_id, entry_id))
    finally:
        await bookie.close()


async def test_checkpoints_start_at_a_point_drawn_anew_each_time(tmp_path: Path) -> None:
    """Between FLUSH_AT of the write cache's limit, a new point after each checkpoint, so the
    Qw bookies of a ledger, which get the same entries at once, do not checkpoint together."""
    settings = BookieSettings(tmp_path / "bookie", dbStorage_writeCacheMaxSizeMb=1)
    bookie = Bookie(settings)
    await bookie.open()
    limit = 1024 * 1024
    low, high = FLUSH_AT
    points = []
    try:
        loop = asyncio.get_running_loop()
        payload = b"\x05" * 4000
        entry_id = 0
        size = len(entry(3, 0, payload))
        for _ in range(8):
            point = bookie.checkpoint_at
            assert low * limit <= point <= high * limit
            points.append(point)
            checkpoints = bookie.checkpoints
            active = 0  # bytes in the active half: every checkpoint so far took all of it
            while active < point:
                done: asyncio.Future[int] = loop.create_future()
                bookie.add(AddRequest(3, entry_id, MASTER_KEY, entry(3, entry_id, payload)),
                           done.set_result)
                assert await done == ResultCode.EOK
                entry_id += 1
                active += size
            # The add that reached the point started a checkpoint, which took the half as it
            # was then: up to that entry, and no further (nothing is added until it is done).
            await wait_until_async(lambda taken=checkpoints: bookie.checkpoints != taken)
            assert bookie.index is not None
            assert bookie.index.last_entry(3) == entry_id - 1
            assert bookie.write_cache_size == 0
        assert len(set(points)) > 1
        for entry_id_read in (0, entry_id - 1):
            assert bookie.read(3, entry_id_read)[0] == ResultCode.EOK
    finally:
        await bookie.close()
