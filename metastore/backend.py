"""The store seam: Pulsar's `MetadataStore` semantics, implemented once per store.

A backend maps Pulsar's metadata paths onto one store and offers only what Pulsar's own
`MetadataStore` offers (`pulsar-metadata`: `ZKMetadataStore`, `EtcdMetadataStore`):

- `get` a value with its **version** (Pulsar's: the ZooKeeper znode version; etcd's
  `version - 1`, so 0 right after creation and +1 per write on both) and its **revision**
  (the store-wide order of the write that made it: etcd `mod_revision`, ZooKeeper `mzxid`);
- `put` unconditionally, with an expected version (compare-and-swap), or with `CREATE`
  (only if absent, Pulsar's expected version -1);
- `delete`, optionally at an expected version;
- `children`: the names one level below a path, sorted;
- `multi`: puts, deletes and version checks applied atomically (an etcd transaction, a
  ZooKeeper `multi`), all or nothing;
- ephemeral entries tied to the backend's session (an etcd lease kept alive by the
  backend, the ZooKeeper session), and `SessionEvent`s when the session is lost or renewed;
- sequential entries numbered as Pulsar numbers them on each store (`create_sequential`);
- one change stream (`watch`): an etcd prefix watch, or a ZooKeeper persistent recursive
  watch on the root (3.6+). Changes carry the path only, as Pulsar's `Notification` does;
  a `RESYNC` change means events may have been missed and readers must re-read.

Group commit, caches, change history, leases and locks sit above this seam.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

__all__ = [
    "CREATE",
    "Change",
    "ChangeKind",
    "ChangeStream",
    "Check",
    "Delete",
    "Op",
    "Put",
    "SessionEvent",
    "SessionListener",
    "Stat",
    "StoreBackend",
    "Subscribers",
    "sequential_name",
]

CREATE = -1
"""Expected version meaning "only if absent" (Pulsar's -1)."""


def sequential_name(prefix: str, n: int) -> str:
    """A sequential entry's path as both stores spell it: ten zero-padded digits."""
    return f"{prefix}{n:010d}"


@dataclass(frozen=True)
class Stat:
    """A stored value, its Pulsar version and the revision of the write that made it;
    `owner`: the session holding it (etcd lease, ZooKeeper session id), 0 if persistent."""

    value: bytes
    version: int
    revision: int
    owner: int = 0

    @property
    def ephemeral(self) -> bool:
        return self.owner != 0


@dataclass(frozen=True)
class Put:
    """Write `value`; with `expected_version`, only if the key is at it (`CREATE`: absent)."""

    path: str
    value: bytes
    expected_version: int | None = None


@dataclass(frozen=True)
class Delete:
    """Delete the key; with `expected_version`, only if it is at that version."""

    path: str
    expected_version: int | None = None


@dataclass(frozen=True)
class Check:
    """The key is at `expected_version` (`CREATE`: the key is absent); writes nothing."""

    path: str
    expected_version: int


Op = Put | Delete | Check


class ChangeKind(enum.Enum):
    CREATED = "created"
    MODIFIED = "modified"
    DELETED = "deleted"
    RESYNC = "resync"  # the stream was re-established: anything may have changed


@dataclass(frozen=True)
class Change:
    """A change of one path (Pulsar's `Notification`); `path` is "/" for `RESYNC`."""

    kind: ChangeKind
    path: str


class SessionEvent(enum.Enum):
    """Pulsar's `SessionEvent`s, in its names."""

    CONNECTION_LOST = "ConnectionLost"
    RECONNECTED = "Reconnected"
    SESSION_LOST = "SessionLost"  # every ephemeral entry of the session is gone
    SESSION_REESTABLISHED = "SessionReestablished"  # a new session: ephemerals to re-create


SessionListener = Callable[[SessionEvent], None]


class ChangeStream:
    """One subscriber's view of a backend's change stream: a queue the backend feeds
    (`publish`, on the event loop), iterated until `close()` or the backend closes."""

    def __init__(self, on_close: Callable[[ChangeStream], None]) -> None:
        self._queue: asyncio.Queue[Change | None] = asyncio.Queue()
        self._on_close = on_close
        self.closed = False
        # The paths this subscriber wants (None: all); `RESYNC` and the end always pass.
        self.accepts: Callable[[str], bool] | None = None

    def publish(self, change: Change | None) -> None:
        """Queue `change` (None: the stream ends)."""
        if self.closed:
            return
        if (self.accepts is not None and change is not None
                and change.kind is not ChangeKind.RESYNC and not self.accepts(change.path)):
            return
        self._queue.put_nowait(change)

    async def __aiter__(self) -> AsyncIterator[Change]:
        while True:
            change = await self._queue.get()
            if change is None:
                return
            yield change

    async def next(self, timeout: float) -> Change | None:
        """The next change within `timeout` seconds (None: the stream ended)."""
        async with asyncio.timeout(timeout):
            return await self._queue.get()

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._queue.put_nowait(None)
            self._on_close(self)


class Subscribers:
    """A backend's session listeners and open change streams, fed on the event loop."""

    def __init__(self) -> None:
        self.listeners: list[SessionListener] = []
        self.streams: list[ChangeStream] = []

    def emit(self, event: SessionEvent) -> None:
        for listener in list(self.listeners):
            listener(event)

    def publish(self, change: Change) -> None:
        for stream in list(self.streams):
            stream.publish(change)

    def wanted(self, path: str) -> bool:
        """Whether an open stream wants a change of `path` (callable from any thread: a
        stream's `accepts` is a pure function of the path). A stream opened before a read
        is sent sees every change the read does not: the change's notification is taken
        after the read's reply, so after the stream was opened."""
        for stream in tuple(self.streams):
            accepts = stream.accepts
            if accepts is None or accepts(path):
                return True
        return False

    def open_stream(self) -> ChangeStream:
        stream = ChangeStream(self.streams.remove)
        self.streams.append(stream)
        return stream

    def close_streams(self) -> None:
        for stream in list(self.streams):
            stream.close()


class StoreBackend(Protocol):
    """One store under Pulsar's paths. Every call fails within the backend's timeout with
    `metastore.errors.Unavailable` when the store cannot be reached; a write whose call
    failed after its request was sent may still have been applied (`metastore.store` says
    how the store finds out on etcd). `NotFound`, `BadVersion` and `AlreadyExists` mean
    what they mean in Pulsar."""

    kind: str  # "etcd" or "zookeeper"

    async def get(self, path: str) -> Stat | None:
        """The key's value and version, or None when it does not exist."""

    async def put(
        self,
        path: str,
        value: bytes,
        expected_version: int | None = None,
        *,
        ephemeral: bool = False,
    ) -> Stat:
        """Write `value` (tied to the session when `ephemeral`); with `expected_version`,
        only if the key is at it (`BadVersion`), `CREATE`: only if absent (`AlreadyExists`).
        Returns what was written, with its new version."""

    async def create_sequential(self, prefix: str, value: bytes, *, ephemeral: bool) -> str:
        """Create `prefix` + a ten-digit sequence number; the path created."""

    async def delete(self, path: str, expected_version: int | None = None) -> None:
        """Delete the key: `NotFound` when absent, `BadVersion` when not at the version."""

    async def children(self, path: str) -> list[str]:
        """Names of the keys one level below `path`, sorted ([] when none)."""

    async def multi(self, ops: Sequence[Op]) -> list[Stat | None]:
        """Apply every op atomically, or none (`BadVersion` naming the paths); per op, the
        Stat written by a `Put`, None for a `Delete` or `Check`. A path is written at most
        once per batch; every condition (a `Check`, an expected version) is judged on the
        state before the batch."""

    async def watch(self) -> ChangeStream:
        """Every change under the root from now on, in the store's order, with `RESYNC`
        whenever the stream had to be re-established; established when this returns."""

    def add_session_listener(self, listener: SessionListener) -> None:
        """Call `listener` (on the event loop) with every `SessionEvent`."""

    async def session_id(self) -> int:
        """The current session (an etcd lease, a ZooKeeper session id; granted on first
        use); what `Stat.owner` holds for its ephemeral entries."""

    def last_revision(self) -> int:
        """The store revision of the latest answer this backend received."""

    async def expire_session(self) -> None:
        """End the session as the store would on a timeout (ephemerals vanish); a new one
        is then established. For failure drills and tests."""

    async def close(self) -> None:
        """End the session (its ephemeral entries vanish) and the connection."""
