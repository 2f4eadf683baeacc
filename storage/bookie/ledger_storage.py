"""The bookie's ledger storage (BookKeeper's `LedgerStorage`, as `DbLedgerStorage`): ledger
states (master key, fenced), the write cache, the checkpoint, the entry log and the index.

It takes plain values (ids, bytes, a journal mark) and knows nothing of the wire protocol or
the journal: `storage.bookie.bookie.Bookie` admits adds, journals them and calls it.

Checkpoint (DbLedgerStorage's flush, `SyncThread`), commit point = `Index.commit_encoded`:
1. swap the write cache (writes go on into a new one) under the caller's journal mark, taken
   when everything the journal synced before it was already in the cache;
2. append the swapped entries, sorted by (ledger, entry), plus master-key/fence records of the
   ledgers that changed, to the entry log and fdatasync it;
3. commit their locations, the ledger states and the mark in one index transaction;
4. free the swapped cache in the flush thread (the caller then deletes journals before the mark).
A crash anywhere before 3 replays the journal from the old mark; after 3, from the new one.
Steps 2-4 run in the flush thread, which holds the GIL between its system calls while the
event loop waits for it: its per-entry work is a few C calls, and large objects are freed a
piece at a time (`release`), never in one call that would stall the loop.
"""

from __future__ import annotations

import asyncio
import logging
import random
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from storage.bookie.addpath import WriteCache
from storage.bookie.entrylog import DEFAULT_LOG_SIZE_LIMIT, EntryLogger, Location, log_ids
from storage.bookie.format import check_entry, fence_record, master_key_record
from storage.bookie.index import Index, LedgerState
from storage.bookie.journal import LogMark
from storage.runtime import hand_over_gil

log = logging.getLogger(__name__)

T = TypeVar("T")

FLUSH_AT = (0.25, 0.5)
"""The active half of the write cache starts a checkpoint at a random point in this range of
`dbStorage_writeCacheMaxSizeMb` (drawn anew after each checkpoint), rather than always at
one half: a ledger writes the same entries to its Qw bookies at once, so a fixed point made
their checkpoints coincide, and on a shared disk and CPU the writers' p99 rose with them
(measured, E=3/Qw=3/Qa=2 on three bookies: 8.7-9.5 ms fixed, 5.8-6.3 ms drawn)."""

RELEASE_PIECE = 512  # items freed between two hand_over_gil()
# (WriteCache, one half of the write cache, is compiled with the add path: storage.bookie.addpath)


def release(items: list[Any]) -> None:
    """Empty a large list a piece at a time (one `clear()` of a checkpoint's 30,000 keys is one
    C call holding the GIL for milliseconds)."""
    while items:
        del items[-RELEASE_PIECE:]
        hand_over_gil()


