"""The journal: a write-ahead log with group commit on asyncio.

Commit point: the `fdatasync` of a group. `append(body, done)` calls `done(None)` only after
the group holding the record is on disk (`done(error)` if the write failed); nothing is
acknowledged before that. Callbacks rather than futures: a future per record cost more than the
rest of the journal's per-record work.

One task gathers records; one executor thread does `pwrite` + `fdatasync` for a whole group
(the design measured best in reference/storage-pipeline-anchors.md §2.3). While one group is
being synced, the next one gathers, which is BookKeeper's second level of grouping (its
ForceWriteThread). A group closes (BookKeeper's settings, `Journal.java`):
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
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from storage.bookie.format import decode_record, encode_record
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
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="journal")
        self._pending: list[tuple[bytes, Done | None]] = []
        self._pending_bytes = 0
        self._oldest = 0.0
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
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
        """Open a fresh journal file (after replay) and start the group-commit task."""
        self.directory.mkdir(parents=True, exist_ok=True)
        existing = journal_files(self.directory)
        self._open_file(max(existing[-1] + 1 if existing else 0, int(time.time() * 1000)))
        self.last_mark = LogMark(self._file_id, 0)
        self._task = asyncio.get_running_loop().create_task(self._run(), name="journal")

    async def close(self) -> None:
        self._closing = True
        self._wake.set()
        if self._task is not None:
            await self._task
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        self._executor.shutdown(wait=True)

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
        """Records waiting for the next group."""
        return len(self._pending)

    # -- appends --------------------------------------------------------------------------------

    def append(self, body: bytes, done: Done | None = None) -> None:
        """Queue one record; `done(None)` runs after the fdatasync of its group."""
        if self._closing or self._task is None:
            raise RuntimeError("journal is not running")
        record = encode_record(body)
        if not self._pending:
            self._oldest = time.monotonic()
            self._wake.set()
        self._pending.append((record, done))
        self._pending_bytes += len(record)

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

    async def _run(self) -> None:
        settings = self.settings
        wait_s = settings.journalMaxGroupWaitMSec / 1000
        threshold = settings.journalBufferedWritesThreshold
        while True:
            if not self._pending:
                if self._closing:
                    return
                self._wake.clear()
                await self._wake.wait()
                continue
            if not settings.journalFlushWhenQueueEmpty and wait_s > 0:
                # Wait for the group to fill or for its oldest record to reach the max wait.
                while self._pending_bytes < threshold and not self._closing:
                    left = self._oldest + wait_s - time.monotonic()
                    if left <= 0:
                        break
                    await asyncio.sleep(left)
            group, size = self._take(threshold)
            error: BaseException | None = None
            try:
                synced = await asyncio.get_running_loop().run_in_executor(
                    self._executor, self._write, b"".join([record for record, _ in group])
                )
            except OSError as exc:
                log.exception("journal write failed")
                error = exc
            else:
                self.groups += 1
                self.records += len(group)
                if self.metrics is not None:
                    self.metrics.journal_synced(synced, len(group), size)
            for _, done in group:
                if done is not None:
                    try:
                        done(error)
                    except Exception:
                        log.exception("journal callback failed")

    def _take(self, threshold: int) -> tuple[list[tuple[bytes, Done | None]], int]:
        pending = self._pending
        if self._pending_bytes <= threshold:
            group, size = pending, self._pending_bytes
            self._pending, self._pending_bytes = [], 0
        else:
            size, count = 0, 0
            for record, _ in pending:
                count += 1
                size += len(record)
                if size >= threshold:
                    break
            group, self._pending = pending[:count], pending[count:]
            self._pending_bytes -= size
        if self._pending:
            self._oldest = time.monotonic()
        return group, size

    def _write(self, data: bytes) -> float:
        """In the journal thread: one pwrite and one fdatasync for a whole group; the
        fdatasync's duration (s)."""
        end = self._offset + len(data)
        if end > self._allocated:
            step = max(self.settings.journalPreAllocSizeMB * 1024 * 1024, len(data))
            os.posix_fallocate(self._fd, self._allocated, step)
            self._allocated += step
        written = os.pwrite(self._fd, data, self._offset)
        if written != len(data):
            raise OSError(f"short journal write: {written} of {len(data)} bytes")
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
