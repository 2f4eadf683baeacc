"""Durability of real bookie processes: replay, torn tails, corruption, kill -9 mid-load."""

from __future__ import annotations

import asyncio
import random
import shutil
import signal
from pathlib import Path

import pytest

from storage.bookie.errors import BookieError, IOFailure, NoEntry, NoLedger
from storage.bookie.format import decode_record
from storage.bookie_client import BookieClient
from tests.storage.bookie.conftest import BookieFactory
from tests.storage.bookie.support import MASTER_KEY, BookieProcess, entry
from tests.support import wait_until_async

# Nothing reaches the entry log unless a checkpoint runs: the journal alone must carry it.
JOURNAL_ONLY = {"flushInterval": "3600000"}


async def add_all(bookie: BookieProcess, ledger_id: int, count: int) -> list[bytes]:
    entries = [entry(ledger_id, i) for i in range(count)]
    async with await BookieClient.connect(bookie.bookie_id) as client:
        await asyncio.gather(
            *(client.add(ledger_id, i, MASTER_KEY, e) for i, e in enumerate(entries))
        )
    return entries


async def read_all(bookie: BookieProcess, ledger_id: int, count: int) -> list[bytes]:
    async with await BookieClient.connect(bookie.bookie_id) as client:
        return list(await asyncio.gather(*(client.read(ledger_id, i) for i in range(count))))


def journal_files(data_dir: Path) -> list[Path]:
    return sorted((data_dir / "journal" / "current").glob("*.txn"), key=lambda p: int(p.stem, 16))


def valid_end(path: Path) -> int:
    data = path.read_bytes()
    offset = 0
    while (found := decode_record(data, offset)) is not None:
        offset = found[1]
    return offset


async def test_journal_replay_after_kill(start_bookie: BookieFactory) -> None:
    bookie = start_bookie(conf=JOURNAL_ONLY)
    entries = await add_all(bookie, 3, 50)
    assert not list((bookie.data_dir / "ledgers" / "current").glob("*.log"))
    bookie.kill()
    bookie.start()
    assert await read_all(bookie, 3, 50) == entries
    async with await BookieClient.connect(bookie.bookie_id) as client:
        assert await client.read(3, -1) == entries[-1]  # the last entry, after replay
        with pytest.raises(NoEntry):
            await client.read(3, 50)
        with pytest.raises(NoLedger):
            await client.read(4, 0)
    # The replay was checkpointed into the entry log, and old journals went with it.
    assert list((bookie.data_dir / "ledgers" / "current").glob("*.log"))


async def test_torn_journal_tail_is_ignored(start_bookie: BookieFactory) -> None:
    bookie = start_bookie(conf=JOURNAL_ONLY)
    entries = await add_all(bookie, 5, 20)
    bookie.kill()
    last = journal_files(bookie.data_dir)[-1]
    end = valid_end(last)
    assert end > 0
    with open(last, "r+b") as f:  # half a record: a length and CRC, then too few bytes
        f.seek(end)
        f.write(bytes.fromhex("00000400deadbeef") + b"torn")
    bookie.start()
    assert await read_all(bookie, 5, 20) == entries
    async with await BookieClient.connect(bookie.bookie_id) as client:
        await client.add(5, 20, MASTER_KEY, entry(5, 20))  # and it takes writes again
        assert await client.read(5, 20) == entry(5, 20)
    assert "tail ignored" in bookie.log_path.read_text()


async def test_flipped_byte_in_entry_log_is_reported(start_bookie: BookieFactory) -> None:
    bookie = start_bookie()
    payload = b"P" * 200
    async with await BookieClient.connect(bookie.bookie_id) as client:
        for i in range(3):
            await client.add(9, i, MASTER_KEY, entry(9, i, payload))
    bookie.stop()  # a clean stop checkpoints everything into the entry log
    (log_file,) = (bookie.data_dir / "ledgers" / "current").glob("*.log")
    data = bytearray(log_file.read_bytes())
    target = entry(9, 1, payload)
    position = data.index(target) + 100  # inside entry 1's payload
    data[position] ^= 0x20
    log_file.write_bytes(bytes(data))
    bookie.start()
    async with await BookieClient.connect(bookie.bookie_id) as client:
        with pytest.raises(IOFailure):
            await client.read(9, 1)
        assert await client.read(9, 0) == entry(9, 0, payload)
        assert await client.read(9, 2) == entry(9, 2, payload)


async def test_index_is_rebuilt_from_entry_logs(start_bookie: BookieFactory) -> None:
    bookie = start_bookie()
    entries = await add_all(bookie, 11, 30)
    async with await BookieClient.connect(bookie.bookie_id) as client:
        await client.fence(11, MASTER_KEY)
    bookie.stop()
    shutil.rmtree(bookie.data_dir / "ledgers" / "index")
    bookie.start()
    assert await read_all(bookie, 11, 30) == entries
    async with await BookieClient.connect(bookie.bookie_id) as client:
        with pytest.raises(BookieError):  # the fence came back from the entry log too
            await client.add(11, 30, MASTER_KEY, entry(11, 30))
    assert "index rebuilt" in bookie.log_path.read_text()


