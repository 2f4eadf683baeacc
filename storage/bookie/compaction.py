"""Entry-log usage and compaction (BookKeeper's `EntryLogCompactor` for DbLedgerStorage).

Usage of a complete entry log = live bytes / file size, live bytes being what the index points
at in that log now (`Index.log_usage`, by ledger: BookKeeper's `EntryLogMetadata`). An entry
written again elsewhere, or of a ledger garbage-collected, is dead.

Compacting a log, in this order (the commit point of each batch is the index transaction):
1. scan the log in the GC thread (mmap, record by record, CRC checked) and keep the entries the
   index still points at there;
2. append a batch of them to the current entry log and fdatasync it (`EntryLogger.append_batch`
   in the bookie's flush thread, between checkpoints: `Bookie.run_exclusive`);
3. point the index at the copies in one durable transaction, each entry only if the index
   still points at the old copy (`Index.relocate`);
4. once every batch is committed, delete the old log (`EntryLogger.remove`, on the event loop
   where reads run).
A crash before 3 leaves the index on the old copies (the new ones are dead bytes, compacted
later); between 3 and 4 the old log holds nothing live and the next run deletes it. Copies go
at `compactionRateByEntries` entries/s, or `compactionRateByBytes` bytes/s with
`isThrottleByBytes` (upstream's `AbstractLogCompactor.Throttler`).

Before a run deletes any log, `refresh_ledger_states` re-appends the master-key and fence
records of every ledger the index knows to the current log, so an index rebuilt from the logs
(`Index.rebuild`) still finds them after the logs that first held them are gone.
"""

from __future__ import annotations

import asyncio
import logging
import mmap
import time
from collections.abc import Callable, Generator, Iterator
from concurrent.futures import Executor
from dataclasses import dataclass

from storage.bookie.bookie import Bookie
from storage.bookie.entrylog import HAND_OVER_EVERY, Location
from storage.bookie.format import (
    RECORD_HEADER_LEN,
    decode_record,
    entry_ids,
    fence_record,
    master_key_record,
)
from storage.runtime import hand_over_gil

log = logging.getLogger(__name__)

Move = tuple[int, int, Location, bytes]
"""(ledger id, entry id, where the entry is now, the entry)."""

BATCH_BYTES = 1024 * 1024
"""Bytes copied per batch: one append + fdatasync + index transaction between checkpoints."""


@dataclass(frozen=True)
class LogUsage:
    log_id: int
    live_bytes: int
    total_bytes: int

    @property
    def usage(self) -> float:
        return self.live_bytes / self.total_bytes if self.total_bytes else 0.0


