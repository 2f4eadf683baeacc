"""An open ledger: the single writer's adds, the LAC, close, and reads.

Adds (BookKeeper's `LedgerHandle` + `PendingAddOp`):
- entry ids are given by the writer, 0, 1, 2, ... (`last_add_pushed`);
- entry e goes to its write set, the Qw ensemble indexes (e + i) mod E (`placement.write_set`),
  each copy packaged with the LAC at sending time (piggy-backed LAC) and the cumulative length;
- the add is quorum-complete once any Qa bookies of its write set acknowledged it, and it is
  acknowledged to the caller strictly in order: only when every earlier add was. The LAC is
  the last entry acknowledged that way.
- The hot path holds no Python object per copy: the add frame (packaged entry, CRC32C
  digest, request) is built once in compiled code for every bookie of the write set and
  appended to the connections' next writes; the acknowledgements are counted in a compiled
  ring indexed by entry id (`storage.bookie_client.AckRing`: per entry, a bit per write-set
  position acked or failed), which each connection's read of answers updates in one pass;
  the caller's futures complete in order in runs. An entry leaves the ring once every copy
  answered, so a copy past the ack quorum that fails or times out (the connection's
  timeout, swept here) still counts as its bookie's failure.
- A bookie error on a copy starts an ensemble change (`delayEnsembleChange=false`, as
  upstream's default): the client replaces the failed bookie under the ledger's recorded
  policy and writes a new segment starting at LAC + 1 by CAS (`LedgerClient.change_ensemble`);
  then every add still pending is re-sent to the new bookie at each replaced index (acks from
  the failed bookie are dropped, acks from survivors count). Completions wait while a change
  runs, and one change runs at a time (failures meanwhile are handled right after). When no
  bookie is eligible the handle is broken: that add and every later one fail with
  `EnsembleChangeFailed` naming the constraint. Fencing fails the handle at once.

Close waits for the adds in flight, then compare-and-swaps the metadata to CLOSED with
lastEntryId = LAC and the acknowledged length (`LedgerClient.close_metadata`); copies still
unanswered past their ack quorum are no longer tracked from then on.

Reads take entry e from the first replica of its write set that serves it with a good digest,
falling back to the next replica on any error.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass

from placement import NotEnoughBookies, write_set
from storage.bookie.errors import BookieError, ConnectionLost, Fenced, NoEntry, NoLedger
from storage.bookie.format import ENTRY_OVERHEAD, EntryHeader, entry_payload, verify_entry
from storage.bookie.protocol import ADD_IDS_AT
from storage.bookie_client import AckListener, AckRing, Answers, encode_add_frame, error_for
from storage.ledger.bookies import BookieConnection, BookiePool
from storage.ledger.errors import (
    AddFailed,
    ClientClosed,
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
        # The acknowledgements of every entry with a copy unanswered, compiled (no object
        # per entry or copy); the caller's future, the add frame (for a re-send to a new
        # bookie) and the payload size of each entry from LAC + 1, in entry order.
        self._ring = AckRing(metadata.ensemble_size, metadata.write_quorum_size,
                             metadata.ack_quorum_size)
        self._pending: deque[tuple[asyncio.Future[int], bytes, int]] = deque()
        # The connection each ensemble index's copies go to, and its listener on that
        # connection (answers of this ledger's adds go straight to the ring)
        self._links: list[BookieConnection | None] = [None] * metadata.ensemble_size
        self._listeners: list[AckListener | None] = [None] * metadata.ensemble_size
        self._failures: dict[str, str] = {}  # bookie -> why its last copy failed
        self._sweeper: asyncio.TimerHandle | None = None
        self._sweep_every = 0.5
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

    @property
    def unanswered_entries(self) -> int:
        """Entries with a copy not yet acknowledged, failed or timed out (a gauge; past
        their ack quorum too)."""
        return self._ring.outstanding

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
        entry_id = self.last_add_pushed + 1
        length = self._pushed_length + len(payload)
        # one frame (packaged entry, digest, request) for every bookie of the write set
        frame = encode_add_frame(self.ledger_id, entry_id, self.last_add_confirmed, length,
                                 self._master_key, payload)
        self._ring.push(loop.time())  # entry `entry_id`
        self.last_add_pushed = entry_id
        self._pushed_length = length
        if not self._pending:
            self._drained.clear()
        self._pending.append((future, frame, len(payload)))
        links = self._links
        for index in self._write_sets[entry_id % len(links)]:
            connection = links[index]
            if connection is None:
                self._send(entry_id, index, frame)
                continue
            try:  # the hot path: a frame appended to the connection's next write
                connection.send_add(frame)
            except ConnectionLost as exc:
                self._send_failed(entry_id, index, self._ensemble[index], exc)
        if self._sweeper is None:
            self._sweeper = loop.call_later(self._sweep_every, self._sweep)
        return future

    async def add(self, payload: bytes) -> int:
        """Add `payload`; its entry id once it is acknowledged (in order)."""
        return await self.add_nowait(payload)

    def _send(self, entry_id: int, index: int, frame: bytes) -> None:
        """Send the copy at ensemble `index`: on the connection already linked, else on the
        pool's open connection to the bookie (linked now), else after dialling it."""
        if self._broken is not None:
            return
        bookie = self._ensemble[index]
        connection = self._links[index] or self.bookies.cached(bookie)
        if connection is None:
            task = asyncio.get_running_loop().create_task(
                self._dial_and_send(entry_id, index, bookie, frame))
            self._sends.add(task)
            task.add_done_callback(self._sends.discard)
            return
        self._link(index, connection)
        try:
            connection.send_add(frame)
        except ConnectionLost as exc:
            self._send_failed(entry_id, index, bookie, exc)

    async def _dial_and_send(self, entry_id: int, index: int, bookie: str,
                             frame: bytes) -> None:
        """Dial the bookie first (no open connection yet), then send the copy."""
        try:
            connection = await self.bookies.get(bookie)
        except (TimeoutError, BookieError, OSError, ClientClosed) as exc:
            self._copy_error(entry_id, index, bookie, exc)
            return
        if self._ensemble[index] != bookie or self._broken is not None:
            return  # replaced meanwhile: the copy went to its successor
        self._link(index, connection)
        try:
            connection.send_add(frame)
        except ConnectionLost as exc:
            self._send_failed(entry_id, index, bookie, exc)

    def _link(self, index: int, connection: BookieConnection) -> None:
        """Answers to this ledger's adds on `connection` count for ensemble `index`."""
        if self._links[index] is connection:
            return
        self._unlink(index)
        bookie = self._ensemble[index]
        listener = AckListener(self._ring, index,
                               lambda answers: self._answered(index, bookie, connection,
                                                              answers))
        connection.listen_adds(self.ledger_id, listener)
        self._links[index] = connection
        self._listeners[index] = listener
        self._sweep_every = min(self._sweep_every, connection.timeout / 4)

    def _unlink(self, index: int) -> None:
        connection, listener = self._links[index], self._listeners[index]
        if connection is not None and listener is not None:
            connection.unlisten_adds(self.ledger_id, listener)
        self._links[index] = self._listeners[index] = None

    def _unlink_all(self) -> None:
        for index in range(len(self._links)):
            self._unlink(index)
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None

    def _answered(self, index: int, bookie: str, connection: BookieConnection,
                  answers: Answers) -> None:
        """The answers of one read from `bookie` (ensemble `index`): the acknowledgements
        are counted in the ring already; here the error answers, or the lost connection."""
        if isinstance(answers, BaseException):
            if self._links[index] is connection:
                self._links[index] = self._listeners[index] = None
            if self._broken is None and self._ensemble[index] == bookie:
                why = f"{type(answers).__name__}: {answers}"
                for entry_id in self._ring.fail_index(index):
                    self._copy_failed(entry_id, index, bookie, why)
            return
        if self._broken is not None:
            return
        for entry_id, code in answers:
            error = error_for(code, self.ledger_id, entry_id)
            if isinstance(error, Fenced):
                self._fail_all(LedgerFenced(self.ledger_id, bookie))
                return
            self._copy_error(entry_id, index, bookie, error)
        self._complete_in_order()

    def _sweep(self) -> None:
        """Fail the copies unanswered past their connection's timeout (BookieTimeout)."""
        self._sweeper = None
        if self._broken is not None:
            return
        now = asyncio.get_running_loop().time()
        for index, connection in enumerate(self._links):
            if connection is None:
                continue
            expired = self._ring.expire(index, now - connection.timeout)
            if expired:
                bookie = self._ensemble[index]
                why = f"BookieTimeout: no answer from {bookie} in {connection.timeout}s"
                for entry_id in expired:
                    self._copy_failed(entry_id, index, bookie, why)
        if self._ring.outstanding and self._broken is None:
            self._sweeper = asyncio.get_running_loop().call_later(self._sweep_every,
                                                                  self._sweep)

    def _entry_failures(self, entry_id: int, bookie: str, why: str) -> dict[str, str]:
        failures = {b: self._failures.get(b, "failed")
                    for b in (self._ensemble[i] for i in self._ring.failed_indexes(entry_id))}
        failures[bookie] = why
        return failures

    def _send_failed(self, entry_id: int, index: int, bookie: str,
                     error: ConnectionLost) -> None:
        """The connection linked at `index` refused the copy: it is gone (the next copy
        dials again) and the copy failed."""
        self._unlink(index)
        self._copy_error(entry_id, index, bookie, error)

    def _copy_error(self, entry_id: int, index: int, bookie: str, error: BaseException) -> None:
        """`bookie` (still at `index`) failed the copy of `entry_id` with `error`."""
        if self._ensemble[index] != bookie or self._broken is not None:
            return
        if self._ring.fail(entry_id, index) >= 0:  # not a copy answered already
            self._copy_failed(entry_id, index, bookie, f"{type(error).__name__}: {error}")

    def _copy_failed(self, entry_id: int, index: int, bookie: str, why: str) -> None:
        """The copy of `entry_id` at `index` failed (the ring counts it already)."""
        if self._ensemble[index] != bookie or self._broken is not None:
            return  # already replaced; the pending adds were re-sent to its successor
        if self.bookies.closed:
            # the client closed its connections: no bookie failed, so no ensemble change
            # (upstream's ClientClosedException errors out the pending adds)
            self._fail_all(ClientClosed())
            return
        self._failures[bookie] = why
        md = self.metadata
        if bookie not in self._to_replace:  # once per failed bookie, not once per copy
            log.warning("ledger %d: add of entry %d to bookie %s failed: %s", self.ledger_id,
                        entry_id, bookie, why)
        if self._change_ensemble is None:
            if (not self._ring.has_quorum(entry_id)
                    and len(self._ring.failed_indexes(entry_id))
                    > md.write_quorum_size - md.ack_quorum_size):
                self._fail_all(AddFailed(self.ledger_id, entry_id,
                                         self._entry_failures(entry_id, bookie, why)))
            return
        self._to_replace.add(bookie)
        if self._changing is None:
            self._changing = asyncio.get_running_loop().create_task(
                self._ensemble_change_loop(entry_id,
                                           self._entry_failures(entry_id, bookie, why)))

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
        now = asyncio.get_running_loop().time()
        first = self.last_add_confirmed + 1
        for index, (before, after) in enumerate(zip(old, self._ensemble, strict=True)):
            if before == after:
                continue
            self._unlink(index)  # answers from the replaced bookie are no longer counted
            self._failures.pop(before, None)
            for entry_id in self._ring.reset_index(index, now):
                self._send(entry_id, index, self._pending[entry_id - first][1])

    def _complete_in_order(self) -> None:
        if self._changing is not None:
            return  # completions wait for the ensemble change (as upstream)
        count = self._ring.take_completed()
        pending = self._pending
        if count:
            entry_id = self.last_add_confirmed
            length = self.length
            for _ in range(count):  # one run of in-order completions
                future, _, size = pending.popleft()
                entry_id += 1
                length += size
                if not future.done():
                    future.set_result(entry_id)
            self.last_add_confirmed = entry_id
            self.length = length
        if not pending:
            self._drained.set()

    def _fail_all(self, error: Exception) -> None:
        """The handle cannot go on: fail every add not yet acknowledged, and later ones."""
        if self._broken is None:
            self._broken = error
            log.warning("ledger %d: no more adds (%d pending fail): %s", self.ledger_id,
                        len(self._pending), error)
        self._ring.take_all()
        while self._pending:
            future = self._pending.popleft()[0]
            if not future.done():
                future.set_exception(self._broken)
        self._unlink_all()
        self._drained.set()

    # -- close --------------------------------------------------------------------------------

    async def close(self) -> LedgerMetadata:
        """Wait for the adds in flight, then record CLOSED with lastEntryId = LAC."""
        self._closing = True
        await self._drained.wait()
        self._unlink_all()  # copies still unanswered past their ack quorum are not waited for
        self.metadata = await self._close_metadata(self.last_add_confirmed, self.length)
        return self.metadata