class LedgerStorage:
    """Ledger states and entries of one bookie, from the write cache to the entry log and
    index. `open` before use; every method runs on the event loop's thread."""

    def __init__(self, ledger_dir: Path, index_dir: Path, write_cache_bytes: int,
                 log_size_limit: int = DEFAULT_LOG_SIZE_LIMIT) -> None:
        self.ledger_dir = ledger_dir
        self.index_dir = index_dir
        self.log_size_limit = log_size_limit
        self.cache_limit = write_cache_bytes
        self._jitter = random.Random()
        self.checkpoints = 0  # checkpoints completed
        self._flush_at = self._next_flush_at()
        self._ledgers: dict[int, LedgerState] = {}
        self._dirty: dict[int, LedgerState] = {}
        self.writable: dict[int, bytes] = {}  # master keys of the unfenced ledgers
        self._active = WriteCache()
        self._flushing: WriteCache | None = None
        self._flushed = asyncio.Event()
        self._lock = asyncio.Lock()
        self._scans: set[asyncio.Future[list[int]]] = set()  # index scans in threads
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="flush")
        self.logger: EntryLogger | None = None
        self.index: Index | None = None

    def open(self) -> None:
        """Open the index (rebuilt from the entry logs if it is gone) and the entry logs."""
        self.logger = EntryLogger(self.ledger_dir, self.log_size_limit)
        self.index = Index(self.index_dir)
        if not self.index.existed and log_ids(self.ledger_dir):
            count = self.index.rebuild(self.logger)
            log.warning("index rebuilt from the entry logs: %d entries", count)
        self._ledgers = self.index.ledgers()
        self.writable = {lid: s.master_key for lid, s in self._ledgers.items() if not s.fenced}

    def mark(self) -> LogMark:
        """The journal mark of the last checkpoint: replay starts there."""
        assert self.index is not None
        return self.index.mark()

    async def close(self) -> None:
        self._executor.shutdown(wait=True)
        if self._scans:  # never close the index under a scan
            await asyncio.gather(*self._scans, return_exceptions=True)
        if self.logger is not None:
            self.logger.close()
        if self.index is not None:
            self.index.close()

    # -- ledger states --------------------------------------------------------------------------

    def state(self, ledger_id: int) -> LedgerState | None:
        return self._ledgers.get(ledger_id)

    def set_state(self, ledger_id: int, state: LedgerState) -> None:
        """A ledger's master key and fence, made durable by the next checkpoint."""
        self._ledgers[ledger_id] = state
        self._dirty[ledger_id] = state
        if state.fenced:
            self.writable.pop(ledger_id, None)
        else:
            self.writable[ledger_id] = state.master_key

    def ledger_ids(self) -> set[int]:
        return set(self._ledgers)

    @property
    def ledger_count(self) -> int:
        return len(self._ledgers)

    # -- entries --------------------------------------------------------------------------------

    def put(self, ledger_id: int, entry_id: int, entry: bytes) -> bool:
        """Cache an entry; True when the cache has reached the point of the next checkpoint."""
        active = self._active
        active.put(ledger_id, entry_id, entry)
        return active.size >= self._flush_at

    @property
    def full(self) -> bool:
        """The active half is at the cache's limit while a checkpoint runs: adds must wait."""
        return self._active.size >= self.cache_limit and self._flushing is not None

    @property
    def active(self) -> WriteCache:
        """The half of the write cache that takes adds now (a checkpoint swaps it)."""
        return self._active

    @property
    def wait_at(self) -> int:
        """Bytes of the active half at which adds must wait (`full`): the limit while a
        checkpoint runs, else never."""
        return self.cache_limit if self._flushing is not None else sys.maxsize

    @property
    def checkpoint_due(self) -> bool:
        return self._active.size >= self._flush_at

    async def wait_flushed(self) -> None:
        """Until the running checkpoint ends."""
        self._flushed.clear()
        await self._flushed.wait()

    def get(self, ledger_id: int, entry_id: int) -> bytes | None:
        """The packaged entry, or None; CorruptEntry when its digest does not match."""
        assert self.index is not None and self.logger is not None
        entry = self._active.get(ledger_id, entry_id)
        if entry is None and self._flushing is not None:
            entry = self._flushing.get(ledger_id, entry_id)
        if entry is not None:
            check_entry(entry, ledger_id, entry_id)
            return entry
        location: Location | None = self.index.get(ledger_id, entry_id)
        if location is None:
            return None
        return self.logger.read(location, ledger_id, entry_id)

    def last_entry(self, ledger_id: int) -> int | None:
        assert self.index is not None
        candidates = [self._active.last_entry(ledger_id), self.index.last_entry(ledger_id)]
        if self._flushing is not None:
            candidates.append(self._flushing.last_entry(ledger_id))
        best = max(c for c in candidates if c is not None)
        return best if best >= 0 else None

    async def entry_ids(self, ledger_id: int) -> list[int]:
        """The ids of the ledger's entries held, ascending. What the write cache holds is taken
        here, the index is scanned in a thread (a large ledger's scan never stalls adds); an
        entry being checkpointed meanwhile is in the cache snapshot or the index, or both."""
        assert self.index is not None
        cached: set[int] = set()
        for cache in (self._active, self._flushing):
            # each half's ids of the ledger, in one C call: the flushing half may be emptied
            # by the flush thread meanwhile (its entries are in the index by then)
            if cache is not None:
                cached.update(cache.entry_ids(ledger_id))
        scan = asyncio.get_running_loop().run_in_executor(None, self.index.entry_ids, ledger_id)
        self._scans.add(scan)
        try:
            stored = await scan
        finally:
            self._scans.discard(scan)
        if not cached:
            return stored
        return sorted(cached.union(stored))

    @property
    def write_cache_size(self) -> int:
        """Bytes in the write cache (both halves while a checkpoint runs)."""
        flushing = self._flushing
        return self._active.size + (flushing.size if flushing is not None else 0)

    # -- checkpoint -----------------------------------------------------------------------------

    @property
    def checkpoint_at(self) -> int:
        """Bytes in the active half of the write cache at which the next checkpoint starts."""
        return self._flush_at

    def _next_flush_at(self) -> int:
        """Where the active half of the write cache starts the next checkpoint: a point drawn
        anew each time between FLUSH_AT of the cache's limit (see FLUSH_AT)."""
        low, high = FLUSH_AT
        return int(self.cache_limit * self._jitter.uniform(low, high))

    async def checkpoint(self, mark: Callable[[], LogMark]) -> LogMark:
        """Write the cache to the entry log and index; returns the journal mark committed with
        it (`mark()`, taken at the swap), before which the journal is no longer needed."""
        async with self._lock:
            assert self.index is not None and self.logger is not None
            synced = mark()
            flushing, self._active = self._active, WriteCache()
            self._flush_at = self._next_flush_at()
            dirty, self._dirty = self._dirty, {}
            self._flushing = flushing
            try:
                # Everything else (sorting, records, the entry-log fdatasync, the index
                # transaction) happens in the flush thread: adds go on meanwhile.
                await asyncio.get_running_loop().run_in_executor(
                    self._executor, self._flush, flushing, dirty, synced
                )
            except BaseException:
                # Keep everything readable and retry on the next checkpoint.
                flushing.restore_into(self._active)
                self._dirty = {**dirty, **self._dirty}
                raise
            finally:
                self._flushing = None
                self._flushed.set()
            self.checkpoints += 1
            return synced

    def _flush(self, flushing: WriteCache, dirty: dict[int, LedgerState], mark: LogMark) -> None:
        """In the flush thread: the swapped cache (no longer written to) into the entry log,
        sorted by (ledger, entry), then its locations, the ledger states and the mark into
        the index in one transaction. This thread holds the GIL between its system calls, and
        the event loop waits for it there, so the per-entry work is compiled and mostly runs
        without the GIL (`WriteCache.sort`, `WriteCache.frame_sorted` in `append_cache`) or
        is one C call (`commit_encoded`)."""
        assert self.index is not None and self.logger is not None
        bodies: list[bytes] = []
        for ledger_id, state in dirty.items():
            bodies.append(master_key_record(ledger_id, state.master_key))
            if state.fenced:
                bodies.append(fence_record(ledger_id))
        keys, locations = self.logger.append_cache(flushing, bodies)
        self.index.commit_encoded(zip(keys, locations, strict=False), dirty, mark)
        # Freed here a piece at a time (see `release`). From now on a read that misses in the
        # emptied half finds the entry in the index.
        release(keys)
        release(locations)
        flushing.release()

    # -- garbage collection (storage.bookie.gc, storage.bookie.compaction) ---------------------

    async def run_exclusive(self, fn: Callable[..., T], *args: Any) -> T:
        """Run blocking `fn(*args)` in the flush thread between checkpoints, so compaction's
        entry-log appends and index transactions never interleave with a checkpoint's."""
        async with self._lock:
            return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    async def delete_ledgers(self, ledger_ids: set[int]) -> int:
        """Forget ledgers: their index states and locations in one durable transaction, then
        their state and cached entries here; returns the entries removed from the index.
        Their bytes stay in the entry logs until compaction."""
        assert self.index is not None
        async with self._lock:
            loop = asyncio.get_running_loop()
            removed = await loop.run_in_executor(
                self._executor, self.index.delete_ledgers, sorted(ledger_ids)
            )
            for ledger_id in ledger_ids:
                self._ledgers.pop(ledger_id, None)
                self._dirty.pop(ledger_id, None)
                self.writable.pop(ledger_id, None)
            self._active.drop(ledger_ids)
        return removed
