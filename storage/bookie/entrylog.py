"""Entry logs: entries of all ledgers appended interleaved into `<hex id>.log` files.

Commit point: the `fdatasync` at the end of `append_batch`; only then are the returned
Locations handed to the index. Records are `format.encode_record` (length + CRC32C + body), so
`scan` can rebuild the index from the logs alone and stop at a torn tail. A read checks the
entry's digest and its ledger and entry ids before returning it (`format.check_entry`).
A new log is started on every open and after `logSizeLimit` bytes (BookKeeper's setting).
"""

from __future__ import annotations

import contextlib
import os
import struct
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from storage.bookie.addpath import WriteCache, frame_records
from storage.bookie.errors import CorruptEntry
from storage.bookie.fileio import pwrite_all
from storage.bookie.format import (
    RECORD_HEADER,
    RECORD_HEADER_LEN,
    check_entry,
    decode_record,
)
from storage.runtime import hand_over_gil

_LOCATION = struct.Struct(">IQI")
DEFAULT_LOG_SIZE_LIMIT = 1024 * 1024 * 1024
WRITE_CHUNK = 1024 * 1024  # bytes per pwrite + fdatasync of a batch (see append_batch)
HAND_OVER_EVERY = 128  # records handled between two hand_over_gil() (~100 µs of work)

Framer = Callable[[int, int, int, int, int, int], tuple[int, int, bytes, list[bytes]]]
"""Records [first, stop) of a source framed from `offset` of log `log_id` as `frame_records`
frames them: (first, stop, log_id, offset, limit, chunk_end) -> (next, offset, run, locations)."""


@dataclass(frozen=True, slots=True)
class Location:
    """Where a record body sits: log file id, byte offset of the body, body size."""

    log_id: int
    offset: int
    size: int

    def encode(self) -> bytes:
        return _LOCATION.pack(self.log_id, self.offset, self.size)

    @classmethod
    def decode(cls, raw: bytes) -> Location:
        return cls(*_LOCATION.unpack(raw))


def log_ids(directory: Path) -> list[int]:
    ids = []
    for path in directory.glob("*.log"):
        with contextlib.suppress(ValueError):
            ids.append(int(path.stem, 16))
    return sorted(ids)


