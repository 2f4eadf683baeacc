"""The journal: a write-ahead log with group commit on asyncio.

Commit point: the `fdatasync` of a group. `append(body, done)` calls `done(None)` only after
the group holding the record is on disk (`done(error)` if the write failed); nothing is
acknowledged before that. Callbacks rather than futures: a future per record cost more than the
rest of the journal's per-record work.

Records appended during one event-loop iteration are handed to a dedicated journal thread in
one go (one lock and one wake-up per iteration, not per record); that thread does `pwritev` +
`fdatasync` for a whole group (the design measured best in
reference/storage-pipeline-anchors.md §2.3) and reports the group to the loop on an eventfd,
whose reader runs the group's callbacks: one wake-up of the loop per group. Runs of EOK
responses handed over with a batch (`when_durable(done, run)`) are sent by the thread itself
right after the group's fdatasync (`addpath.ReplySocket`), so a writer's acknowledgements do
not wait for that wake-up and the callbacks; they are still sent only once the group is
durable. The thread is
compiled (`storage.bookie.addpath.GroupWriter`) and never takes the GIL, so a group's write
and sync never wait for Python work on the loop or in the checkpoint. While one group is being
synced, the next one gathers, which is BookKeeper's second level of grouping (its
ForceWriteThread). A group closes (BookKeeper's settings, `Journal.java`):
- when the queue drains, if `journalFlushWhenQueueEmpty` (our default: true, because a fixed
  wait cost throughput at low concurrency in the measurements; upstream's default is false);
- otherwise when its oldest record has waited `journalMaxGroupWaitMSec`;
- and always once `journalBufferedWritesThreshold` bytes are gathered.
Files `<hex id>.txn` are preallocated in `journalPreAllocSizeMB` steps and rolled after
`journalMaxSizeMB`; a new file starts on every open, so nothing is written after a torn tail.
Preallocation is by written zeros, as BookKeeper's JournalChannel preallocates by writing: a
second compiled thread (the writer's filler) writes zeros and syncs them one step ahead of the
records, never on the add path, so a group's fdatasync flushes its data only. Over
`posix_fallocate`d (unwritten) space the same fdatasync also waits for the file system to
commit the conversion of the blocks written, which measured about twice the time per group. A
group written over zeros is padded with zeros to a 4 KiB page boundary, so no partly written
page is read back from the disk; the next group overwrites the padding. When the filler is
behind (a file's first chunk, or a slow disk) a group goes over fallocate'd space as before
(`GroupWriter.groups_past_zeroed` counts those). Old files are not reused for new ones
(upstream's `journalReuseFiles`): a record does not name its file, so an old file's records
past the new tail would replay as new.
Records carry length + CRC32C (`format.encode_record`): replay stops at the first record that
does not check, which is how a torn tail is ignored; zeros (length 0) end it the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import mmap
import os
import struct
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from storage.bookie.addpath import GroupWriter, ReplyRun
from storage.bookie.format import decode_record, record_header
from storage.bookie.metrics import BookieMetrics

log = logging.getLogger(__name__)

_MARK = struct.Struct(">qq")

Done = Callable[[BaseException | None], None]


@dataclass(frozen=True, order=True)
class LogMark:
    """A position in the journal: everything before it is synced."""

    file_id: int
    offset: int

    def encode(self) -> bytes:
        return _MARK.pack(self.file_id, self.offset)

    @classmethod
    def decode(cls, raw: bytes) -> LogMark:
        return cls(*_MARK.unpack(raw[: _MARK.size]))


ZERO_MARK = LogMark(0, 0)


@dataclass(frozen=True)
class JournalSettings:
    journalMaxGroupWaitMSec: float = 1.0
    journalBufferedWritesThreshold: int = 512 * 1024
    journalFlushWhenQueueEmpty: bool = True
    journalMaxSizeMB: int = 2048
    journalPreAllocSizeMB: int = 16
    journalMaxBackups: int = 5


def journal_files(directory: Path) -> list[int]:
    ids = []
    for path in directory.glob("*.txn"):
        with contextlib.suppress(ValueError):
            ids.append(int(path.stem, 16))
    return sorted(ids)


def journal_path(directory: Path, file_id: int) -> Path:
    return directory / f"{file_id:x}.txn"


def replay(directory: Path, mark: LogMark) -> Iterator[bytes]:
    """Every valid record body from `mark` on, oldest first; each file's scan stops at its
    first invalid record (a torn tail), which is logged and skipped, not fatal."""
    for file_id in journal_files(directory):
        if file_id < mark.file_id:
            continue
        start = mark.offset if file_id == mark.file_id else 0
        path = journal_path(directory, file_id)
        size = path.stat().st_size
        if size <= start:
            continue
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            offset = start
            while True:
                found = decode_record(data, offset)
                if found is None:
                    break
                body, offset = found
                yield bytes(body)
                body.release()
            if offset + 4 <= size and any(data[offset : offset + 8]):
                log.warning("journal %s: invalid record at offset %d, tail ignored", path, offset)


class Journal:
    def __init__(self, directory: Path, settings: JournalSettings | None = None) -> None:
        self.directory = directory
        self.settings = settings or JournalSettings()
        # Gathered on the loop during one iteration: record parts (header, body, header, ...,
        # or runs of whole records) and their callbacks, handed to the writer by `_hand_over`.
        self._parts: list[bytes] = []
        self._dones: list[Done] = []
        self._runs: list[ReplyRun] = []
        self._records = 0
        # Handed over, not yet reported synced: (token, parts and runs kept alive for the
        # writer, callbacks, records), in token order.
        self._pending: deque[tuple[int, tuple[list[bytes], list[ReplyRun]], list[Done], int]] = (
            deque()
        )
        self._pending_records = 0
        self._writer: GroupWriter | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closing = False
        self._fd = -1
        self._file_id = 0
        self._allocated = 0
        self.last_mark = ZERO_MARK
        self.groups = 0
        self.records = 0
        self.metrics: BookieMetrics | None = None  # set by the service when statistics are on

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> None:
        """Open a fresh journal file (after replay) and start the journal thread, which owns
        the file from then on (it rolls it at journalMaxSizeMB)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        existing = journal_files(self.directory)
        self._open_file(max(existing[-1] + 1 if existing else 0, int(time.time() * 1000)))
        self.last_mark = LogMark(self._file_id, 0)
        self._loop = asyncio.get_running_loop()
        settings = self.settings
        mib = 1024 * 1024
        self._writer = GroupWriter(
            self._fd, self._file_id, self._allocated, os.fsencode(self.directory),
            settings.journalMaxGroupWaitMSec, settings.journalBufferedWritesThreshold,
            settings.journalFlushWhenQueueEmpty, settings.journalMaxSizeMB * mib,
            settings.journalPreAllocSizeMB * mib,
        )
        self._fd = -1
        self._loop.add_reader(self._writer.event_fd, self._on_synced)

    async def close(self) -> None:
        """Sync what was appended, answer its callbacks, stop the thread, close the file."""
        if self._closing:
            return
        self._hand_over()
        self._closing = True
        writer = self._writer
        if writer is not None:
            await asyncio.to_thread(writer.close)
            assert self._loop is not None
            self._loop.remove_reader(writer.event_fd)
            self._on_synced()  # the last groups' callbacks
            os.close(writer.fd)
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def _open_file(self, file_id: int) -> None:
        path = journal_path(self.directory, file_id)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        step = self.settings.journalPreAllocSizeMB * 1024 * 1024
        if step:
            os.posix_fallocate(fd, 0, step)
        os.fsync(fd)
        dir_fd = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
        if self._fd >= 0:
            os.close(self._fd)
        self._fd, self._file_id, self._allocated = fd, file_id, step

    @property
    def queue_size(self) -> int:
        """Records waiting for their group's fdatasync."""
        return self._records + self._pending_records

    # -- appends (event loop) -------------------------------------------------------------------

    def append(self, body: bytes, done: Done | None = None) -> None:
        """Queue one record; `done(None)` runs after the fdatasync of its group."""
        if self._closing or self._loop is None:
            raise RuntimeError("journal is not running")
        if not self._parts and not self._dones:
            self._loop.call_soon(self._hand_over)
        self._parts += (record_header(body), body)
        self._records += 1
        if done is not None:
            self._dones.append(done)

    def append_records(self, records: bytes, count: int) -> None:
        """Queue `count` whole records (headers included, as `record_header` frames them),
        built in one run by the compiled add path (`addpath.take_adds`)."""
        if self._closing or self._loop is None:
            raise RuntimeError("journal is not running")
        if not self._parts and not self._dones:
            self._loop.call_soon(self._hand_over)
        self._parts.append(records)
        self._records += count

    def when_durable(self, done: Done, run: ReplyRun | None = None) -> None:
        """`done(None)` once every record appended so far is durable (`done(error)` if the
        write of their group failed): one callback for many records appended without one.
        `run`: response frames the writer sends itself as soon as the group is synced,
        before `done` runs (`run.sent` then says how much of it left)."""
        if self._closing or self._loop is None:
            raise RuntimeError("journal is not running")
        if not self._parts and not self._dones:
            self._loop.call_soon(self._hand_over)
        self._dones.append(done)
        if run is not None:
            self._runs.append(run)

    def append_future(self, body: bytes) -> asyncio.Future[None]:
        """`append`, as a future that completes when the record is durable."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def done(error: BaseException | None) -> None:
            if not future.done():
                if error is None:
                    future.set_result(None)
                else:
                    future.set_exception(error)

        self.append(body, done)
        return future

    def _hand_over(self) -> None:
        if not self._parts and not self._dones:
            return
        assert self._writer is not None
        token = self._writer.submit(self._parts, self._records, self._runs)
        self._pending.append((token, (self._parts, self._runs), self._dones, self._records))
        self._pending_records += self._records
        self._parts, self._dones, self._runs, self._records = [], [], [], 0

    def _on_synced(self) -> None:
        """The eventfd's reader: each group the writer finished, its batches' callbacks run
        (`done(None)`, or `done(OSError)` when its write or sync failed) after the synced mark
        moved past it."""
        assert self._writer is not None
        pending = self._pending
        for token, error, seconds, size, records, file_id, end in self._writer.synced():
            dones: list[Done] = []
            while pending and pending[0][0] <= token:
                _, _, batch_dones, count = pending.popleft()
                dones += batch_dones
                self._pending_records -= count
            failure: OSError | None = None
            if error:
                failure = OSError(error, os.strerror(error))
                log.error("journal write failed: %s", failure)
            else:
                self.groups += 1
                self.records += records
                self.last_mark = LogMark(file_id, end)
                if self.metrics is not None:
                    self.metrics.journal_synced(seconds, records, size)
            if dones:
                self._complete(dones, failure)

    def _complete(self, dones: list[Done], error: BaseException | None) -> None:
        for done in dones:
            try:
                done(error)
            except Exception:
                log.exception("journal callback failed")

    # -- checkpoint -----------------------------------------------------------------------------

    def remove_before(self, mark: LogMark) -> list[int]:
        """Delete journal files wholly before `mark`, keeping `journalMaxBackups` of them."""
        old = [fid for fid in journal_files(self.directory) if fid < mark.file_id]
        keep = self.settings.journalMaxBackups
        doomed = old[: len(old) - keep] if keep else old
        for file_id in doomed:
            journal_path(self.directory, file_id).unlink(missing_ok=True)
        return doomed
