"""A topic's log as Pulsar's managed ledger: a sequence of ledgers recorded in
`ManagedLedgerInfo` at `/managed-ledgers/{name}`.

Lifecycle (`ManagedLedgerImpl`):
- open: read the info; absent means a new managed ledger, whose key is first created with an
  empty value (as `MetaStoreImpl` does). A last ledger left OPEN by a writer that died is
  recovered (`storage.ledger.recovery`: fenced on its bookies, tail re-written, closed by
  CAS through IN_RECOVERY) and recorded with its entries and size; if it turns out empty
  it is dropped and deleted. Then a new ledger is created and appended to the info (CAS on
  the key's version).
- add: entries go to the current ledger in call order; the position is (ledger, entry).
  Before each add the current ledger is rolled over when `RolloverPolicy.is_full` says so
  (entries, size, age, with the minimum age) or when a failed bookie broke it: it is closed
  (after its adds in flight), its LedgerInfo gets entries, size and the close time, a new
  ledger is created for the namespace's policy and the info is written by CAS.
- read: any entry of a closed ledger, or of the current one up to its LAC.
- delete: close, delete every ledger's metadata, then the info key and its children.

One owner per managed ledger per process (`ManagedLedgerFactory`): the CAS on the info key
fails a second writer instead of losing an update.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Protocol

from javaformats import format_date
from storage.ledger import LedgerClient, LedgerSpec, ReadableLedger, WriteHandle
from storage.ledger.errors import LedgerError, NoSuchEntry, NoSuchLedger
from storage.ledger.metadata import managed_ledger_custom_metadata
from storage.ledger.recovery import recover
from storage.managed_ledger.config import ManagedLedgerConfig
from storage.managed_ledger.errors import (
    InvalidPosition,
    ManagedLedgerClosed,
    ManagedLedgerFenced,
)


@dataclass(frozen=True, order=True)
class Position:
    ledger_id: int
    entry_id: int

    def __str__(self) -> str:
        return f"{self.ledger_id}:{self.entry_id}"


@dataclass(frozen=True)
class LedgerInfo:
    """One ledger of the managed ledger (MLDataFormats' ManagedLedgerInfo.LedgerInfo)."""

    ledger_id: int
    entries: int = 0
    size: int = 0
    timestamp: int = 0  # ms, set when the ledger is closed


class InfoVersionConflict(Exception):
    """The info key changed since it was read (another writer, or a delete)."""


class InfoBackend(Protocol):
    """ManagedLedgerInfo at `/managed-ledgers/{name}`, CAS on the key's version."""

    async def read(self, name: str) -> tuple[list[LedgerInfo], int] | None:
        """The ledgers and the key's version; None when the key is absent."""

    async def create_empty(self, name: str) -> int:
        """Create the key with an empty value; its version (InfoVersionConflict if present)."""

    async def write(self, name: str, ledgers: list[LedgerInfo], version: int) -> int:
        """Replace if still at `version`; the new version, else InfoVersionConflict."""

    async def delete(self, name: str) -> None:
        """Delete the key and its children (cursors)."""


Clock = Callable[[], float]


class ManagedLedger:
    def __init__(
        self,
        name: str,
        config: ManagedLedgerConfig,
        ledgers: LedgerClient,
        info: InfoBackend,
        clock: Clock = time.time,
    ) -> None:
        self.name = name
        self.config = config
        self.client = ledgers
        self.info = info
        self.clock = clock
        self.ledgers: dict[int, LedgerInfo] = {}
        self._version = 0
        self._current: WriteHandle | None = None
        self._current_entries = 0
        self._current_size = 0
        self.last_ledger_created_ms = 0
        self.entries_added = 0
        self._readers: dict[int, ReadableLedger] = {}
        self._lock = asyncio.Lock()
        self._closed = False

    def _now_ms(self) -> int:
        return int(self.clock() * 1000)

    # -- open ---------------------------------------------------------------------------------

    @property
    def is_closed(self) -> bool:
        """Closed, deleted or fenced: no more adds; the factory opens it anew."""
        return self._closed

    async def open(self) -> ManagedLedger:
        found = await self.info.read(self.name)
        if found is None:
            self._version = await self.info.create_empty(self.name)
        else:
            listed, self._version = found
            self.ledgers = {info.ledger_id: info for info in listed}
            await self._recover_last()
        async with self._lock:
            await self._roll()
        return self

    async def _recover_last(self) -> None:
        if not self.ledgers:
            return
        last_id = max(self.ledgers)
        try:
            metadata = await recover(self.client, last_id)
        except NoSuchLedger:
            del self.ledgers[last_id]
            return
        if metadata.last_entry_id < 0:
            del self.ledgers[last_id]
            await self.client.delete(last_id)
            return
        self.ledgers[last_id] = replace(
            self.ledgers[last_id], entries=metadata.last_entry_id + 1, size=metadata.length,
            timestamp=self.ledgers[last_id].timestamp or self._now_ms())

    # -- add ----------------------------------------------------------------------------------

    def _spec(self) -> LedgerSpec:
        cfg = self.config
        return LedgerSpec(
            ensemble_size=cfg.ensemble_size,
            write_quorum=cfg.write_quorum,
            ack_quorum=cfg.ack_quorum,
            custom_metadata=managed_ledger_custom_metadata(self.name, cfg.recorded_affinity),
            affinity=cfg.affinity,
        )

    def _needs_roll(self) -> bool:
        current = self._current
        if current is None or current.is_broken or current.is_closed:
            return True
        age = self._now_ms() - self.last_ledger_created_ms
        return self.config.rollover.is_full(self._current_entries, self._current_size, age)

    async def _roll(self) -> None:
        """Close the current ledger (if any) and start a new one; caller holds the lock."""
        old = self._current
        if old is not None:
            closed = await old.close()
            self.ledgers[old.ledger_id] = LedgerInfo(
                old.ledger_id, closed.last_entry_id + 1, closed.length, self._now_ms())
            self._readers[old.ledger_id] = ReadableLedger(closed, self.client.bookies)
            self._current = None
        handle = await self.client.create(self._spec())
        self.ledgers[handle.ledger_id] = LedgerInfo(handle.ledger_id)
        try:
            await self._persist()
        except InfoVersionConflict as exc:
            # the key was deleted (or rewritten) elsewhere: the new ledger is nobody's
            del self.ledgers[handle.ledger_id]
            self._closed = True
            with contextlib.suppress(LedgerError):
                await handle.close()
                await self.client.delete(handle.ledger_id)
            raise ManagedLedgerFenced(self.name) from exc
        self._current = handle
        self._current_entries = 0
        self._current_size = 0
        self.last_ledger_created_ms = self._now_ms()

    async def _persist(self) -> None:
        ordered = [self.ledgers[k] for k in sorted(self.ledgers)]
        self._version = await self.info.write(self.name, ordered, self._version)

    async def add_entry(self, data: bytes) -> Position:
        """Append `data`; its position once the ack quorum acknowledged it (in order)."""
        async with self._lock:
            if self._closed:
                raise ManagedLedgerClosed(self.name)
            if self._needs_roll():
                await self._roll()
            handle = self._current
            assert handle is not None
            future = handle.add_nowait(data)
            if not future.done():  # one refused at once (EntryTooLarge, ...) takes no room
                self._current_entries += 1
                self._current_size += len(data)
        entry_id = await future
        self.entries_added += 1  # entriesAddedCounter: completed writes only
        return Position(handle.ledger_id, entry_id)

    # -- read ---------------------------------------------------------------------------------

    @property
    def current_ledger_id(self) -> int | None:
        return None if self._current is None else self._current.ledger_id

    async def _reader(self, ledger_id: int) -> ReadableLedger:
        if self._current is not None and ledger_id == self._current.ledger_id:
            return self._current
        if ledger_id not in self.ledgers:
            raise InvalidPosition(f"Ledger {ledger_id} is not part of {self.name}")
        reader = self._readers.get(ledger_id)
        if reader is None:
            reader = await self.client.open(ledger_id)
            if reader.metadata.is_closed:
                self._readers[ledger_id] = reader
        return reader

    async def read_entry(self, position: Position) -> bytes:
        reader = await self._reader(position.ledger_id)
        return (await reader.read(position.entry_id)).payload

    def positions(self) -> list[tuple[int, int]]:
        """(ledger id, entries readable) of every ledger, oldest first."""
        out = []
        for ledger_id in sorted(self.ledgers):
            if self._current is not None and ledger_id == self._current.ledger_id:
                out.append((ledger_id, self._current.last_add_confirmed + 1))
            else:
                out.append((ledger_id, self.ledgers[ledger_id].entries))
        return out

    def nth_position(self, n: int, from_latest: bool) -> Position:
        """The n-th (1-based) readable entry from the earliest or the latest one."""
        if n < 1:
            raise NoSuchEntry(-1, n, "messagePosition must be >= 1")
        ledgers = self.positions()
        if from_latest:
            ledgers = ledgers[::-1]
        remaining = n
        for ledger_id, count in ledgers:
            if remaining <= count:
                entry = count - remaining if from_latest else remaining - 1
                return Position(ledger_id, entry)
            remaining -= count
        raise NoSuchEntry(-1, n, "Could not find the message at position " + str(n))

    @property
    def number_of_entries(self) -> int:
        return sum(count for _, count in self.positions())

    @property
    def total_size(self) -> int:
        size = 0
        for ledger_id, info in self.ledgers.items():
            if self._current is not None and ledger_id == self._current.ledger_id:
                size += self._current.length
            else:
                size += info.size
        return size

    def internal_stats(self) -> dict[str, Any]:
        """The ManagedLedgerInternalStats part of PersistentTopicInternalStats."""
        current = self._current
        last = (f"{current.ledger_id}:{current.last_add_confirmed}" if current is not None
                else "-1:-1")
        # Each ledger's LedgerInfo as stored: the open one has no counts until it is closed
        # (the broker's list shows it with 0 entries and size 0; the current* fields count it).
        ledgers = []
        for ledger_id in sorted(self.ledgers):
            info = self.ledgers[ledger_id]
            is_open = current is not None and ledger_id == current.ledger_id
            ledgers.append({"ledgerId": ledger_id, "entries": 0 if is_open else info.entries,
                            "size": 0 if is_open else info.size, "offloaded": False,
                            "underReplicated": False})
        return {
            "entriesAddedCounter": self.entries_added,
            "numberOfEntries": self.number_of_entries,
            "totalSize": self.total_size,
            "currentLedgerEntries": 0 if current is None else current.last_add_confirmed + 1,
            "currentLedgerSize": 0 if current is None else current.length,
            "lastLedgerCreatedTimestamp": format_date(self.last_ledger_created_ms),
            "waitingCursorsCount": 0,
            "pendingAddEntriesCount": 0 if current is None else current.pending_adds,
            "lastConfirmedEntry": last,
            "state": "Closed" if self._closed else "LedgerOpened",
            "ledgers": ledgers,
            "cursors": {},
            "schemaLedgers": [],
            "compactedLedger": {"ledgerId": -1, "entries": -1, "size": -1, "offloaded": False,
                                "underReplicated": False},
        }

    # -- close and delete ---------------------------------------------------------------------

    async def close(self) -> None:
        async with self._lock:
            if self._closed:
                return
            self._closed = True
            current, self._current = self._current, None
            if current is not None:
                closed = await current.close()
                self.ledgers[current.ledger_id] = LedgerInfo(
                    current.ledger_id, closed.last_entry_id + 1, closed.length,
                    self._now_ms())
                with contextlib.suppress(InfoVersionConflict):  # deleted elsewhere: gone
                    await self._persist()

    async def delete(self) -> None:
        """Close, delete every ledger, then the ManagedLedgerInfo key and its cursors. A ledger
        already gone (deleted by another writer of the same store) is skipped, as Pulsar's
        `ManagedLedgerImpl.asyncDelete` skips it, closing the current one included."""
        with contextlib.suppress(NoSuchLedger):
            await self.close()
        for ledger_id in sorted(self.ledgers):
            with contextlib.suppress(NoSuchLedger):
                await self.client.delete(ledger_id)
        await self.info.delete(self.name)
