"""Connections to bookies, one per bookie id, shared by every ledger of the client.

The ledger client only speaks BookKeeper's protocol through `storage.bookie`'s client
connection; it never touches a bookie's files, so a bookie on another machine is the same code
path. A bookie id is `host:port` (Pulsar's default `BookieId`), which is also where it listens.
A connection that broke is dropped and the next request to that bookie dials again; once the
pool is closed nothing dials (`ClientClosed`), as upstream's closed bookie client.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, Protocol

from storage.bookie.availability import EntryAvailability
from storage.bookie.protocol import MAX_FRAME_SIZE
from storage.bookie_client import AckListener
from storage.ledger.errors import ClientClosed


class BookieConnection(Protocol):
    """What the ledger client needs of one bookie connection."""

    async def add(
        self, ledger_id: int, entry_id: int, master_key: bytes, packaged: bytes, *,
        recovery: bool = False,
    ) -> None:
        """Store a packaged entry; returns once the bookie acknowledged it durable.
        `recovery`: a recovery add (RECOVERY_ADD), accepted on a fenced ledger."""

    timeout: float
    """Seconds an answer may take; a writer fails the copies it sent with `send_add` that
    go unanswered longer (BookieTimeout)."""

    def listen_adds(self, ledger_id: int, listener: AckListener) -> None:
        """Answers to the adds of `ledger_id` sent with `send_add` go to `listener`: its ring
        counts the acknowledgements, its callback gets each read's error answers and the
        `ConnectionLost` that ends the connection (the ledger's hot path: no task, future or
        callback object per copy)."""

    def unlisten_adds(self, ledger_id: int, listener: AckListener) -> None: ...

    def send_add(self, frame: bytes) -> None:
        """Send an add request frame (`encode_add_frame`) answered to the listener of its
        ledger; ConnectionLost when the connection is gone."""

    async def read(
        self, ledger_id: int, entry_id: int, *, fence: bool = False,
        master_key: bytes | None = None,
    ) -> bytes:
        """The packaged entry as stored (entry id -1: the bookie's last entry); `fence`
        fences the ledger first (needs the master key)."""

    async def entries_of_ledger(self, ledger_id: int) -> EntryAvailability:
        """The entries of the ledger the bookie holds (V3 GET_LIST_OF_ENTRIES_OF_LEDGER);
        NoLedger when it does not know the ledger."""

    @property
    def connected(self) -> bool:
        """False once the connection broke or was closed."""

    async def close(self) -> None: ...


Connector = Callable[[str], Coroutine[Any, Any, BookieConnection]]


def split_bookie_id(bookie_id: str) -> tuple[str, int]:
    host, _, port = bookie_id.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"bookie id {bookie_id!r} is not host:port")
    return host, int(port)


class BookiePool:
    """Lazily dialled connections by bookie id."""

    def __init__(self, connect: Connector, max_frame: int = MAX_FRAME_SIZE) -> None:
        self._connect = connect
        # nettyMaxFrameSizeBytes of the connections `connect` makes: an add whose frame
        # would be longer is refused before it is sent (`WriteHandle.add_nowait`)
        self.max_frame = max_frame
        self._connections: dict[str, BookieConnection] = {}
        self._dialling: dict[str, asyncio.Task[BookieConnection]] = {}
        self._closed = False

    @property
    def closed(self) -> bool:
        """True once `close` began: the connections' failures from then on are the pool's
        own doing, not the bookies'."""
        return self._closed

    def cached(self, bookie_id: str) -> BookieConnection | None:
        """The open connection to `bookie_id`, if there is one (no await on the hot path)."""
        found = self._connections.get(bookie_id)
        return found if found is not None and found.connected else None

    async def get(self, bookie_id: str) -> BookieConnection:
        if self._closed:
            raise ClientClosed()
        found = self._connections.get(bookie_id)
        if found is not None and found.connected:
            return found
        task = self._dialling.get(bookie_id)
        if task is None:
            task = asyncio.create_task(self._connect(bookie_id), name=f"dial {bookie_id}")
            self._dialling[bookie_id] = task
        try:
            connection = await asyncio.shield(task)
        finally:
            if self._dialling.get(bookie_id) is task and task.done():
                del self._dialling[bookie_id]
        if self._closed:  # closed while dialling: this one is not kept
            await connection.close()
            raise ClientClosed()
        self._connections[bookie_id] = connection
        return connection

    async def close(self) -> None:
        self._closed = True
        connections, self._connections = self._connections, {}
        for connection in connections.values():
            await connection.close()
