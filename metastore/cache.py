"""Watch-fed caches: a key (or a prefix) mirrored in memory from an etcd watch.

A cache serves reads only while its watch is live. When the watch breaks (etcd restarted,
network cut) it drops to "not synced", reads go to etcd (and fail with `Unavailable` while
etcd is away), and a background task re-reads the range and re-watches from that revision.
Writers in this process call `observe` with what they wrote, so a server reads its own writes
at once; other servers see them through their watch, normally within milliseconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Generic, TypeVar

from metastore import layer_times
from metastore.errors import Unavailable
from metastore.store import MetadataStore
from metastore.versioned import NOT_CACHED, NotCached, Versioned

log = logging.getLogger(__name__)

T = TypeVar("T")
RESYNC_BACKOFF_SECONDS = (0.1, 0.2, 0.5, 1.0)


class WatchedRange:
    """Mirror of one key (`prefix=False`) or every key under `path + "/"` (`prefix=True`)."""

    def __init__(self, store: MetadataStore, path: str, *, prefix: bool = False) -> None:
        self.store = store
        self.path = path
        self.prefix = prefix
        self._entries: dict[str, Versioned] = {}
        self._revision = 0
        self._synced = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._listeners: list[Callable[[], None]] = []

    # -- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        """Start mirroring; returns once the first snapshot is loaded or etcd is unreachable.
        From then on the store's updates of these keys start from, and write through to,
        this cache."""
        self.store.attach_cache(self)
        self._task = asyncio.create_task(self._run(), name=f"watch {self.path}")
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._synced.wait(), self.store.timeout)

    async def stop(self) -> None:
        """Stop mirroring, within the store's timeout: a task still running then (its
        cancellation lost inside a client library) is logged and left."""
        task, self._task = self._task, None
        if task is None:
            return
        task.cancel()
        done, _ = await asyncio.wait({task}, timeout=self.store.timeout)
        if not done:
            log.warning("watch on %s did not stop within %.1fs; left behind", self.path,
                        self.store.timeout)
        elif not task.cancelled():
            task.exception()  # retrieved: an error it ended with is not logged as unseen

    @property
    def synced(self) -> bool:
        return self._synced.is_set()

    def add_listener(self, listener: Callable[[], None]) -> None:
        """Call `listener()` after every change of the mirrored range."""
        self._listeners.append(listener)

    # -- reads --------------------------------------------------------------------------------

    async def entries(self) -> dict[str, Versioned]:
        """The mirrored keys; straight from etcd while the watch is not live."""
        if self.synced:
            return dict(self._entries)
        if self.prefix:
            return await self.store.get_children_values(self.path)
        found = await self.store.get(self.path)
        return {} if found is None else {self.path: found}

    async def get(self) -> Versioned | None:
        """The single mirrored key (for `prefix=False`)."""
        return (await self.entries()).get(self.path)

    def peek(self, path: str) -> Versioned | NotCached | None:
        """What the cache knows of `path` right now, without I/O; `NOT_CACHED` when the watch
        is not live or `path` is not in the mirrored range."""
        if not self.synced or not self.covers(path):
            return NOT_CACHED
        return self._entries.get(path)

    def covers(self, path: str) -> bool:
        if self.prefix:
            return path.startswith(self.path.rstrip("/") + "/")
        return path == self.path

    # -- updates ------------------------------------------------------------------------------

    def observe(self, path: str, value: bytes | None, revision: int) -> None:
        """Apply a change this process made (or a watch event), if newer than what we hold."""
        if not self.covers(path):
            return
        current = self._entries.get(path)
        if current is not None and current.revision >= revision:
            return
        if value is None:
            if current is None:
                return
            del self._entries[path]
        else:
            self._entries[path] = Versioned(value, revision)
        self._revision = max(self._revision, revision)
        self._notify()

    async def _run(self) -> None:
        failures = 0
        while True:
            try:
                await self._sync_and_watch()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # any failure means: resync from scratch
                self._synced.clear()
                delay = RESYNC_BACKOFF_SECONDS[min(failures, len(RESYNC_BACKOFF_SECONDS) - 1)]
                failures += 1
                log.info("watch on %s lost (%s); resyncing in %.1fs", self.path, exc, delay)
                await asyncio.sleep(delay)
            else:
                failures = 0

    async def _load(self) -> int:
        snapshot = await self.store.read_range(self.path, prefix=self.prefix)
        self._entries = snapshot.entries
        self._revision = snapshot.revision
        self._notify()
        return self._revision

    def _notify(self) -> None:
        for listener in self._listeners:
            listener()

    async def _sync_and_watch(self) -> None:
        revision = await self._load()
        events = await self.store.watch(
            self.path, prefix=self.prefix, start_revision=revision + 1
        )
        self._synced.set()
        try:
            async for event in events:
                started = layer_times.cpu_start()
                self.observe(event.path, event.value, event.revision)
                layer_times.cpu_stop("cache update (watch event)", started)
        finally:
            self._synced.clear()
            await events.cancel()
        raise Unavailable(f"watch on {self.path} ended")


class CachedDocument(Generic[T]):
    """A single JSON key decoded once per change, e.g. the rack map at `/bookies`."""

    def __init__(self, watched: WatchedRange, decode: Callable[[bytes | None], T]) -> None:
        self.watched = watched
        self.decode = decode
        self._memo: tuple[int, T] | None = None

    async def read(self) -> tuple[T, int]:
        """The decoded document and its revision (0 when the key does not exist)."""
        found = await self.watched.get()
        revision = 0 if found is None else found.revision
        if self._memo is None or self._memo[0] != revision or not self.watched.synced:
            self._memo = (revision, self.decode(None if found is None else found.value))
        return self._memo[1], revision