class Throttle:
    """At most `rate` units a second on average (rate <= 0: unlimited)."""

    def __init__(self, rate: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = rate
        self.clock = clock
        self._free_at = clock()

    def delay(self, amount: int) -> float:
        """Seconds to wait before using `amount` units, and book them."""
        if self.rate <= 0:
            return 0.0
        now = self.clock()
        start = max(self._free_at, now)
        self._free_at = start + amount / self.rate
        return start - now

    async def acquire(self, amount: int) -> None:
        wait = self.delay(amount)
        if wait > 0:
            await asyncio.sleep(wait)


def live_entries(
    bookie: Bookie, log_id: int, batch_bytes: int = BATCH_BYTES
) -> Generator[list[Move], None, None]:
    """Batches of the entries of complete log `log_id` that the index still points at.
    Blocking (reads the log): step it in the GC thread."""
    assert bookie.index is not None and bookie.logger is not None
    index = bookie.index
    with open(bookie.logger.path(log_id), "rb") as f:
        if f.seek(0, 2) == 0:
            return
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            offset = 0
            pending: list[Move] = []
            size = 0
            count = 0
            while True:
                found = decode_record(data, offset)
                if found is None:
                    break
                count += 1
                if not count % HAND_OVER_EVERY:
                    hand_over_gil()
                body, end = found
                ledger_id, entry_id = entry_ids(body)
                if entry_id >= 0:
                    where = Location(log_id, offset + RECORD_HEADER_LEN, len(body))
                    pending.append((ledger_id, entry_id, where, bytes(body)))
                    size += len(body)
                body.release()
                offset = end
                if size >= batch_bytes:
                    yield _still_live(index.locations_of([(m[0], m[1]) for m in pending]), pending)
                    pending, size = [], 0
            if pending:
                yield _still_live(index.locations_of([(m[0], m[1]) for m in pending]), pending)


def _still_live(current: list[Location | None], moves: list[Move]) -> list[Move]:
    return [move for move, now in zip(moves, current, strict=True) if now == move[2]]


def _copy(bookie: Bookie, moves: list[Move]) -> int:
    """In the flush thread: append the entries, fdatasync, then move the index to them."""
    assert bookie.index is not None and bookie.logger is not None
    locations = bookie.logger.append_batch([body for _, _, _, body in moves])
    return bookie.index.relocate(
        (lid, eid, old, new) for (lid, eid, old, _), new in zip(moves, locations, strict=True)
    )


def _write_states(bookie: Bookie) -> int:
    assert bookie.index is not None and bookie.logger is not None
    bodies = []
    for ledger_id, state in sorted(bookie.index.ledgers().items()):
        bodies.append(master_key_record(ledger_id, state.master_key))
        if state.fenced:
            bodies.append(fence_record(ledger_id))
    bookie.logger.append_batch(bodies)
    return len(bodies)


async def refresh_ledger_states(bookie: Bookie) -> None:
    await bookie.run_exclusive(_write_states, bookie)


@dataclass
class CompactionResult:
    log_id: int
    entries: int = 0
    bytes: int = 0
    done: bool = False


class Compactor:
    def __init__(
        self,
        bookie: Bookie,
        gc_thread: Executor,
        throttle: Throttle,
        by_bytes: bool,
        batch_bytes: int = BATCH_BYTES,
    ) -> None:
        self.bookie = bookie
        self.gc_thread = gc_thread
        self.throttle = throttle
        self.by_bytes = by_bytes
        self.batch_bytes = batch_bytes
        self.compacting: int | None = None

    async def compact(self, log_id: int, deadline: float | None = None) -> CompactionResult:
        """Copy the live entries of `log_id` away and delete it; stops early (the log kept,
        `done` False) when `deadline` (monotonic) passes. Call `refresh_ledger_states` first."""
        loop = asyncio.get_running_loop()
        result = CompactionResult(log_id)
        batches = live_entries(self.bookie, log_id, self.batch_bytes)
        self.compacting = log_id
        log.info("compacting entry log %x", log_id)
        try:
            while True:
                moves = await loop.run_in_executor(self.gc_thread, next, batches, None)
                if moves is None:
                    break
                for chunk in self._chunks(moves):
                    if deadline is not None and time.monotonic() > deadline:
                        log.info("compaction of entry log %x stopped at its time limit", log_id)
                        return result
                    amount = sum(len(m[3]) for m in chunk) if self.by_bytes else len(chunk)
                    await self.throttle.acquire(amount)
                    result.entries += await self.bookie.run_exclusive(_copy, self.bookie, chunk)
                    result.bytes += sum(len(m[3]) for m in chunk)
        finally:
            await loop.run_in_executor(self.gc_thread, batches.close)
            self.compacting = None
        self.remove(log_id)
        result.done = True
        log.info("compacted entry log %x: %d entries (%d bytes) copied, log deleted",
                 log_id, result.entries, result.bytes)
        return result

    def _chunks(self, moves: list[Move]) -> Iterator[list[Move]]:
        """Throttle-sized pieces: about a tenth of a second of the rate each."""
        rate = self.throttle.rate
        if rate <= 0:
            yield moves
            return
        step = max(1, int(rate / 10))
        if not self.by_bytes:
            for start in range(0, len(moves), step):
                yield moves[start : start + step]
            return
        chunk: list[Move] = []
        size = 0
        for move in moves:
            chunk.append(move)
            size += len(move[3])
            if size >= step:
                yield chunk
                chunk, size = [], 0
        if chunk:
            yield chunk

    def remove(self, log_id: int) -> None:
        """Delete a log with nothing live left (on the event loop, where reads run)."""
        assert self.bookie.logger is not None
        self.bookie.logger.remove(log_id)
