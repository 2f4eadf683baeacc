"""The etcd backend of the store seam (`metastore.backend`), as Pulsar's `EtcdMetadataStore`
maps its semantics onto etcd:

- a path is the identical UTF-8 key; children are the keys under `path + "/"`;
- a key's Pulsar version is etcd's `version - 1`; create-if-absent compares `version == 0`,
  compare-and-swap at version v compares `version == v + 1`;
- ephemeral keys are attached to the session lease, granted on first use with the session
  timeout as its TTL and kept alive here; a lease that expires is a lost session;
- a sequential key under `prefix` is numbered by an unconditional put of `prefix` itself:
  the etcd version it had before (0 when new) is the number;
- the change stream is one watch of every key from the revision after the last event seen;
  a compacted revision or a broken connection re-establishes it with a `RESYNC`.

The connection (endpoint failover, the per-call timeout, error mapping) is also what
`metastore.etcd_keys.EtcdKeys` uses for the store's operations (ranges, leases, history).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import aetcd
from aetcd import rpc

from metastore.backend import (
    CREATE,
    Change,
    ChangeKind,
    ChangeStream,
    Delete,
    Op,
    Put,
    SessionEvent,
    SessionListener,
    Stat,
    Subscribers,
    sequential_name,
)
from metastore.errors import (
    AlreadyExists,
    BadVersion,
    NotFound,
    Unavailable,
    ValueTooLarge,
)
from metastore.store_url import Endpoint

__all__ = ["CHANNEL_OPTIONS", "Endpoint", "EtcdBackend"]

log = logging.getLogger(__name__)

T = TypeVar("T")

# Reconnect quickly after etcd comes back instead of gRPC's default two-minute backoff.
CHANNEL_OPTIONS = {
    "grpc.initial_reconnect_backoff_ms": 100,
    "grpc.min_reconnect_backoff_ms": 100,
    "grpc.max_reconnect_backoff_ms": 1000,
    "grpc.keepalive_time_ms": 10_000,
    "grpc.keepalive_timeout_ms": 3_000,
    "grpc.max_receive_message_length": 64 * 1024 * 1024,
}
_UNAVAILABLE_ERRORS = (
    aetcd.ConnectionFailedError,
    aetcd.ConnectionTimeoutError,
    aetcd.InternalError,
    rpc.AioRpcError,  # raised as is by raw range requests
    asyncio.TimeoutError,
    OSError,
)


async def _refresh(client: aetcd.Client, *, lease: int) -> Any:
    return await client.refresh_lease(lease)


async def _watch_all(client: aetcd.Client, *, start_revision: int) -> Any:
    return await client.watch(b"\0", range_end=b"\0", start_revision=start_revision)


def _key(path: str) -> bytes:
    return path.encode()


def _prefix_range(path: str) -> tuple[bytes, bytes]:
    prefix = (path.rstrip("/") + "/").encode()
    return prefix, prefix[:-1] + bytes([prefix[-1] + 1])


async def at_most(operation: Awaitable[object], timeout: float) -> None:
    """Run `operation` (an aetcd watch cancel or client close) for at most `timeout`
    seconds, best effort (its errors are dropped). aetcd's cancel queues its request under
    the watcher's lock, which a stream broken mid-request can keep from ever freeing, and
    its stream shutdown awaits its request handler and ignores a `CancelledError` there, so
    a timeout delivered as a cancellation could be swallowed and leave the caller waiting on
    whatever comes next. So the operation runs as a task of its own that is waited for, not
    cancelled where it stands; still running after `timeout`, it is cancelled and left."""
    task = asyncio.ensure_future(operation)
    try:
        await asyncio.wait({task}, timeout=timeout)
    finally:
        if not task.done():
            task.cancel()
        elif not task.cancelled():
            task.exception()  # retrieved, so never logged as an error nobody saw


class EtcdBackend:
    """etcd under Pulsar's paths (see the module docstring)."""

    kind = "etcd"

    def __init__(
        self, endpoints: Sequence[Endpoint], timeout: float = 5.0, session_timeout: int = 30
    ) -> None:
        if not endpoints:
            raise ValueError("at least one etcd endpoint is required")
        self.endpoints = list(endpoints)
        self.timeout = timeout
        self.session_timeout = session_timeout
        self._current = 0
        self._etcd: aetcd.Client | None = None
        self._lease: int | None = None
        self._lease_lock = asyncio.Lock()
        self._keepalive: asyncio.Task[None] | None = None
        self._subscribers = Subscribers()
        self._watcher: asyncio.Task[None] | None = None
        self._revision = 0

    # -- connection ---------------------------------------------------------------------

    def client(self) -> aetcd.Client:
        """The etcd client of the current endpoint (created on first use)."""
        if self._etcd is None:
            endpoint = self.endpoints[self._current]
            self._etcd = aetcd.Client(
                host=endpoint.host,
                port=endpoint.port,
                timeout=self.timeout,
                options=CHANNEL_OPTIONS,
                connect_wait_timeout=int(self.timeout),
            )
        return self._etcd

    async def close_connection(self) -> None:
        """Close the client within the timeout: aetcd's close waits for its watcher's lock,
        which a watch request stuck behind a broken stream can hold for ever."""
        if self._etcd is not None:
            client, self._etcd = self._etcd, None
            await at_most(client.close(), self.timeout)

    async def failover(self) -> None:
        """Move to the next endpoint after a failure (only when there is more than one)."""
        if len(self.endpoints) > 1:
            self._current = (self._current + 1) % len(self.endpoints)
            await self.close_connection()

    async def call(
        self, make: Callable[[aetcd.Client], Awaitable[T]], timeout: float | None = None
    ) -> T:
        """Run one etcd call within the timeout (or `timeout`, when shorter), mapping
        transport errors to `Unavailable`. A caller cancelled during the call is cancelled
        when it returns: gRPC's asyncio call can swallow a cancellation that reaches it as its
        reply comes in and return the reply, which would leave the caller running on (a
        watch loop told to stop then waiting for ever on its next event)."""
        limit = self.timeout if timeout is None else min(timeout, self.timeout)
        task = asyncio.current_task()
        cancelling = task.cancelling() if task is not None else 0
        try:
            async with asyncio.timeout(limit):  # unlike wait_for, no task per call
                result = await make(self.client())
        except _UNAVAILABLE_ERRORS as exc:
            await self.failover()
            raise Unavailable(f"metadata store unavailable: {type(exc).__name__}") from exc
        except aetcd.InvalidArgumentError as exc:
            if "too large" in str(exc):
                raise ValueTooLarge() from exc
            raise
        except aetcd.ClientError as exc:  # gRPC's own limit: a request twice etcd's (a record)
            if "larger than max" in str(exc):
                raise ValueTooLarge() from exc
            raise
        if task is not None and task.cancelling() > cancelling:
            raise asyncio.CancelledError  # requested while gRPC held it (above)
        return result

    async def transaction(
        self,
        compare: list[Any],
        success: list[Any],
        failure: list[Any] | None = None,
        *,
        timeout: float | None = None,
    ) -> tuple[bool, list[Any]]:
        ok, responses = await self.call(
            lambda c: c.transaction(compare=compare, success=success, failure=failure or []),
            timeout,
        )
        return bool(ok), list(responses)

    # -- the seam -----------------------------------------------------------------------

    async def get(self, path: str) -> Stat | None:
        kv = await self.call(lambda c: c.get(_key(path)))
        if kv is None:
            return None
        self._revision = max(self._revision, int(kv.mod_revision))
        return Stat(kv.value, int(kv.version) - 1, int(kv.mod_revision), int(kv.lease))

    async def put(
        self,
        path: str,
        value: bytes,
        expected_version: int | None = None,
        *,
        ephemeral: bool = False,
    ) -> Stat:
        lease = await self.session_lease() if ephemeral else None
        [stat] = await self._apply([Put(path, value, expected_version)], lease=lease)
        assert stat is not None
        return stat

    async def create_sequential(self, prefix: str, value: bytes, *, ephemeral: bool) -> str:
        previous = await self.call(lambda c: c.put(_key(prefix), b"", prev_kv=True))
        n = 0 if previous.prev_kv is None else int(previous.prev_kv.version)
        path = sequential_name(prefix, n)
        await self.put(path, value, CREATE, ephemeral=ephemeral)
        return path

    async def delete(self, path: str, expected_version: int | None = None) -> None:
        tx = self.client().transactions
        key = _key(path)
        compare = [tx.version(key) > 0]
        if expected_version is not None:
            compare.append(tx.version(key) == expected_version + 1)
        ok, responses = await self.transaction(compare, [tx.delete(key)], [tx.get(key)])
        if not ok:
            if responses and responses[0]:
                raise BadVersion(path)
            raise NotFound(path)

    async def children(self, path: str) -> list[str]:
        start, _ = _prefix_range(path)
        result = await self.call(lambda c: c.get_prefix(start, keys_only=True))
        cut = len(start)
        return sorted({kv.key[cut:].decode().split("/", 1)[0] for kv in result})

    async def multi(self, ops: Sequence[Op]) -> list[Stat | None]:
        return await self._apply(ops)

    async def _apply(self, ops: Sequence[Op], *, lease: int | None = None) -> list[Stat | None]:
        """One transaction: a compare per conditional op, the writes, then a read of every
        key put (its new version and revision)."""
        tx = self.client().transactions
        compare: list[Any] = []
        success: list[Any] = []
        reads: list[Any] = []
        for op in ops:
            key = _key(op.path)
            expected = op.expected_version
            if isinstance(op, Delete):
                compare.append(tx.version(key) > 0)
            if expected is not None:
                compare.append(tx.version(key) == (0 if expected == CREATE else expected + 1))
            if isinstance(op, Put):
                success.append(tx.put(key, op.value, lease=lease))
                reads.append(tx.get(key))
            elif isinstance(op, Delete):
                success.append(tx.delete(key))
        ok, responses = await self.transaction(compare, success + reads)
        if not ok:
            paths = ", ".join(op.path for op in ops if not isinstance(op, Put) or
                              op.expected_version is not None)
            if len(ops) == 1:
                op = ops[0]
                if isinstance(op, Put) and op.expected_version == CREATE:
                    raise AlreadyExists(op.path)
                if isinstance(op, Delete) and not await self.get(op.path):
                    raise NotFound(op.path)
            raise BadVersion(paths)
        found = iter(responses[len(success):])
        results: list[Stat | None] = []
        for op in ops:
            if isinstance(op, Put):
                value, meta = next(found)[0]
                self._revision = max(self._revision, int(meta.mod_revision))
                results.append(
                    Stat(value, int(meta.version) - 1, int(meta.mod_revision), int(meta.lease))
                )
            else:
                results.append(None)
        return results

    # -- session ------------------------------------------------------------------------

    async def session_lease(self) -> int:
        """The session's lease (granted on first use, kept alive until `close`)."""
        async with self._lease_lock:
            if self._lease is None:
                lease = await self.call(lambda c: c.lease(self.session_timeout))
                self._lease = int(lease.id)
                if self._keepalive is None or self._keepalive.done():
                    self._keepalive = asyncio.create_task(self._keep_alive())
            return self._lease

    async def _keep_alive(self) -> None:
        connected = True
        while True:
            await asyncio.sleep(max(self.session_timeout / 3, 0.2))
            lease = self._lease
            if lease is None:
                continue
            try:
                reply = await self.call(functools.partial(_refresh, lease=lease))
            except Unavailable:
                if connected:
                    connected = False
                    self._subscribers.emit(SessionEvent.CONNECTION_LOST)
                continue
            if not connected:
                connected = True
                self._subscribers.emit(SessionEvent.RECONNECTED)
            if reply is None or int(reply.TTL) <= 0:
                await self._lose_lease(lease)

    async def _lose_lease(self, lease: int) -> None:
        async with self._lease_lock:
            if self._lease != lease:
                return
            self._lease = None
        self._subscribers.emit(SessionEvent.SESSION_LOST)
        self._subscribers.emit(SessionEvent.SESSION_REESTABLISHED)

    def add_session_listener(self, listener: SessionListener) -> None:
        self._subscribers.listeners.append(listener)

    async def session_id(self) -> int:
        return await self.session_lease()

    def last_revision(self) -> int:
        return self._revision

    async def expire_session(self) -> None:
        lease = self._lease
        if lease is None:
            return
        with contextlib.suppress(aetcd.ClientError):
            await self.call(lambda c: c.revoke_lease(lease))
        await self._lose_lease(lease)

    # -- change stream ------------------------------------------------------------------

    async def watch(self) -> ChangeStream:
        stream = self._subscribers.open_stream()
        if self._watcher is None or self._watcher.done():
            ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._watcher = asyncio.create_task(self._watch_root(ready))
            try:
                async with asyncio.timeout(self.timeout):
                    await asyncio.shield(ready)
            except TimeoutError:
                stream.close()
                raise Unavailable(
                    "metadata store unavailable: the watch was not created") from None
        return stream

    async def _watch_root(self, ready: asyncio.Future[None]) -> None:
        """Watch every key from the revision after the last event; re-establish on a break
        (with `RESYNC`), retrying until the backend closes."""
        start: int | None = None
        while self._subscribers.streams:
            try:
                if start is None:
                    header = await self.call(lambda c: c.get_prefix(b"\0", keys_only=True))
                    start = int(header.header.revision) + 1
                watch = await self.call(functools.partial(_watch_all, start_revision=start))
            except (Unavailable, aetcd.ClientError, aetcd.WatchTimeoutError):
                await asyncio.sleep(0.2)
                continue
            if not ready.done():
                ready.set_result(None)
            else:
                self._subscribers.publish(Change(ChangeKind.RESYNC, "/"))
            try:
                async for event in watch:
                    kv = event.kv
                    start = int(kv.mod_revision) + 1
                    if event.kind == aetcd.EventKind.DELETE:
                        kind = ChangeKind.DELETED
                    elif int(kv.version) == 1:
                        kind = ChangeKind.CREATED
                    else:
                        kind = ChangeKind.MODIFIED
                    self._subscribers.publish(Change(kind, kv.key.decode()))
            except aetcd.RevisionCompactedError:
                start = None
            except aetcd.ClientError:
                pass
            finally:
                await at_most(watch.cancel(), self.timeout)
            await asyncio.sleep(0.1)

    async def close(self) -> None:
        self._subscribers.close_streams()
        for task in (self._watcher, self._keepalive):
            if task is not None:
                # within the timeout: the watcher can be inside aetcd's stream shutdown, which
                # swallows the cancellation (`at_most`); a task that outlives it is left
                task.cancel()
                await at_most(task, self.timeout)
        self._watcher = self._keepalive = None
        lease, self._lease = self._lease, None
        if lease is not None:
            with contextlib.suppress(Exception):
                await self.call(lambda c: c.revoke_lease(lease))
        await self.close_connection()
