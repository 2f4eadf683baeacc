"""The bookie facade: ledger state, fencing, the write cache and the checkpoint.

Write path (BookKeeper's `BookieImpl.addEntry` with DbLedgerStorage): check read-only, master
key and fence; put the entry in the write cache; append it to the journal; `reply(EOK)` runs
from the journal's callback, after the fdatasync of the entry's group. `add_unacked` is the
same without the callback, for the server's batch of adds answered by one `when_durable`.

Checkpoint (DbLedgerStorage's flush, `SyncThread`), commit point = `Index.commit_encoded`:
1. snapshot the journal's synced mark and swap the write cache (writes go on into a new one);
2. append the swapped entries, sorted by (ledger, entry), plus master-key/fence records of the
   ledgers that changed, to the entry log and fdatasync it;
3. commit their locations, the ledger states and the mark in one index transaction;
4. delete journals before the mark, and free the swapped cache in the flush thread.
A crash anywhere before 3 replays the journal from the old mark; after 3, from the new one.
Steps 2-4 run in the flush thread, which holds the GIL between its system calls while the
event loop waits for it: its per-entry work is a few C calls, and large objects are freed a
piece at a time (`release`), never in one call that would stall the loop.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from storage.bookie.entrylog import DEFAULT_LOG_SIZE_LIMIT, EntryLogger, Location, log_ids
from storage.bookie.errors import CorruptEntry
from storage.bookie.format import (
    METAENTRY_ID_FENCE_KEY,
    METAENTRY_ID_LEDGER_KEY,
    check_entry,
    entry_ids,
    fence_record,
    master_key_record,
    parse_master_key_record,
)
from storage.bookie.index import Index, LedgerState
from storage.bookie.journal import Journal, JournalSettings, LogMark, replay
from storage.bookie.protocol import (
    FLAG_HIGH_PRIORITY,
    FLAG_RECOVERY_ADD,
    LAST_ADD_CONFIRMED,
    AddRequest,
    ResultCode,
)
from storage.runtime import hand_over_gil

log = logging.getLogger(__name__)

Key = tuple[int, int]
T = TypeVar("T")


@dataclass(frozen=True)
class BookieSettings:
    data_dir: Path
    journal: JournalSettings = field(default_factory=JournalSettings)
    dbStorage_writeCacheMaxSizeMb: int = 64
    dbStorage_maxThrottleTimeMs: int = 10_000
    flushInterval: int = 60_000
    logSizeLimit: int = DEFAULT_LOG_SIZE_LIMIT

    @property
    def journal_dir(self) -> Path:
        return self.data_dir / "journal" / "current"

    @property
    def ledger_dir(self) -> Path:
        return self.data_dir / "ledgers" / "current"

    @property
    def index_dir(self) -> Path:
        return self.data_dir / "ledgers" / "index"


Reply = Callable[[int], None]
"""Called once with the request's result code (a ResultCode value)."""

FLUSH_AT = (0.25, 0.5)
"""The active half of the write cache starts a checkpoint at a random point in this range of
`dbStorage_writeCacheMaxSizeMb` (drawn anew after each checkpoint), rather than always at
one half: a ledger writes the same entries to its Qw bookies at once, so a fixed point made
their checkpoints coincide, and on a shared disk and CPU the writers' p99 rose with them
(measured, E=3/Qw=3/Qa=2 on three bookies: 8.7-9.5 ms fixed, 5.8-6.3 ms drawn)."""

DEFERRED = -1
"""`Bookie.add_unacked`'s answer when the add must wait for the checkpoint (not a wire code)."""
_EOK = 0  # ResultCode.EOK as a plain int for the per-add comparisons


RELEASE_PIECE = 512  # items freed, or cache entries listed, between two hand_over_gil()


def release(items: list[Any]) -> None:
    """Empty a large list a piece at a time (see `_Cache.release`)."""
    while items:
        del items[-RELEASE_PIECE:]
        hand_over_gil()