async def test_old_journals_removed_after_checkpoint(start_bookie: BookieFactory) -> None:
    conf = {
        "journalMaxSizeMB": "1", "journalPreAllocSizeMB": "1", "journalMaxBackups": "0",
        "flushInterval": "300",
    }  # fmt: skip
    bookie = start_bookie(conf=conf)
    big = b"x" * 60_000
    async with await BookieClient.connect(bookie.bookie_id) as client:
        for i in range(60):  # ~3.6 MB: at least three journal files
            await client.add(12, i, MASTER_KEY, entry(12, i, big))
    await wait_until_async(lambda: len(journal_files(bookie.data_dir)) == 1)
    bookie.kill()
    bookie.start()
    assert (await read_all(bookie, 12, 60))[59] == entry(12, 59, big)


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_kill_during_add_loop_keeps_every_acked_entry(
    start_bookie: BookieFactory, seed: int
) -> None:
    """kill -9 at a seeded moment of a pipelined add loop (checkpoints running meanwhile):
    every acknowledged entry reads back byte for byte after the restart."""
    rng = random.Random(seed)
    conf = {"flushInterval": "150", "dbStorage_writeCacheMaxSizeMb": "1"}
    if seed == 3:  # groups closed by journalMaxGroupWaitMSec instead of an empty queue
        conf |= {"journalFlushWhenQueueEmpty": "false", "journalMaxGroupWaitMSec": "2"}
    bookie = start_bookie(conf=conf)
    acked: dict[tuple[int, int], bytes] = {}
    kill_after = rng.uniform(0.3, 1.2)

    async def writer(client: BookieClient, ledger_id: int) -> None:
        for entry_id in range(100_000):
            data = entry(ledger_id, entry_id, rng.randbytes(rng.randint(1, 3000)))
            await client.add(ledger_id, entry_id, MASTER_KEY, data)
            acked[(ledger_id, entry_id)] = data

    client = await BookieClient.connect(bookie.bookie_id)
    tasks = [asyncio.ensure_future(writer(client, 100 + i)) for i in range(8)]
    await asyncio.sleep(kill_after)
    assert bookie.process is not None
    bookie.process.send_signal(signal.SIGKILL)
    results = await asyncio.gather(*tasks, return_exceptions=True)
    assert all(isinstance(r, BookieError) for r in results)  # the connection died under them
    await client.close()
    bookie.process.wait()
    assert len(acked) > 20
    bookie.start()
    async with await BookieClient.connect(bookie.bookie_id) as client:
        for (ledger_id, entry_id), data in sorted(acked.items()):
            assert await client.read(ledger_id, entry_id) == data


@pytest.mark.parametrize("seed", [4, 5])
async def test_kill_while_journal_zeros_ahead_keeps_every_acked_entry(
    start_bookie: BookieFactory, seed: int
) -> None:
    """kill -9 while the journal's filler writes zeros ahead of its writer, over small
    preallocation steps and files rolled every 2 MiB, nothing checkpointed: the replay of
    records followed by zero-filled space gives every acknowledged entry back."""
    rng = random.Random(seed)
    conf = JOURNAL_ONLY | {"journalPreAllocSizeMB": "1", "journalMaxSizeMB": "2"}
    bookie = start_bookie(conf=conf)
    acked: dict[tuple[int, int], bytes] = {}
    kill_at = rng.randint(3 << 20, 5 << 20)  # bytes acknowledged: past at least one roll
    written = 0

    async def writer(client: BookieClient, ledger_id: int) -> None:
        nonlocal written
        for entry_id in range(100_000):
            data = entry(ledger_id, entry_id, rng.randbytes(rng.randint(1, 20_000)))
            await client.add(ledger_id, entry_id, MASTER_KEY, data)
            acked[(ledger_id, entry_id)] = data
            written += len(data)

    client = await BookieClient.connect(bookie.bookie_id)
    tasks = [asyncio.ensure_future(writer(client, 200 + i)) for i in range(8)]
    await wait_until_async(lambda: written >= kill_at, timeout=60)
    assert bookie.process is not None
    bookie.process.send_signal(signal.SIGKILL)
    results = await asyncio.gather(*tasks, return_exceptions=True)
    assert all(isinstance(r, BookieError) for r in results)
    await client.close()
    bookie.process.wait()
    assert len(journal_files(bookie.data_dir)) >= 2
    bookie.start()
    async with await BookieClient.connect(bookie.bookie_id) as client:
        for (ledger_id, entry_id), data in sorted(acked.items()):
            assert await client.read(ledger_id, entry_id) == data
