"""An open ledger: the single writer's adds, the LAC, close, and reads.

Adds (BookKeeper's `LedgerHandle` + `PendingAddOp`):
- entry ids are given by the writer, 0, 1, 2, ... (`last_add_pushed`);
- entry e goes to its write set, the Qw ensemble indexes (e + i) mod E (`placement.write_set`),
  each copy packaged with the LAC at sending time (piggy-backed LAC) and the cumulative length;
- the add is quorum-complete once any Qa bookies of its write set acknowledged it, and it is
  acknowledged to the caller strictly in order: only when every earlier add was. The LAC is
  the last entry acknowledged that way.
- A bookie error on a copy starts an ensemble change (`delayEnsembleChange=false`, as
  upstream's default): the client replaces the failed bookie under the ledger's recorded
  policy and writes a new segment starting at LAC + 1 by CAS (`LedgerClient.change_ensemble`);
  then every add still pending is re-sent to the new bookie at each replaced index (acks from
  the failed bookie are dropped, acks from survivors count). Completions wait while a change
  runs, and one change runs at a time (failures meanwhile are handled right after). When no
  bookie is eligible the handle is broken: that add and every later one fail with
  `EnsembleChangeFailed` naming the constraint. Fencing fails the handle at once.

Close waits for the adds in flight, then compare-and-swaps the metadata to CLOSED with
lastEntryId = LAC and the acknowledged length (`LedgerClient.close_metadata`).

Reads take entry e from the first replica of its write set that serves it with a good digest,
falling back to the next replica on any error.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass, field

from placement import NotEnoughBookies, write_set
from storage.bookie.errors import BookieError, Fenced, NoEntry, NoLedger
from storage.bookie.format import (
    ENTRY_OVERHEAD,
    EntryHeader,
    entry_payload,
    package_entry,
    verify_entry,
)
from storage.bookie.protocol import ADD_IDS_AT, encode_add
from storage.ledger.bookies import BookiePool
from storage.ledger.errors import (
    AddFailed,
    EnsembleChangeFailed,
    EntryTooLarge,
    LedgerClosed,
    LedgerError,
    LedgerFenced,
    NoSuchEntry,
    ReadFailed,
)
from storage.ledger.metadata import LedgerMetadata

log = logging.getLogger(__name__)

# An add frame's bytes beyond the payload: the frame's header and master key, then the
# packaged entry's header and digest (the 4-byte length is not counted, as Netty's
# LengthFieldBasedFrameDecoder does not)
ADD_FRAME_OVERHEAD = ADD_IDS_AT + ENTRY_OVERHEAD


def master_key(password: bytes) -> bytes:
    """The key a bookie checks on adds: SHA-1 over "ledger" + password (MacDigestManager)."""
    return hashlib.sha1(b"ledger" + password).digest()


@dataclass(slots=True)
class _PendingAdd:
    entry_id: int
    size: int
    future: asyncio.Future[int]
    write_set: tuple[int, ...]
    packaged: bytes
    frame: bytes  # the add request, encoded once for every bookie of the write set
    acked: set[int] = field(default_factory=set)
    failed: dict[str, str] = field(default_factory=dict)
    quorum: bool = False


@dataclass(frozen=True)
class Entry:
    """One entry read back: its id and payload (digest and ids already checked)."""

    entry_id: int
    payload: bytes
    last_add_confirmed: int = -1  # the writer's LAC when it sent this entry
    length: int = 0  # the ledger's length up to and including this entry


class ReadableLedger:
    """Reads of a ledger from its metadata (any state); `last_readable` bounds them."""

    def __init__(self, metadata: LedgerMetadata, bookies: BookiePool) -> None:
        self.metadata = metadata
        self.bookies = bookies

    @property
    def ledger_id(self) -> int:
        return self.metadata.ledger_id

    @property
    def last_readable(self) -> int:
        """The highest entry a reader may ask for: lastEntryId once closed."""
        return self.metadata.last_entry_id

    async def read(self, entry_id: int) -> Entry:
        """Entry `entry_id`; NoSuchEntry outside [0, last_readable], ReadFailed when no
        replica serves it."""
        if entry_id < 0 or entry_id > self.last_readable:
            raise NoSuchEntry(
                self.ledger_id, entry_id,
                f"readable entries are 0..{self.last_readable}" if self.last_readable >= 0
                else "the ledger has no readable entries",
            )
        return await self.read_unchecked(entry_id)

    async def read_unchecked(self, entry_id: int) -> Entry:
        """Read from the write set without checking the readable range (recovery uses it)."""
        packaged, header = await self.read_packaged(entry_id)
        return Entry(entry_id, entry_payload(packaged), header.last_add_confirmed,
                     header.length)

    async def read_packaged(
        self, entry_id: int, *, avoid: Collection[str] = (), spread: bool = False,
    ) -> tuple[bytes, EntryHeader]:
        """The entry as a bookie stores it (for copying it elsewhere) and its checked header.

        Replicas are tried in write-set order; `avoid` (bookies known lost or being replaced)
        go last, still tried if every other one fails. `spread` starts at a different replica
        for consecutive entries, so a copy that reads a whole stripe shares the reads among
        the replicas instead of asking mostly the first one."""
        md = self.metadata
        ensemble = md.ensemble_for(entry_id)
        order = [ensemble[i] for i in write_set(entry_id, md.ensemble_size,
                                                md.write_quorum_size)]
        if avoid or spread:
            first = [b for b in order if b not in avoid]
            if spread and first:
                turn = entry_id % len(first)
                first = first[turn:] + first[:turn]
            order = first + [b for b in order if b in avoid]
        failures: dict[str, str] = {}
        missing = 0
        for bookie in order:
            try:
                connection = await self.bookies.get(bookie)
                packaged = await connection.read(self.ledger_id, entry_id)
                header = verify_entry(packaged, self.ledger_id, entry_id)
            except (NoEntry, NoLedger) as exc:
                missing += 1
                failures[bookie] = type(exc).__name__
                continue
            except (TimeoutError, BookieError, OSError) as exc:
                failures[bookie] = f"{type(exc).__name__}: {exc}"
                continue
            return packaged, header
        if missing and missing >= md.write_quorum_size - md.ack_quorum_size + 1:
            raise NoSuchEntry(self.ledger_id, entry_id, f"replicas answered {failures}")
        raise ReadFailed(self.ledger_id, entry_id, failures)


CloseMetadata = Callable[[int, int], Awaitable[LedgerMetadata]]
# (failed bookies, first entry of the new segment) -> the metadata with the new segment
ChangeEnsemble = Callable[[frozenset[str], int], Awaitable[LedgerMetadata]]


class WriteHandle(ReadableLedger):
    """The writer's handle on a ledger it created (state OPEN)."""

    def __init__(
        self,
        metadata: LedgerMetadata,
        bookies: BookiePool,
        close_metadata: CloseMetadata,
        change_ensemble: ChangeEnsemble | None = None,
    ) -> None:
        super().__init__(metadata, bookies)
        self._close_metadata = close_metadata
        self._change_ensemble = change_ensemble
        self._to_replace: set[str] = set()
        self._changing: asyncio.Task[None] | None = None
        self.ensemble_changes = 0
        self._master_key = master_key(metadata.password or b"")
        self._ensemble = tuple(metadata.current_ensemble)
        # Write sets depend on entry id mod E only: computed once, not once per add.
        self._write_sets = [
            write_set(i, metadata.ensemble_size, metadata.write_quorum_size)
            for i in range(metadata.ensemble_size)
        ]
        self.last_add_pushed = -1
        self.last_add_confirmed = -1
        self.length = 0  # acknowledged bytes
        self._pushed_length = 0
        self._pending: deque[_PendingAdd] = deque()
        self._sends: set[asyncio.Task[None]] = set()
        self._broken: Exception | None = None
        self._closing = False
        self._drained = asyncio.Event()
        self._drained.set()

    @property
    def last_readable(self) -> int:
        return self.last_add_confirmed

    @property
    def is_closed(self) -> bool:
        return self._closing

    @property
    def is_broken(self) -> bool:
        """A bookie failure or fencing stopped this handle; no add will succeed."""
        return self._broken is not None

    @property
    def pending_adds(self) -> int:
        return len(self._pending)

    # -- adds ---------------------------------------------------------------------------------

    def add_nowait(self, payload: bytes) -> asyncio.Future[int]:
        """Start adding `payload`; the future gives its entry id once acknowledged in order.
        The entry id is assigned now, so calls made in order land in order."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[int] = loop.create_future()
        if self._closing:
            future.set_exception(LedgerClosed(self.ledger_id))
            return future
        if self._broken is not None:
            future.set_exception(self._broken)
            return future
        if ADD_FRAME_OVERHEAD + len(payload) > self.bookies.max_frame:
            # refused before it has an entry id: the ledger and its connections go on
            future.set_exception(EntryTooLarge(
                self.ledger_id, len(payload), self.bookies.max_frame - ADD_FRAME_OVERHEAD))
            return future
        md = self.metadata
        entry_id = self.last_add_pushed + 1
        self.last_add_pushed = entry_id
        self._pushed_length += len(payload)
        packaged = package_entry(
            self.ledger_id, entry_id, self.last_add_confirmed, self._pushed_length, payload
        )
        op = _PendingAdd(entry_id, len(payload), future,
                         self._write_sets[entry_id % md.ensemble_size], packaged,
                         encode_add(self.ledger_id, entry_id, self._master_key, packaged))
        self._pending.append(op)
        self._drained.clear()
        for index in op.write_set:
            self._spawn_send(op, index)
        return future

    def _spawn_send(self, op: _PendingAdd, index: int) -> None:
        bookie = self._ensemble[index]
        connection = self.bookies.cached(bookie)
        if connection is not None:  # the hot path: a callback, no task or future per copy
            connection.add_callback(
                self.ledger_id, op.entry_id, self._master_key, op.packaged,
                lambda error: self._copy_done(op, index, bookie, error), encoded=op.frame)
            return
        task = asyncio.get_running_loop().create_task(self._send(op, index, bookie))
        self._sends.add(task)
        task.add_done_callback(self._sends.discard)

    async def add(self, payload: bytes) -> int:
        """Add `payload`; its entry id once it is acknowledged (in order)."""
        return await self.add_nowait(payload)

    async def _send(self, op: _PendingAdd, index: int, bookie: str) -> None:
        """Dial the bookie first (no open connection yet), then send the copy."""
        try:
            connection = await self.bookies.get(bookie)
            await connection.add(self.ledger_id, op.entry_id, self._master_key, op.packaged)
        except (TimeoutError, BookieError, OSError) as exc:
            self._copy_done(op, index, bookie, exc)
            return
        self._copy_done(op, index, bookie, None)

    def _copy_done(
        self, op: _PendingAdd, index: int, bookie: str, error: BaseException | None
    ) -> None:
        """One copy of `op` answered by `bookie` (ensemble index `index`)."""
        if error is not None:
            if isinstance(error, Fenced):
                self._fail_all(LedgerFenced(self.ledger_id, bookie))
            elif isinstance(error, TimeoutError | BookieError | OSError):
                self._copy_failed(op, index, bookie, f"{type(error).__name__}: {error}")
            else:
                raise error
            return
        if self._ensemble[index] != bookie:
            return  # an answer from a bookie replaced meanwhile: the new one gets the copy
        op.acked.add(index)
        if not op.quorum and len(op.acked) >= self.metadata.ack_quorum_size:
            op.quorum = True
            self._complete_in_order()

    def _copy_failed(self, op: _PendingAdd, index: int, bookie: str, why: str) -> None:
        if self._ensemble[index] != bookie or self._broken is not None:
            return  # already replaced; the pending adds were re-sent to its successor
        op.failed[bookie] = why
        md = self.metadata
        if bookie not in self._to_replace:  # once per failed bookie, not once per copy
            log.warning("ledger %d: add of entry %d to bookie %s failed: %s", self.ledger_id,
                        op.entry_id, bookie, why)
        if self._change_ensemble is None:
            if not op.quorum and len(op.failed) > md.write_quorum_size - md.ack_quorum_size:
                self._fail_all(AddFailed(self.ledger_id, op.entry_id, dict(op.failed)))
            return
        self._to_replace.add(bookie)
        if self._changing is None:
            self._changing = asyncio.get_running_loop().create_task(
                self._ensemble_change_loop(op.entry_id, dict(op.failed)))

    async def _ensemble_change_loop(self, entry_id: int, failures: dict[str, str]) -> None:
        """Replace the failed bookies, one change at a time, until none is left."""
        assert self._change_ensemble is not None
        try:
            while self._to_replace and self._broken is None:
                failed = frozenset(self._to_replace)
                try:
                    metadata = await self._change_ensemble(failed, self.last_add_confirmed + 1)
                except NotEnoughBookies as exc:
                    self._fail_all(EnsembleChangeFailed(self.ledger_id, entry_id, failures,
                                                        str(exc),
                                                        exc.constraint or exc.short_set))
                    return
                except LedgerError as exc:  # closed or being recovered by someone else
                    self._fail_all(exc)
                    return
                except Exception as exc:
                    self._fail_all(AddFailed(self.ledger_id, entry_id, {
                        **failures, "metadata": f"{type(exc).__name__}: {exc}"}))
                    return
                self._to_replace -= failed
                self._adopt(metadata)
        finally:
            self._changing = None
        self._complete_in_order()

    def _adopt(self, metadata: LedgerMetadata) -> None:
        """Switch to the new last ensemble and re-send pending copies to the new bookies."""
        old = self._ensemble
        self.metadata = metadata
        self._ensemble = tuple(metadata.current_ensemble)
        self.ensemble_changes += 1
        log.info("ledger %d: ensemble changed from entry %d: %s -> %s", self.ledger_id,
                 max(metadata.ensembles), list(old), list(self._ensemble))
        changed = [i for i, (a, b) in enumerate(zip(old, self._ensemble, strict=True)) if a != b]
        for op in self._pending:
            for index in changed:
                if index in op.write_set:
                    op.acked.discard(index)
                    op.failed.pop(old[index], None)
                    self._spawn_send(op, index)
            op.quorum = len(op.acked) >= metadata.ack_quorum_size

    def _complete_in_order(self) -> None:
        if self._changing is not None:
            return  # completions wait for the ensemble change (as upstream)
        while self._pending and self._pending[0].quorum:
            op = self._pending.popleft()
            self.last_add_confirmed = op.entry_id
            self.length += op.size
            if not op.future.done():
                op.future.set_result(op.entry_id)
        if not self._pending:
            self._drained.set()

    def _fail_all(self, error: Exception) -> None:
        """The handle cannot go on: fail every add not yet acknowledged, and later ones."""
        if self._broken is None:
            self._broken = error
            log.warning("ledger %d: no more adds (%d pending fail): %s", self.ledger_id,
                        len(self._pending), error)
        while self._pending:
            op = self._pending.popleft()
            if not op.future.done():
                op.future.set_exception(self._broken)
        self._drained.set()

    # -- close --------------------------------------------------------------------------------

    async def close(self) -> LedgerMetadata:
        """Wait for the adds in flight, then record CLOSED with lastEntryId = LAC."""
        self._closing = True
        await self._drained.wait()
        self.metadata = await self._close_metadata(self.last_add_confirmed, self.length)
        return self.metadata
