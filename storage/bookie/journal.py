"""The journal: a write-ahead log with group commit on asyncio.

Commit point: the `fdatasync` of a group. `append(body, done)` calls `done(None)` only after
the group holding the record is on disk (`done(error)` if the write failed); nothing is
acknowledged before that. Callbacks rather than futures: a future per record cost more than the
rest of the journal's per-record work.

Records appended during one event-loop iteration are handed to a dedicated journal thread in
one go (one lock and one wake-up per iteration, not per record); that thread does `pwritev` +
`fdatasync` for a whole group (the design measured best in
reference/storage-pipeline-anchors.md §2.3) and hands the group's callbacks back to the loop
with one `call_soon_threadsafe`. While one group is being synced, the next one gathers, which
is BookKeeper's second level of grouping (its ForceWriteThread). A group closes (BookKeeper's
settings, `Journal.java`):
- when the queue drains, if `journalFlushWhenQueueEmpty` (our default: true, because a fixed
  wait cost throughput at low concurrency in the measurements; upstream's default is false);
- otherwise when its oldest record has waited `journalMaxGroupWaitMSec`;
- and always once `journalBufferedWritesThreshold` bytes are gathered.
Files `<hex id>.txn` are preallocated in `journalPreAllocSizeMB` steps and rolled after
`journalMaxSizeMB`; a new file starts on every open, so nothing is written after a torn tail.
Records carry length + CRC32C (`format.encode_record`): replay stops at the first record that
does not check, which is how a torn tail is ignored.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import mmap
import os
import struct
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from storage.bookie.fileio import pwrite_all
from storage.bookie.format import RECORD_HEADER_LEN, decode_record, record_header
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
        # or runs of whole records) and their callbacks, handed to the thread by `_hand_over`.
        self._parts: list[bytes] = []
        self._dones: list[Done] = []
        self._bytes = 0
        self._records = 0
        # Handed over, waiting for the journal thread (guarded by `_cond`).
        self._cond = threading.Condition()
        self._queue: deque[tuple[list[bytes], list[Done], int, int]] = deque()
        self._queued_bytes = 0
        self._queued_records = 0
        self._oldest = 0.0
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closing = False
        self._fd = -1
        self._file_id = 0
        self._offset = 0
        self._allocated = 0
        self.last_mark = ZERO_MARK
        self.groups = 0
        self.records = 0
        self.metrics: BookieMetrics | None = None  # set by the service when statistics are on

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> None:
        """Open a fresh journal file (after replay) and start the journal thread."""
        self.directory.mkdir(parents=True, exist_ok=True)
        existing = journal_files(self.directory)
        self._open_file(max(existing[-1] + 1 if existing else 0, int(time.time() * 1000)))
        self.last_mark = LogMark(self._file_id, 0)
        self._loop = asyncio.get_running_loop()
        self._thread = threading.Thread(target=self._run, name="journal", daemon=True)
        self._thread.start()

    async def close(self) -> None:
        """Sync what was appended, answer its callbacks, stop the thread, close the file."""
        if self._closing:
            return
        self._hand_over()
        with self._cond:
            self._closing = True
            self._cond.notify()
        if self._thread is not None:
            await asyncio.to_thread(self._thread.join)
            await asyncio.sleep(0)  # run the last group's callbacks
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
        self._fd, self._file_id, self._offset, self._allocated = fd, file_id, 0, step

    @property
    def queue_size(self) -> int:
        """Records waiting for their group's fdatasync (a gauge: read without the lock)."""
        return self._records + self._queued_records

    # -- appends (event loop) -------------------------------------------------------------------

    def append(self, body: bytes, done: Done | None = None) -> None:
        """Queue one record; `done(None)` runs after the fdatasync of its group."""
        if self._closing or self._loop is None:
            raise RuntimeError("journal is not running")
        if not self._parts and not self._dones:
            self._loop.call_soon(self._hand_over)
        self._parts += (record_header(body), body)
        self._bytes += RECORD_HEADER_LEN + len(body)
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
        self._bytes += len(records)
        self._records += count

    def when_durable(self, done: Done) -> None:
        """`done(None)` once every record appended so far is durable (`done(error)` if the
        write of their group failed): one callback for many records appended without one."""
        if self._closing or self._loop is None:
            raise RuntimeError("journal is not running")
        if not self._parts and not self._dones:
            self._loop.call_soon(self._hand_over)
        self._dones.append(done)

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
        batch = (self._parts, self._dones, self._bytes, self._records)
        self._parts, self._dones, self._bytes, self._records = [], [], 0, 0
        with self._cond:
            if not self._queue:
                self._oldest = time.monotonic()
            self._queue.append(batch)
            self._queued_bytes += batch[2]
            self._queued_records += batch[3]
            self._cond.notify()

    def _complete(self, dones: list[Done], error: BaseException | None) -> None:
        for done in dones:
            try:
                done(error)
            except Exception:
                log.exception("journal callback failed")

    # -- the journal thread ---------------------------------------------------------------------

    def _run(self) -> None:
        assert self._loop is not None
        while True:
            group = self._next_group()
            if group is None:
                return
            parts, dones, count = group
            error: BaseException | None = None
            size = sum(len(part) for part in parts)
            try:
                synced = self._write(parts, size)
            except OSError as exc:
                log.exception("journal write failed")
                error = exc
            else:
                self.groups += 1
                self.records += count
                if self.metrics is not None:
                    self.metrics.journal_synced(synced, count, size)
            if dones:
                self._loop.call_soon_threadsafe(self._complete, dones, error)

    def _next_group(self) -> tuple[list[bytes], list[Done], int] | None:
        """Block until a group closes; None once closing with nothing left."""
        settings = self.settings
        wait_s = settings.journalMaxGroupWaitMSec / 1000
        threshold = settings.journalBufferedWritesThreshold
        with self._cond:
            while not self._queue:
                if self._closing:
                    return None
                self._cond.wait()
            if not settings.journalFlushWhenQueueEmpty and wait_s > 0:
                # Wait for the group to fill or for its oldest record to reach the max wait.
                while self._queued_bytes < threshold and not self._closing:
                    left = self._oldest + wait_s - time.monotonic()
                    if left <= 0:
                        break
                    self._cond.wait(left)
            parts: list[bytes] = []
            dones: list[Done] = []
            size = records = 0
            queue = self._queue
            while queue and (size < threshold or not parts):
                batch_parts, batch_dones, batch_bytes, batch_records = queue.popleft()
                parts += batch_parts
                dones += batch_dones
                size += batch_bytes
                records += batch_records
            self._queued_bytes -= size
            self._queued_records -= records
            if queue:
                self._oldest = time.monotonic()
        return parts, dones, records

    def _write(self, parts: list[bytes], size: int) -> float:
        """In the journal thread: one pwritev (the record parts as they are, not joined) and
        one fdatasync for a whole group; the fdatasync's duration (s)."""
        end = self._offset + size
        if end > self._allocated:
            step = max(self.settings.journalPreAllocSizeMB * 1024 * 1024, size)
            os.posix_fallocate(self._fd, self._allocated, step)
            self._allocated += step
        pwrite_all(self._fd, parts, self._offset, "journal")
        synced = time.perf_counter()
        os.fdatasync(self._fd)
        synced = time.perf_counter() - synced
        self._offset = end
        self.last_mark = LogMark(self._file_id, end)
        if end >= self.settings.journalMaxSizeMB * 1024 * 1024:
            self._open_file(self._file_id + 1)
        return synced

    # -- checkpoint -----------------------------------------------------------------------------

    def remove_before(self, mark: LogMark) -> list[int]:
        """Delete journal files wholly before `mark`, keeping `journalMaxBackups` of them."""
        old = [fid for fid in journal_files(self.directory) if fid < mark.file_id]
        keep = self.settings.journalMaxBackups
        doomed = old[: len(old) - keep] if keep else old
        for file_id in doomed:
            journal_path(self.directory, file_id).unlink(missing_ok=True)
        return doomed