class _Cache:
    """One half of the write cache: entries by (ledger, entry), the last entry per ledger, and
    each ledger's entry ids in arrival order (for the checkpoint's sort, see `sorted_ids`)."""

    __slots__ = ("entries", "ids", "last", "size")

    def __init__(self) -> None:
        self.entries: dict[Key, bytes] = {}
        self.ids: dict[int, list[int]] = {}
        self.last: dict[int, int] = {}
        self.size = 0

    def drop(self, ledger_ids: set[int]) -> None:
        for key in [key for key in self.entries if key[0] in ledger_ids]:
            self.size -= len(self.entries.pop(key))
        for ledger_id in ledger_ids:
            self.last.pop(ledger_id, None)
            self.ids.pop(ledger_id, None)

    def put(self, ledger_id: int, entry_id: int, entry: bytes) -> None:
        old = self.entries.get((ledger_id, entry_id))
        self.entries[(ledger_id, entry_id)] = entry
        if old is None:
            ids = self.ids.get(ledger_id)
            if ids is None:
                self.ids[ledger_id] = [entry_id]
            else:
                ids.append(entry_id)
        self.size += len(entry) - (len(old) if old is not None else 0)
        if entry_id > self.last.get(ledger_id, -1):
            self.last[ledger_id] = entry_id

    def release(self) -> None:
        """Empty this half, one entry at a time, handing the GIL over every RELEASE_PIECE
        (one `clear()` of 32 MiB of 1 KiB entries is one C call holding it ~4 ms)."""
        for table in (self.entries, self.ids):
            pop = table.popitem
            for count in range(1, len(table) + 1):
                pop()
                if not count % RELEASE_PIECE:
                    hand_over_gil()
        self.last.clear()
        self.size = 0

    def sorted_ids(self) -> list[tuple[int, list[int]]]:
        """(ledger, its entry ids ascending), by ledger. One ledger at a time: each ledger's
        ids arrive almost in order, so each sort is short and linear, whereas one `sorted()`
        of all the (ledger, entry) keys is a single C call that held the GIL, and so stalled
        the event loop, for 10-20 ms per 30,000 entries here."""
        ordered = []
        for ledger_id in sorted(self.ids):
            ids = self.ids[ledger_id]
            ids.sort()
            ordered.append((ledger_id, ids))
        return ordered