class EntryLogger:
    def __init__(self, directory: Path, log_size_limit: int = DEFAULT_LOG_SIZE_LIMIT) -> None:
        self.directory = directory
        self.log_size_limit = log_size_limit
        directory.mkdir(parents=True, exist_ok=True)
        self._read_fds: dict[int, int] = {}
        self._lock = threading.Lock()  # guards _read_fds between the loop and the flush thread
        existing = log_ids(directory)
        self._log_id = (existing[-1] + 1) if existing else 1
        self._fd = -1
        self._offset = 0

    def _roll(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._log_id += 1
        path = self.directory / f"{self._log_id:x}.log"
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        self._offset = 0
        dir_fd = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)

    def append_batch(self, bodies: list[bytes]) -> list[Location]:
        """`append_encoded`, with the locations decoded."""
        return [Location.decode(raw) for raw in self.append_encoded(bodies)]

    def append_encoded(self, bodies: list[bytes]) -> list[bytes]:
        """Append records and fdatasync them; their locations, encoded (`Location.encode`);
        blocking, run it off the event loop. The records are framed and their locations
        packed in compiled code (`addpath.frame_records`, HAND_OVER_EVERY at a time, joined
        into one buffer each): a checkpoint holds the GIL here, which the event loop waits for.

        Written and synced in WRITE_CHUNK pieces rather than as one buffer: a checkpoint
        holds no second copy of the write cache, and the journal's own fdatasync (which on
        ext4 can wait for other files' newly allocated data) never waits behind a whole
        checkpoint's worth of dirty pages. The last sync is the commit point, as before.
        A log that reaches `logSizeLimit` is synced and the next one started mid-batch (as
        upstream's entry logger rolls per add), so a large checkpoint never makes one
        oversized log that compaction cannot reclaim in parts."""
        return self._append([(len(bodies), partial(frame_records, bodies))])

    def append_cache(self, cache: WriteCache, bodies: list[bytes]) -> tuple[list[bytes],
                                                                             list[bytes]]:
        """`append_encoded` of a write-cache half's entries sorted by (ledger, entry)
        (`WriteCache.sort`, framed from its blocks by `WriteCache.frame_sorted`), then of
        `bodies`, in one run with one commit point: (the entries' index keys, the locations
        of the entries and then of the bodies)."""
        keys: list[bytes] = []

        def frame_cache(first: int, stop: int, log_id: int, offset: int, limit: int,
                        chunk_end: int) -> tuple[int, int, bytes, list[bytes]]:
            return cache.frame_sorted(first, stop, log_id, offset, limit, chunk_end, keys)

        count = cache.sort()
        locations = self._append([(count, frame_cache),
                                  (len(bodies), partial(frame_records, bodies))])
        return keys, locations

    def _append(self, sources: list[tuple[int, Framer]]) -> list[bytes]:
        """The records of each source in turn ((count, framer of records [first, stop))),
        written and synced as `append_encoded` describes."""
        if not any(count for count, _ in sources):
            return []
        if self._fd < 0 or self._offset >= self.log_size_limit:
            self._roll()
        log_id = self._log_id
        locations: list[bytes] = []
        parts: list[bytes] = []
        start = offset = self._offset
        limit = self.log_size_limit
        for count, frame in sources:
            index = 0
            while index < count:
                if offset >= limit:
                    if parts:
                        self._write_synced(parts, start)
                        parts = []
                    self._roll()
                    log_id, start = self._log_id, 0
                    offset = 0
                index, offset, run, placed = frame(
                    index, index + HAND_OVER_EVERY, log_id, offset, limit, start + WRITE_CHUNK,
                )
                parts.append(run)
                locations += placed
                if offset - start >= WRITE_CHUNK:
                    self._write_synced(parts, start)
                    parts, start = [], offset
                hand_over_gil()
        if parts:
            self._write_synced(parts, start)
        self._offset = offset
        return locations

    def _write_synced(self, parts: list[bytes], offset: int) -> None:
        pwrite_all(self._fd, parts, offset, "entry-log")  # not joined: no second copy
        os.fdatasync(self._fd)

    def _reader(self, log_id: int) -> int:
        with self._lock:
            fd = self._read_fds.get(log_id)
            if fd is None:
                fd = os.open(self.directory / f"{log_id:x}.log", os.O_RDONLY)
                self._read_fds[log_id] = fd
            return fd

    def read(self, location: Location, ledger_id: int, entry_id: int) -> bytes:
        """The entry at `location`, checked; CorruptEntry if it does not verify."""
        try:
            fd = self._reader(location.log_id)
            data = os.pread(fd, location.size, location.offset)
        except OSError as exc:
            raise CorruptEntry(f"cannot read {location}: {exc}") from exc
        if len(data) != location.size:
            raise CorruptEntry(f"short read at {location}")
        check_entry(data, ledger_id, entry_id)
        return data

    def scan(self, log_id: int) -> Iterator[tuple[Location, bytes]]:
        """Every valid record of one log, stopping at the first one that does not check."""
        data = (self.directory / f"{log_id:x}.log").read_bytes()
        offset = 0
        while True:
            found = decode_record(data, offset)
            if found is None:
                return
            body, end = found
            yield Location(log_id, offset + RECORD_HEADER_LEN, len(body)), bytes(body)
            offset = end

    # -- garbage collection and compaction (storage.bookie.gc, storage.bookie.compaction) ------

    @property
    def writable_from(self) -> int:
        """Logs with a smaller id are complete and never written again (this is the id of
        the log being appended to, or of the next one)."""
        return self._log_id

    def path(self, log_id: int) -> Path:
        return self.directory / f"{log_id:x}.log"

    def remove(self, log_id: int) -> None:
        """Delete a complete log (never the current one) durably. Call it where reads run
        (the event loop), so no read is between finding a location and reading it."""
        if log_id >= self._log_id:
            raise ValueError(f"entry log {log_id:x} is being written")
        with self._lock:
            fd = self._read_fds.pop(log_id, None)
        if fd is not None:
            os.close(fd)
        self.path(log_id).unlink(missing_ok=True)
        dir_fd = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        with self._lock:
            for fd in self._read_fds.values():
                os.close(fd)
            self._read_fds.clear()


__all__ = ["RECORD_HEADER", "EntryLogger", "Location", "log_ids"]
