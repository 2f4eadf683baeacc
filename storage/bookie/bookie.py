"""The bookie facade: admission, fencing and the journal, over the ledger storage.

Write path (BookKeeper's `BookieImpl.addEntry` with DbLedgerStorage): check read-only, master
key and fence; put the entry in the write cache (`ledger_storage.LedgerStorage`); append it to
the journal; `reply(EOK)` runs from the journal's callback, after the fdatasync of the entry's
group. `add_unacked` is the same without the callback, for the server's batch of adds answered
by one `when_durable`; `add_run` takes a run of a writer's plain adds straight from a socket
read in compiled code (`storage.bookie.addpath`), with the same checks and effects.

A checkpoint (`LedgerStorage.checkpoint`, under the journal's synced mark) writes the cache to
the entry log and index; the journals before its mark are then deleted.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from storage.bookie.addpath import ReplyRun, take_adds
from storage.bookie.entrylog import DEFAULT_LOG_SIZE_LIMIT, EntryLogger
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
from storage.bookie.journal import Journal, JournalSettings, replay
from storage.bookie.ledger_storage import FLUSH_AT, LedgerStorage
from storage.bookie.protocol import (
    FLAG_HIGH_PRIORITY,
    FLAG_RECOVERY_ADD,
    LAST_ADD_CONFIRMED,
    AddRequest,
    ResultCode,
)

log = logging.getLogger(__name__)

T = TypeVar("T")

__all__ = ["DEFERRED", "FLUSH_AT", "Bookie", "BookieSettings", "Reply"]


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

DEFERRED = -1
"""`Bookie.add_unacked`'s answer when the add must wait for the checkpoint (not a wire code)."""
_EOK = 0  # ResultCode.EOK as a plain int for the per-add comparisons