class Bookie:
    def __init__(self, settings: BookieSettings) -> None:
        self.settings = settings
        self._cache_limit = settings.dbStorage_writeCacheMaxSizeMb * 1024 * 1024
        self._jitter = random.Random()
        self.checkpoints = 0  # checkpoints completed
        self._flush_at = self._next_flush_at()
        self.readonly = False
        self._ledgers: dict[int, LedgerState] = {}
        self._dirty: dict[int, LedgerState] = {}
        self._active = _Cache()
        self._flushing: _Cache | None = None
        self._flushed = asyncio.Event()
        self._checkpoint_lock = asyncio.Lock()
        self._checkpoint_task: asyncio.Task[None] | None = None
        self._periodic: asyncio.Task[None] | None = None
        self._throttled: set[asyncio.Task[None]] = set()
        self._scans: set[asyncio.Future[list[int]]] = set()  # index scans in threads
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="flush")
        self.journal = Journal(settings.journal_dir, settings.journal)
        self.logger: EntryLogger | None = None
        self.index: Index | None = None
        self.replayed = 0


    # -- lifecycle ------------------------------------------------------------------------------

    async def open(self) -> None:
        """Open the index (rebuilding it from the entry logs if it is gone), replay the journal
        from the index's mark, start the journal and checkpoint what was replayed."""
        settings = self.settings
        self.logger = EntryLogger(settings.ledger_dir, settings.logSizeLimit)
        self.index = Index(settings.index_dir)
        if not self.index.existed and log_ids(settings.ledger_dir):
            count = self.index.rebuild(self.logger)
            log.warning("index rebuilt from the entry logs: %d entries", count)
        self._ledgers = self.index.ledgers()
        for body in replay(settings.journal_dir, self.index.mark()):
            self._replay_record(body)
        self.journal.start()
        await self.checkpoint()
        self._periodic = asyncio.get_running_loop().create_task(self._flush_periodically())

    def _replay_record(self, body: bytes) -> None:
        ledger_id, entry_id = entry_ids(body)
        if ledger_id < 0:  # never admitted now; a journal written before that check had them
            log.warning("journal: record of ledger %d ignored (ledger ids are >= 0)", ledger_id)
            return
        if entry_id == METAENTRY_ID_LEDGER_KEY:
            old = self._ledgers.get(ledger_id)
            state = LedgerState(parse_master_key_record(body), old.fenced if old else False)
        elif entry_id == METAENTRY_ID_FENCE_KEY:
            old = self._ledgers.get(ledger_id)
            state = LedgerState(old.master_key if old else b"", True)
        elif entry_id >= 0:
            self._active.put(ledger_id, entry_id, body)
            self.replayed += 1
            return
        else:
            return
        self._ledgers[ledger_id] = state
        self._dirty[ledger_id] = state

    async def close(self) -> None:
        if self._periodic is not None:
            self._periodic.cancel()
        await self.checkpoint()
        await self.journal.close()
        self._executor.shutdown(wait=True)
        if self._scans:  # never close the index under a scan
            await asyncio.gather(*self._scans, return_exceptions=True)
        if self.logger is not None:
            self.logger.close()
        if self.index is not None:
            self.index.close()

    # -- writes ---------------------------------------------------------------------------------

    def add(self, request: AddRequest, reply: Reply) -> None:
        """Answer EOK through `reply` once the entry is durable, or an error code at once."""
        ledger_id, entry_id = request.ledger_id, request.entry_id
        code = self._admit(ledger_id, entry_id, request.master_key, request.entry, request.flags)
        if code != _EOK:
            reply(code)
            return
        if self._active.size >= self._cache_limit and self._flushing is not None:
            task = asyncio.ensure_future(self._add_throttled(request, reply))
            self._throttled.add(task)
            task.add_done_callback(self._throttled.discard)
            return
        self._put(ledger_id, entry_id, request.entry, reply)

    def add_unacked(self, ledger_id: int, entry_id: int, master_key: bytes, entry: bytes) -> int:
        """`add` of a request without flags, without its reply (the server's path for a
        read's worth of adds): EOK once the entry is cached and queued in the journal, where
        it is durable when a callback registered after it (`when_durable`) runs; an error
        code to answer now; or DEFERRED when the write cache is full (then nothing was
        cached: take `add`, which waits for the checkpoint as upstream)."""
        code = self._admit(ledger_id, entry_id, master_key, entry, 0)
        if code != _EOK:
            return code
        active = self._active
        if active.size >= self._cache_limit and self._flushing is not None:
            return DEFERRED
        active.put(ledger_id, entry_id, entry)
        if active.size >= self._flush_at:
            self.trigger_checkpoint()
        self.journal.append(entry)
        return _EOK

    def when_durable(self, done: Callable[[BaseException | None], None]) -> None:
        """`done(None)` once every entry added so far is durable (see `add_unacked`)."""
        self.journal.when_durable(done)

    def _admit(self, ledger_id: int, entry_id: int, master_key: bytes, entry: bytes,
               flags: int) -> int:
        """An add's checks, as `BookieImpl.addEntry`: read-only, ids and digest, master key
        and fence; the first add to a ledger records its master key (journalled first). EOK
        or the error code to answer."""
        if self.readonly and not flags & FLAG_HIGH_PRIORITY:
            return ResultCode.EREADONLY
        if ledger_id < 0 or entry_id < 0:  # the index keys are unsigned, as ledger ids are
            return ResultCode.EBADREQ
        try:
            check_entry(entry, ledger_id, entry_id)
        except CorruptEntry:
            return ResultCode.EBADREQ
        state = self._ledgers.get(ledger_id)
        if state is None:
            self._set_state(ledger_id, LedgerState(master_key))
            self.journal.append(master_key_record(ledger_id, master_key))
        elif state.master_key != master_key:
            return ResultCode.EUA
        elif state.fenced and not flags & FLAG_RECOVERY_ADD:
            return ResultCode.EFENCED
        return _EOK

    def _put(self, ledger_id: int, entry_id: int, entry: bytes, reply: Reply) -> None:
        self._active.put(ledger_id, entry_id, entry)
        if self._active.size >= self._flush_at:
            self.trigger_checkpoint()

        def durable(error: BaseException | None) -> None:
            reply(ResultCode.EOK if error is None else ResultCode.EIO)

        self.journal.append(entry, durable)

    async def _add_throttled(self, request: AddRequest, reply: Reply) -> None:
        """Back-pressure as DbLedgerStorage: wait for the running flush, up to the throttle,
        then fail the add with ETOOMANYREQUESTS."""
        limit = self.settings.dbStorage_maxThrottleTimeMs / 1000
        try:
            async with asyncio.timeout(limit):
                while self._active.size >= self._cache_limit and self._flushing is not None:
                    self._flushed.clear()
                    await self._flushed.wait()
        except TimeoutError:
            reply(ResultCode.ETOOMANYREQUESTS)
            return
        self._put(request.ledger_id, request.entry_id, request.entry, reply)

    def fence(self, ledger_id: int, master_key: bytes, reply: Reply) -> None:
        """Fence a ledger; `reply(EOK)` once the fence record is journalled and synced
        (EBADREQ for a negative ledger id, which no ledger has)."""
        if ledger_id < 0:
            reply(ResultCode.EBADREQ)
            return
        state = self._ledgers.get(ledger_id)
        if state is None:
            self.journal.append(master_key_record(ledger_id, master_key))
        elif state.master_key != master_key:
            reply(ResultCode.EUA)
            return
        self._set_state(ledger_id, LedgerState(master_key, fenced=True))

        def durable(error: BaseException | None) -> None:
            reply(ResultCode.EOK if error is None else ResultCode.EIO)

        self.journal.append(fence_record(ledger_id), durable)

    def _set_state(self, ledger_id: int, state: LedgerState) -> None:
        self._ledgers[ledger_id] = state
        self._dirty[ledger_id] = state

    def is_fenced(self, ledger_id: int) -> bool:
        state = self._ledgers.get(ledger_id)
        return state is not None and state.fenced

    # -- reads ----------------------------------------------------------------------------------

    def read(self, ledger_id: int, entry_id: int) -> tuple[ResultCode, bytes]:
        """(EOK, packaged entry) or (error code, b""); a corrupt entry answers EIO."""
        if ledger_id not in self._ledgers:
            return ResultCode.ENOLEDGER, b""
        assert self.index is not None and self.logger is not None
        if entry_id == LAST_ADD_CONFIRMED:
            found = self.last_entry(ledger_id)
            if found is None:
                return ResultCode.ENOENTRY, b""
            entry_id = found
        elif entry_id < 0:  # below -1 (LAST_ADD_CONFIRMED): no such entry
            return ResultCode.ENOENTRY, b""
        key = (ledger_id, entry_id)
        entry = self._active.entries.get(key)
        if entry is None and self._flushing is not None:
            entry = self._flushing.entries.get(key)
        try:
            if entry is not None:
                check_entry(entry, ledger_id, entry_id)
                return ResultCode.EOK, entry
            location: Location | None = self.index.get(ledger_id, entry_id)
            if location is None:
                return ResultCode.ENOENTRY, b""
            return ResultCode.EOK, self.logger.read(location, ledger_id, entry_id)
        except CorruptEntry as exc:
            log.error("corrupt entry not returned: %s", exc)
            return ResultCode.EIO, b""

    def last_entry(self, ledger_id: int) -> int | None:
        assert self.index is not None
        candidates = [self._active.last.get(ledger_id, -1), self.index.last_entry(ledger_id)]
        if self._flushing is not None:
            candidates.append(self._flushing.last.get(ledger_id, -1))
        best = max(c for c in candidates if c is not None)
        return best if best >= 0 else None

    async def entries_of(self, ledger_id: int) -> list[int] | None:
        """The ids of the ledger's entries this bookie holds, ascending; None when it does not
        know the ledger (upstream's NoLedgerException). What the write cache holds is taken
        here, the index is scanned in a thread (a large ledger's scan never stalls adds); an
        entry being checkpointed meanwhile is in the cache snapshot or the index, or both."""
        if ledger_id not in self._ledgers:
            return None
        assert self.index is not None
        cached: set[int] = set()
        for cache in (self._active, self._flushing):
            # each half's ids of the ledger, in one C call: the flushing half may be emptied
            # by the flush thread meanwhile (its entries are in the index by then)
            if cache is not None:
                cached.update(cache.ids.get(ledger_id, ()))
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
    def ledger_count(self) -> int:
        return len(self._ledgers)

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
        return int(self._cache_limit * self._jitter.uniform(low, high))

    def trigger_checkpoint(self) -> None:
        if self._checkpoint_task is None or self._checkpoint_task.done():
            self._checkpoint_task = asyncio.ensure_future(self.checkpoint())

    async def _flush_periodically(self) -> None:
        while True:
            await asyncio.sleep(self.settings.flushInterval / 1000)
            try:
                await self.checkpoint()
            except Exception:  # the next interval tries again; never stop checkpointing
                log.exception("checkpoint failed; the journal still covers every entry")

    async def checkpoint(self) -> None:
        async with self._checkpoint_lock:
            assert self.index is not None and self.logger is not None
            mark = self.journal.last_mark
            flushing, self._active = self._active, _Cache()
            self._flush_at = self._next_flush_at()
            dirty, self._dirty = self._dirty, {}
            self._flushing = flushing
            try:
                # Everything else (sorting, records, the entry-log fdatasync, the index
                # transaction) happens in the flush thread: adds go on meanwhile.
                await asyncio.get_running_loop().run_in_executor(
                    self._executor, self._flush, flushing, dirty, mark
                )
            except BaseException:
                # Keep everything readable and retry on the next checkpoint.
                for (lid, eid), entry in flushing.entries.items():
                    if (lid, eid) not in self._active.entries:
                        self._active.put(lid, eid, entry)
                self._dirty = {**dirty, **self._dirty}
                raise
            finally:
                self._flushing = None
                self._flushed.set()
            self.checkpoints += 1
            self.journal.remove_before(mark)

    def _flush(self, flushing: _Cache, dirty: dict[int, LedgerState], mark: LogMark) -> None:
        """In the flush thread: the swapped cache (no longer written to) into the entry log,
        sorted by (ledger, entry), then its locations, the ledger states and the mark into
        the index in one transaction. This thread holds the GIL between its system calls, and
        the event loop waits for it there, so the per-entry work is kept to a few C calls
        (no Location objects: `append_encoded`, `commit_encoded`)."""
        assert self.index is not None and self.logger is not None
        entries = flushing.entries
        key = self.index.key
        bodies: list[bytes] = []
        keys: list[bytes] = []
        for ledger_id, ids in flushing.sorted_ids():
            for first in range(0, len(ids), RELEASE_PIECE):
                piece = ids[first : first + RELEASE_PIECE]
                bodies += [entries[ledger_id, entry_id] for entry_id in piece]
                keys += [key(ledger_id, entry_id) for entry_id in piece]
                hand_over_gil()
        for ledger_id, state in dirty.items():
            bodies.append(master_key_record(ledger_id, state.master_key))
            if state.fenced:
                bodies.append(fence_record(ledger_id))
        locations = self.logger.append_encoded(bodies)
        self.index.commit_encoded(zip(keys, locations, strict=False), dirty, mark)
        # Freed here a piece at a time: dropping the half on the event loop in one go (32 MiB
        # of 1 KiB entries) stalled it ~4 ms. From now on a read that misses in the emptied
        # half finds the entry in the index.
        release(keys)
        release(locations)
        flushing.release()

    # -- hooks for garbage collection (storage.bookie.gc, storage.bookie.compaction) -----------

    def ledger_ids(self) -> set[int]:
        """The ledgers this bookie holds a state for (written, fenced or replayed)."""
        return set(self._ledgers)

    async def run_exclusive(self, fn: Callable[..., T], *args: Any) -> T:
        """Run blocking `fn(*args)` in the flush thread between checkpoints, so compaction's
        entry-log appends and index transactions never interleave with a checkpoint's."""
        async with self._checkpoint_lock:
            return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    async def delete_ledgers(self, ledger_ids: set[int]) -> int:
        """Forget ledgers deleted from the metadata store: their index states and locations in
        one durable transaction, then their state and cached entries here; returns the entries
        removed from the index. Their bytes stay in the entry logs until compaction."""
        assert self.index is not None
        async with self._checkpoint_lock:
            loop = asyncio.get_running_loop()
            removed = await loop.run_in_executor(
                self._executor, self.index.delete_ledgers, sorted(ledger_ids)
            )
            for ledger_id in ledger_ids:
                self._ledgers.pop(ledger_id, None)
                self._dirty.pop(ledger_id, None)
            self._active.drop(ledger_ids)
        return removed
