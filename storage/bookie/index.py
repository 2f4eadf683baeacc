"""The index: (ledger, entry) -> Location, per-ledger state, and the checkpoint mark, in LMDB.

Commit point: one LMDB write transaction per checkpoint (`commit`) holding the new locations,
the ledger states and the journal mark together, so the mark never runs ahead of the index.

Keys follow DbLedgerStorage's location index: ledgerId (8 B big-endian) ‖ entryId (8 B), so the
last entry of a ledger is a floor lookup. LMDB was chosen by measurement (BENCHMARKS.md, "Bookie
index store"): on this machine it did 314 k point gets/s and 379 k last-entry lookups/s against
rocksdict's 255 k / 189 k and SQLite's 71 k / 95 k, with no tuning and one mmap'd file.

The index holds nothing that the entry logs do not: `rebuild` derives it from them (entries and
the master-key and fence meta records that every checkpoint also appends there).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import lmdb

from storage.bookie.entrylog import HAND_OVER_EVERY, EntryLogger, Location, log_ids
from storage.bookie.errors import CorruptEntry
from storage.bookie.format import (
    METAENTRY_ID_FENCE_KEY,
    METAENTRY_ID_LEDGER_KEY,
    RECORD_HEADER_LEN,
    entry_ids,
    parse_master_key_record,
    verify_entry,
)
from storage.bookie.journal import ZERO_MARK, LogMark
from storage.runtime import hand_over_gil

_KEY = struct.Struct(">QQ")
_LEDGER = struct.Struct(">Q")
_LOCATION_SIZE = struct.Struct(">IQI")  # Location's encoding: log id, offset, size
_MARK_KEY = b"lastMark"
MAP_SIZE = 64 * 1024 * 1024 * 1024


@dataclass(frozen=True)
class LedgerState:
    master_key: bytes
    fenced: bool = False

    def encode(self) -> bytes:
        return bytes([1 if self.fenced else 0]) + self.master_key

    @classmethod
    def decode(cls, raw: bytes) -> LedgerState:
        return cls(master_key=bytes(raw[1:]), fenced=raw[0] == 1)


class Index:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self.existed = (directory / "data.mdb").exists()
        self.env = lmdb.open(
            str(directory), map_size=MAP_SIZE, max_dbs=4, readahead=False, metasync=True, sync=True
        )
        self._locations = self.env.open_db(b"locations")
        self._ledgers = self.env.open_db(b"ledgers")
        self._meta = self.env.open_db(b"meta")

    def close(self) -> None:
        self.env.close()

    # -- reads ----------------------------------------------------------------------------------

    def get(self, ledger_id: int, entry_id: int) -> Location | None:
        with self.env.begin(db=self._locations) as tx:
            raw = tx.get(_KEY.pack(ledger_id, entry_id))
        return None if raw is None else Location.decode(raw)

    def last_entry(self, ledger_id: int) -> int | None:
        with self.env.begin(db=self._locations) as tx:
            cursor = tx.cursor()
            if cursor.set_range(_KEY.pack(ledger_id + 1, 0)):
                found = cursor.prev()
            else:
                found = cursor.last()
            if not found:
                return None
            ledger, entry = _KEY.unpack(cursor.key())
        return entry if ledger == ledger_id else None

    def entry_ids(self, ledger_id: int) -> list[int]:
        """The ledger's entry ids in the index, ascending (one range scan of its keys)."""
        found: list[int] = []
        unpack = _KEY.unpack
        with self.env.begin(db=self._locations) as tx:
            cursor = tx.cursor()
            if not cursor.set_range(_KEY.pack(ledger_id, 0)):
                return found
            for key in cursor.iternext(keys=True, values=False):
                if len(key) != _KEY.size:
                    break
                ledger, entry = unpack(key)
                if ledger != ledger_id:
                    break
                found.append(entry)
        return found

    def ledgers(self) -> dict[int, LedgerState]:
        with self.env.begin(db=self._ledgers) as tx:
            return {_LEDGER.unpack(key)[0]: LedgerState.decode(value) for key, value in tx.cursor()}

    def mark(self) -> LogMark:
        with self.env.begin(db=self._meta) as tx:
            raw = tx.get(_MARK_KEY)
        return ZERO_MARK if raw is None else LogMark.decode(raw)

    # -- the commit point -----------------------------------------------------------------------

    def commit(
        self,
        locations: Iterable[tuple[int, int, Location]],
        ledgers: dict[int, LedgerState],
        mark: LogMark | None,
    ) -> None:
        """Store locations, ledger states and the mark in one durable transaction."""
        self.commit_encoded(
            [(_KEY.pack(lid, eid), location.encode()) for lid, eid, location in locations],
            ledgers, mark,
        )

    @staticmethod
    def key(ledger_id: int, entry_id: int) -> bytes:
        """The location index's key of an entry (`commit_encoded`)."""
        return _KEY.pack(ledger_id, entry_id)

    def commit_encoded(
        self,
        locations: Iterable[tuple[bytes, bytes]],
        ledgers: dict[int, LedgerState],
        mark: LogMark | None,
    ) -> None:
        """`commit` of (`key`, `Location.encode`) pairs: the checkpoint's form, whose puts
        are one C call (`putmulti`) rather than a Python call per entry."""
        with self.env.begin(write=True) as tx:
            tx.cursor(db=self._locations).putmulti(locations)
            for ledger_id, state in ledgers.items():
                tx.put(_LEDGER.pack(ledger_id), state.encode(), db=self._ledgers)
            if mark is not None and mark > self._mark_in(tx):
                tx.put(_MARK_KEY, mark.encode(), db=self._meta)

    # -- garbage collection and compaction (storage.bookie.gc, storage.bookie.compaction) ------

    def locations_of(self, keys: list[tuple[int, int]]) -> list[Location | None]:
        """The current location of each (ledger, entry), read in one transaction."""
        with self.env.begin(db=self._locations) as tx:
            found = [tx.get(_KEY.pack(ledger_id, entry_id)) for ledger_id, entry_id in keys]
        return [None if raw is None else Location.decode(raw) for raw in found]

    def log_usage(self) -> dict[int, dict[int, int]]:
        """Live bytes by entry log and ledger (record header included): what the locations
        point at now, so an entry written again elsewhere or deleted no longer counts."""
        usage: dict[int, dict[int, int]] = {}
        unpack_key, unpack_location = _KEY.unpack, _LOCATION_SIZE.unpack
        with self.env.begin(db=self._locations) as tx:
            for count, (key, value) in enumerate(tx.cursor().iternext(keys=True, values=True)):
                if not count % HAND_OVER_EVERY:
                    hand_over_gil()
                ledger_id = unpack_key(key)[0]
                log_id, _, size = unpack_location(value)
                per_log = usage.get(log_id)
                if per_log is None:
                    per_log = usage[log_id] = {}
                per_log[ledger_id] = per_log.get(ledger_id, 0) + size + RECORD_HEADER_LEN
        return usage

    def delete_ledgers(self, ledger_ids: Iterable[int]) -> int:
        """Remove ledgers' states and every location of their entries in one durable
        transaction (the entry logs keep the bytes until compaction); returns entries removed."""
        removed = 0
        with self.env.begin(write=True) as tx:
            cursor = tx.cursor(db=self._locations)
            for ledger_id in ledger_ids:
                tx.delete(_LEDGER.pack(ledger_id), db=self._ledgers)
                found = cursor.set_range(_KEY.pack(ledger_id, 0))
                while found:
                    key = cursor.key()
                    if len(key) != _KEY.size or _KEY.unpack(key)[0] != ledger_id:
                        break
                    removed += 1
                    found = cursor.delete()  # and move to the next key
        return removed

    def relocate(self, moves: Iterable[tuple[int, int, Location, Location]]) -> int:
        """Point entries at their copies, each only if the index still points at the copied
        location (an entry written again or a ledger deleted meanwhile is left alone); one
        durable transaction; returns the entries moved."""
        moved = 0
        with self.env.begin(write=True, db=self._locations) as tx:
            for count, (ledger_id, entry_id, old, new) in enumerate(moves, 1):
                if not count % HAND_OVER_EVERY:
                    hand_over_gil()
                key = _KEY.pack(ledger_id, entry_id)
                current = tx.get(key)
                if current is not None and bytes(current) == old.encode():
                    tx.put(key, new.encode())
                    moved += 1
        return moved

    def _mark_in(self, tx: lmdb.Transaction) -> LogMark:
        raw = tx.get(_MARK_KEY, db=self._meta)
        return ZERO_MARK if raw is None else LogMark.decode(bytes(raw))

    def rebuild(self, logger: EntryLogger) -> int:
        """Derive every location and ledger state from the entry logs; returns entries seen.
        The mark is left at zero, so the whole remaining journal replays on top."""
        with self.env.begin(write=True) as tx:
            tx.drop(self._locations, delete=False)
            tx.drop(self._ledgers, delete=False)
            tx.drop(self._meta, delete=False)
        locations: list[tuple[int, int, Location]] = []
        ledgers: dict[int, LedgerState] = {}
        for log_id in log_ids(logger.directory):
            for location, body in logger.scan(log_id):
                ledger_id, entry_id = entry_ids(body)
                if entry_id == METAENTRY_ID_LEDGER_KEY:
                    old = ledgers.get(ledger_id)
                    fenced = old.fenced if old else False
                    ledgers[ledger_id] = LedgerState(parse_master_key_record(body), fenced)
                elif entry_id == METAENTRY_ID_FENCE_KEY:
                    old = ledgers.get(ledger_id)
                    ledgers[ledger_id] = LedgerState(old.master_key if old else b"", True)
                elif entry_id >= 0:
                    try:
                        verify_entry(body, ledger_id, entry_id)
                    except CorruptEntry:
                        continue
                    locations.append((ledger_id, entry_id, location))
        self.commit(locations, ledgers, None)
        return len(locations)