class Bookie:
    def __init__(self, settings: BookieSettings) -> None:
        self.settings = settings
        self.readonly = False
        self.storage = LedgerStorage(
            settings.ledger_dir, settings.index_dir,
            settings.dbStorage_writeCacheMaxSizeMb * 1024 * 1024, settings.logSizeLimit,
        )
        self._checkpoint_task: asyncio.Task[None] | None = None
        self._periodic: asyncio.Task[None] | None = None
        self._throttled: set[asyncio.Task[None]] = set()
        self.journal = Journal(settings.journal_dir, settings.journal)
        self.replayed = 0

    # -- lifecycle ------------------------------------------------------------------------------

    async def open(self) -> None:
        """Open the ledger storage, replay the journal from its mark, start the journal and
        checkpoint what was replayed."""
        self.storage.open()
        for body in replay(self.settings.journal_dir, self.storage.mark()):
            self._replay_record(body)
        self.journal.start()
        await self.checkpoint()
        self._periodic = asyncio.get_running_loop().create_task(self._flush_periodically())

    def _replay_record(self, body: bytes) -> None:
        ledger_id, entry_id = entry_ids(body)
        if ledger_id < 0:  # never admitted now; a journal written before that check had them
            log.warning("journal: record of ledger %d ignored (ledger ids are >= 0)", ledger_id)
            return
        storage = self.storage
        if entry_id == METAENTRY_ID_LEDGER_KEY:
            old = storage.state(ledger_id)
            state = LedgerState(parse_master_key_record(body), old.fenced if old else False)
        elif entry_id == METAENTRY_ID_FENCE_KEY:
            old = storage.state(ledger_id)
            state = LedgerState(old.master_key if old else b"", True)
        elif entry_id >= 0:
            storage.put(ledger_id, entry_id, body)
            self.replayed += 1
            return
        else:
            return
        storage.set_state(ledger_id, state)

    async def close(self) -> None:
        if self._periodic is not None:
            self._periodic.cancel()
        await self.checkpoint()
        await self.journal.close()
        await self.storage.close()

    # -- writes ---------------------------------------------------------------------------------

    def add(self, request: AddRequest, reply: Reply) -> None:
        """Answer EOK through `reply` once the entry is durable, or an error code at once."""
        ledger_id, entry_id = request.ledger_id, request.entry_id
        code = self._admit(ledger_id, entry_id, request.master_key, request.entry, request.flags)
        if code != _EOK:
            reply(code)
            return
        if self.storage.full:
            task = asyncio.ensure_future(self._add_throttled(ledger_id, entry_id,
                                                             request.entry, reply))
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
        storage = self.storage
        if storage.full:
            return DEFERRED
        if storage.put(ledger_id, entry_id, entry):
            self.trigger_checkpoint()
        self.journal.append(entry)
        return _EOK

    def add_run(self, buf: bytes, start: int, end: int) -> tuple[int, int, int, bytes]:
        """The run of plain adds from `start` among the whole frames of buf[start:end] (length
        prefixes included) that `add_unacked` would take without a decision (a writable ledger
        under its master key, a valid digest, room in the cache), taken by the compiled add
        path (`addpath.take_adds`): cached and journalled as `add_unacked` does, durable when
        a later `when_durable` callback runs. Returns (position of the first frame not
        taken, adds taken, their entries' bytes, their EOK responses in one run)."""
        if self.readonly:
            return start, 0, 0, b""
        storage = self.storage
        pos, count, size, records, responses = take_adds(
            buf, start, end, storage.writable, storage.active, storage.wait_at
        )
        if count:
            self.journal.append_records(records, count)
            if storage.checkpoint_due:
                self.trigger_checkpoint()
        return pos, count, size, responses

    def when_durable(self, done: Callable[[BaseException | None], None],
                     run: ReplyRun | None = None) -> None:
        """`done(None)` once every entry added so far is durable (see `add_unacked`); `run`,
        their responses, sent by the journal's writer as soon as they are (`Journal`)."""
        self.journal.when_durable(done, run)

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
        state = self.storage.state(ledger_id)
        if state is None:
            self.storage.set_state(ledger_id, LedgerState(master_key))
            self.journal.append(master_key_record(ledger_id, master_key))
        elif state.master_key != master_key:
            return ResultCode.EUA
        elif state.fenced and not flags & FLAG_RECOVERY_ADD:
            return ResultCode.EFENCED
        return _EOK

    def _put(self, ledger_id: int, entry_id: int, entry: bytes, reply: Reply) -> None:
        if self.storage.put(ledger_id, entry_id, entry):
            self.trigger_checkpoint()

        def durable(error: BaseException | None) -> None:
            reply(ResultCode.EOK if error is None else ResultCode.EIO)

        self.journal.append(entry, durable)

    async def _add_throttled(self, ledger_id: int, entry_id: int, entry: bytes,
                             reply: Reply) -> None:
        """Back-pressure as DbLedgerStorage: wait for the running flush, up to the throttle,
        then fail the add with ETOOMANYREQUESTS."""
        limit = self.settings.dbStorage_maxThrottleTimeMs / 1000
        try:
            async with asyncio.timeout(limit):
                while self.storage.full:
                    await self.storage.wait_flushed()
        except TimeoutError:
            reply(ResultCode.ETOOMANYREQUESTS)
            return
        self._put(ledger_id, entry_id, entry, reply)

    def fence(self, ledger_id: int, master_key: bytes, reply: Reply) -> None:
        """Fence a ledger; `reply(EOK)` once the fence record is journalled and synced
        (EBADREQ for a negative ledger id, which no ledger has)."""
        if ledger_id < 0:
            reply(ResultCode.EBADREQ)
            return
        state = self.storage.state(ledger_id)
        if state is None:
            self.journal.append(master_key_record(ledger_id, master_key))
        elif state.master_key != master_key:
            reply(ResultCode.EUA)
            return
        self.storage.set_state(ledger_id, LedgerState(master_key, fenced=True))

        def durable(error: BaseException | None) -> None:
            reply(ResultCode.EOK if error is None else ResultCode.EIO)

        self.journal.append(fence_record(ledger_id), durable)

    def is_fenced(self, ledger_id: int) -> bool:
        state = self.storage.state(ledger_id)
        return state is not None and state.fenced

    # -- reads ----------------------------------------------------------------------------------

    def read(self, ledger_id: int, entry_id: int) -> tuple[ResultCode, bytes]:
        """(EOK, packaged entry) or (error code, b""); a corrupt entry answers EIO."""
        if self.storage.state(ledger_id) is None:
            return ResultCode.ENOLEDGER, b""
        if entry_id == LAST_ADD_CONFIRMED:
            found = self.last_entry(ledger_id)
            if found is None:
                return ResultCode.ENOENTRY, b""
            entry_id = found
        elif entry_id < 0:  # below -1 (LAST_ADD_CONFIRMED): no such entry
            return ResultCode.ENOENTRY, b""
        try:
            entry = self.storage.get(ledger_id, entry_id)
        except CorruptEntry as exc:
            log.error("corrupt entry not returned: %s", exc)
            return ResultCode.EIO, b""
        if entry is None:
            return ResultCode.ENOENTRY, b""
        return ResultCode.EOK, entry

    def last_entry(self, ledger_id: int) -> int | None:
        return self.storage.last_entry(ledger_id)

    async def entries_of(self, ledger_id: int) -> list[int] | None:
        """The ids of the ledger's entries this bookie holds, ascending; None when it does not
        know the ledger (upstream's NoLedgerException)."""
        if self.storage.state(ledger_id) is None:
            return None
        return await self.storage.entry_ids(ledger_id)

    @property
    def ledger_count(self) -> int:
        return self.storage.ledger_count

    @property
    def write_cache_size(self) -> int:
        """Bytes in the write cache (both halves while a checkpoint runs)."""
        return self.storage.write_cache_size

    @property
    def index(self) -> Index | None:
        return self.storage.index

    @property
    def logger(self) -> EntryLogger | None:
        return self.storage.logger

    # -- checkpoint -----------------------------------------------------------------------------

    @property
    def checkpoints(self) -> int:
        """Checkpoints completed."""
        return self.storage.checkpoints

    @property
    def checkpoint_at(self) -> int:
        """Bytes in the active half of the write cache at which the next checkpoint starts."""
        return self.storage.checkpoint_at

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
        mark = await self.storage.checkpoint(lambda: self.journal.last_mark)
        self.journal.remove_before(mark)

    # -- hooks for garbage collection (storage.bookie.gc, storage.bookie.compaction) -----------

    def ledger_ids(self) -> set[int]:
        """The ledgers this bookie holds a state for (written, fenced or replayed)."""
        return self.storage.ledger_ids()

    async def run_exclusive(self, fn: Callable[..., T], *args: Any) -> T:
        """Run blocking `fn(*args)` in the flush thread between checkpoints, so compaction's
        entry-log appends and index transactions never interleave with a checkpoint's."""
        return await self.storage.run_exclusive(fn, *args)

    async def delete_ledgers(self, ledger_ids: set[int]) -> int:
        """Forget ledgers deleted from the metadata store: their index states and locations in
        one durable transaction, then their state and cached entries here; returns the entries
        removed from the index. Their bytes stay in the entry logs until compaction."""
        return await self.storage.delete_ledgers(ledger_ids)
