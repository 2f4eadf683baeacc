"""The ZooKeeper backend of the store seam (`metastore.backend`), as Pulsar's
`ZKMetadataStore` maps its semantics onto ZooKeeper:

- a path is the znode of the same name under the chroot; a write creates missing parents;
- versions are znode versions, the revision is the znode's `mzxid`;
- ephemeral znodes belong to this client's session; sequential znodes are ZooKeeper's own
  (ten-digit suffix);
- `multi` is one ZooKeeper `multi`; a `Check` for absence is a create and a delete of the
  same znode inside it (fails with the rest when the znode exists);
- the change stream is one persistent recursive watch on the root (`addWatch`, ZooKeeper
  3.6+), added again with a `RESYNC` after every reconnection (the server forgets a
  connection's watches, and events while disconnected are not replayed).

The client is kazoo (maintained; sessions, reconnection and `multi`): its calls are made
with its asynchronous API and completed on the event loop by `metastore.kazoo_bridge`
(straight from kazoo's connection thread, in the order ZooKeeper answered), so nothing here
blocks the loop. A notification that arrives while a `multi` of this process writing the
same path is in flight (one with a `setData`, whose reply carries the multi's zxid), and
before its reply, was caused by that write or an earlier one
(ZooKeeper sends a session's notifications and replies in zxid order, a write's
notifications before its reply): when the write succeeds, the path's state as of the
notification is the one written, and a watch need not read it again (`state_after`).
kazoo does not know `addWatch` (opcode 106), so
`_AddWatch` is that request in ZooKeeper's jute encoding, queued like kazoo's own, and the
notifications it produces (which kazoo would drop as unregistered) are taken from kazoo's
reader before its own dispatch; one that no open stream wants (the change history's record
znodes, one per recorded write, while nothing reads the history) stops there. A write's
call that fails is `Unanswered` when its request may have reached ZooKeeper (kazoo took it
from its queue to send it, or the call timed out with it queued): kazoo's sender is watched
for that, the third place that reaches into its internals here
(`metastore.kazoo_bridge.loop_inbox` wraps its connection loop to hold a burst's results
until it is read whole). Otherwise (never sent: kazoo failed it still queued, as when the
session was already lost) the call is `Unavailable` and nothing was written.

The fourth and last reach into kazoo: the answer to a connection's session request is waited
for at most the store timeout, not kazoo's own connect timeout (from the session timeout, as
ZooKeeper's Java client has it). ZooKeeper 3.8 leaves a session request that reaches it while
it starts (listening, its data not loaded yet) open and unanswered, and a client waiting out
that timeout on it is without ZooKeeper for as long after a restart (16-19 s measured with a
60 s session timeout). A server that answers at all answers in milliseconds, and the next
attempt, on a new connection, is served.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import struct
import threading
import weakref
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from kazoo.client import KazooClient
from kazoo.exceptions import (
    BadVersionError,
    ConnectionClosedError,
    ConnectionLoss,
    KazooException,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    OperationTimeoutError,
    RolledBackError,
    SessionExpiredError,
)
from kazoo.protocol.serialization import Connect, Watch, write_string
from kazoo.protocol.states import KazooState, ZnodeStat

from metastore.backend import (
    CREATE,
    Change,
    ChangeKind,
    ChangeStream,
    Check,
    Delete,
    Op,
    Put,
    SessionEvent,
    SessionListener,
    Stat,
    Subscribers,
)
from metastore.errors import (
    AlreadyExists,
    BadVersion,
    MetastoreError,
    NotFound,
    Unanswered,
    Unavailable,
)
from metastore.kazoo_bridge import InlineCallbackHandler, LoopInbox, loop_inbox

__all__ = ["ZooKeeperBackend", "ZooKeeperChange"]

log = logging.getLogger(__name__)

_PARENTS_KNOWN = 10_000  # parent znodes known to exist (not made again before each multi)
_PERSISTENT_RECURSIVE = 1  # ZooKeeper's AddWatchMode
_EVENT_KINDS = {1: ChangeKind.CREATED, 2: ChangeKind.DELETED, 3: ChangeKind.MODIFIED}
_TRANSPORT_ERRORS = (
    ConnectionLoss,
    ConnectionClosedError,
    SessionExpiredError,
    OperationTimeoutError,
)


class _AddWatch(NamedTuple):
    """ZooKeeper's `AddWatchRequest` (path, mode), opcode 106; its reply has no body."""

    path: str
    mode: int
    type: int = 106

    def serialize(self) -> bytes:
        return bytes(write_string(self.path)) + struct.pack("!i", self.mode)

    @classmethod
    def deserialize(cls, buffer: bytes, offset: int) -> bool:
        return True


@dataclass(frozen=True, eq=False)
class ZooKeeperChange(Change):
    """A notification; `written`: the outcome of this process's write of the path that was
    in flight when it arrived (the path's state as written, None when that write failed or
    its revision is unknown); see the module docstring. Equal to the `Change` of the same
    kind and path."""

    written: asyncio.Future[Stat | None] | None = None

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Change):
            return (self.kind, self.path) == (other.kind, other.path)
        return NotImplemented

    def __hash__(self) -> int:
        return hash((self.kind, self.path))


def _stat(value: bytes, stat: ZnodeStat) -> Stat:
    return Stat(value, int(stat.version), int(stat.mzxid), int(stat.ephemeralOwner))


def _parent(path: str) -> str:
    return path.rsplit("/", 1)[0] or "/"


class ZooKeeperBackend:
    """ZooKeeper under Pulsar's paths (see the module docstring). `hosts`: "h:p[,h:p]";
    `chroot`: the znode that holds every key ("" for the root), created when missing."""

    kind = "zookeeper"

    def __init__(
        self,
        hosts: str,
        chroot: str = "",
        *,
        timeout: float = 5.0,
        session_timeout: float = 30.0,
    ) -> None:
        self.hosts = hosts
        self.chroot = chroot.rstrip("/")
        self.timeout = timeout
        self.session_timeout = session_timeout
        self._zk = KazooClient(
            hosts=hosts,
            timeout=session_timeout,
            handler=InlineCallbackHandler(),
            connection_retry={"max_tries": -1, "delay": 0.1, "max_delay": 1.0},
        )
        self._inbox: LoopInbox | None = None
        # Per path, the outcomes of this process's multis writing it, in the order sent.
        self._writing: dict[str, deque[asyncio.Future[Stat | None]]] = {}
        self._started: asyncio.Future[None] | None = None
        self._subscribers = Subscribers()
        self._watching = False
        self._state = KazooState.LOST
        self._closed = False
        self._session: int | None = None
        self._lost_sessions: set[int] = set()
        self._parents: set[str] = set()
        self._sent: weakref.WeakSet[Any] = weakref.WeakSet()  # results of requests sent

    # -- connection ---------------------------------------------------------------------

    async def _connect(self) -> None:
        """Start the session on first use and make the chroot (kazoo then prefixes it)."""
        if self._started is not None and self._started.done():  # started (it never fails)
            return
        loop = asyncio.get_running_loop()
        if self._started is None:
            self._inbox = loop_inbox(self._zk, loop)
            self._started = loop.create_future()
            self._zk.add_listener(self._on_state)
            self._install_reader_hook()
            connected = self._zk.start_async()
            done = self._started
            threading.Thread(
                target=self._await_start, args=(connected, done), daemon=True
            ).start()
        try:
            async with asyncio.timeout(self.timeout):
                await asyncio.shield(self._started)
        except TimeoutError:
            raise Unavailable("metadata store unavailable: ZooKeeper is not reachable") from None

    def _await_start(self, connected: threading.Event, done: asyncio.Future[None]) -> None:
        """Wait (in a thread of its own) for the first connection, then make the chroot."""
        while not connected.wait(1.0):
            if self._closed:
                return
        if self.chroot:
            while not self._closed:
                try:
                    self._zk.ensure_path(self.chroot)
                    break
                except KazooException:
                    connected.wait(0.5)
            self._zk.chroot = self.chroot
        if self._inbox is not None:
            self._inbox.post(_succeed, done, None)

    async def _result(
        self,
        make: Callable[[], Any],
        on_delivery: Callable[[Any], None] | None = None,
        *,
        write: bool = False,
        timeout: float | None = None,
    ) -> Any:
        """Issue a kazoo asynchronous call and await its result on the loop, all within the
        timeout (or `timeout`; `on_delivery`: `LoopInbox.settle`'s). While disconnected it
        waits for the connection (bounded by the same timeout) rather than let kazoo queue
        the request, which could then be sent after the caller was told it failed. A
        `write` whose request may have been sent fails with `Unanswered`."""
        await self._connect()
        assert self._inbox is not None
        outcome: Any = None
        session = None
        try:
            async with asyncio.timeout(self.timeout if timeout is None else timeout):
                while not self._zk.connected:
                    await asyncio.sleep(0.02)
                session = self._session
                outcome = make()
                return await self._inbox.settle(outcome, on_delivery)
        except TimeoutError:
            failure = Unavailable("metadata store unavailable: ZooKeeper did not answer")
            sent = outcome is not None  # if still queued, kazoo may yet send it
        except _TRANSPORT_ERRORS as exc:
            failure = Unavailable(f"metadata store unavailable: {type(exc).__name__}")
            failure.__cause__ = exc
            sent = outcome is not None and outcome in self._sent
        if write and sent:
            raise Unanswered(str(failure), session) from failure.__cause__
        raise failure

    # -- the seam -----------------------------------------------------------------------

    async def get(self, path: str) -> Stat | None:
        try:
            value, stat = await self._result(lambda: self._zk.get_async(path))
        except NoNodeError:
            return None
        return _stat(value, stat)

    async def put(
        self,
        path: str,
        value: bytes,
        expected_version: int | None = None,
        *,
        ephemeral: bool = False,
        timeout: float | None = None,
    ) -> Stat:
        """`timeout`: each call's own (`Unanswered` when a write may have been sent)."""
        if expected_version == CREATE:
            return await self._create(path, value, ephemeral=ephemeral, timeout=timeout)
        if expected_version is not None:
            try:
                stat = await self._result(lambda: self._zk.set_async(
                    path, value, expected_version), write=True, timeout=timeout)  # fmt: skip
            except (BadVersionError, NoNodeError):
                raise BadVersion(path) from None
            return _stat(value, stat)
        while True:
            try:
                stat = await self._result(
                    lambda: self._zk.set_async(path, value, -1), write=True, timeout=timeout)
                return _stat(value, stat)
            except NoNodeError:
                pass
            with contextlib.suppress(AlreadyExists):
                return await self._create(path, value, ephemeral=ephemeral, timeout=timeout)

    async def _create(
        self, path: str, value: bytes, *, ephemeral: bool, timeout: float | None = None
    ) -> Stat:
        try:
            _, stat = await self._result(lambda: self._zk.create_async(
                path, value, ephemeral=ephemeral, makepath=True, include_data=True),
                write=True, timeout=timeout)  # fmt: skip
        except NodeExistsError:
            raise AlreadyExists(path) from None
        return _stat(value, stat)

    async def create_sequential(self, prefix: str, value: bytes, *, ephemeral: bool) -> str:
        created: str = await self._result(lambda: self._zk.create_async(
            prefix, value, ephemeral=ephemeral, sequence=True, makepath=True),
            write=True)  # fmt: skip
        return created

    async def delete(self, path: str, expected_version: int | None = None) -> None:
        version = -1 if expected_version is None else expected_version
        try:
            await self._result(lambda: self._zk.delete_async(path, version), write=True)
        except NoNodeError:
            raise NotFound(path) from None
        except BadVersionError:
            raise BadVersion(path) from None
        except NotEmptyError:
            raise MetastoreError(f"cannot delete {path}: it has children") from None

    async def children(self, path: str) -> list[str]:
        try:
            names: list[str] = await self._result(lambda: self._zk.get_children_async(path))
        except NoNodeError:
            return []
        return sorted(names)

    async def multi(self, ops: Sequence[Op], *, timeout: float | None = None) -> list[Stat | None]:
        """One `multi`; `timeout`: its call's own (`Unanswered` when it may have been sent)."""
        try:
            return await self._multi(ops, timeout)
        except NoNodeError:  # a parent known to exist was deleted since: make it again
            self._parents.clear()
            try:
                return await self._multi(ops, timeout)
            except NoNodeError:
                raise BadVersion(", ".join(op.path for op in ops)) from None

    async def _multi(self, ops: Sequence[Op], timeout: float | None) -> list[Stat | None]:
        await self._connect()  # kazoo prefixes the chroot as each op is added
        for parent in sorted({_parent(op.path) for op in ops if not isinstance(op, Delete)}):
            if parent != "/" and parent not in self._parents:
                await self._result(functools.partial(self._zk.ensure_path_async, parent))
                if len(self._parents) >= _PARENTS_KNOWN:
                    self._parents.clear()
                self._parents.add(parent)
        existing: dict[str, bool] = {}
        for op in ops:  # an unconditional put is a set or a create, as the znode is now
            if isinstance(op, Put) and op.expected_version is None:
                existing[op.path] = await self.get(op.path) is not None
        checks = [op for op in ops if isinstance(op, Check)]
        writes = [op for op in ops if not isinstance(op, Check)]
        tx = self._zk.transaction()
        for op in checks:  # first: each sees the state before the batch, as etcd's compares
            if op.expected_version == CREATE:
                tx.create(op.path, b"")
                tx.delete(op.path)
            else:
                tx.check(op.path, op.expected_version)
        sets = False  # a setData's reply carries the multi's zxid (a create's only its path)
        for op in writes:
            if isinstance(op, Put):
                if op.expected_version == CREATE or (
                    op.expected_version is None and not existing[op.path]
                ):
                    tx.create(op.path, op.value)
                else:
                    version = -1 if op.expected_version is None else op.expected_version
                    tx.set_data(op.path, op.value, version)
                    sets = True
            else:
                tx.delete(op.path, -1 if op.expected_version is None else op.expected_version)
        # The writes whose state the reply will tell (see `state_after`); without a setData
        # the revision is read after the reply, and a watch reads the path as for any write.
        puts = [op for op in writes if isinstance(op, Put)] if sets else []
        outcomes: list[asyncio.Future[Stat | None]] = []

        def send() -> Any:  # the writes are in flight from now
            loop = asyncio.get_running_loop()
            for op in puts:
                outcome: asyncio.Future[Stat | None] = loop.create_future()
                self._writing.setdefault(op.path, deque()).append(outcome)
                outcomes.append(outcome)
            return tx.commit_async()

        def delivered(result: Any) -> None:  # on the loop, in order with notifications
            written = _written(puts, writes, result)
            for op, outcome in zip(puts, outcomes, strict=True):
                _succeed(outcome, written.get(id(op)))
                in_flight = self._writing.get(op.path)
                if in_flight is not None:
                    with contextlib.suppress(ValueError):
                        in_flight.remove(outcome)
                    if not in_flight:
                        del self._writing[op.path]

        results = await self._result(send, delivered, write=True, timeout=timeout)
        failures = [r for r in results if isinstance(r, Exception)]
        if failures:
            causes = [r for r in failures if not isinstance(r, RolledBackError)]
            if any(isinstance(c, NoNodeError) for c in causes) and any(
                isinstance(op, Put) and op.expected_version in (None, CREATE) for op in ops
            ) and not (len(ops) == 1 and isinstance(ops[0], Delete)):
                raise NoNodeError()  # a parent is gone (`multi` makes it again)
            if len(ops) == 1 and isinstance(ops[0], Delete) and isinstance(causes[0], NoNodeError):
                raise NotFound(ops[0].path)
            if len(ops) == 1 and isinstance(causes[0], NodeExistsError):
                raise AlreadyExists(ops[0].path)
            raise BadVersion(", ".join(op.path for op in ops))
        replies = list(results[len(results) - len(writes):])
        # every op of one multi has the multi's zxid: a create's revision is a setData's mzxid
        zxid = next((int(r.mzxid) for r in replies if isinstance(r, ZnodeStat)), None)
        stats: dict[int, Stat] = {}
        for op, reply in zip(writes, replies, strict=True):
            if not isinstance(op, Put):
                continue
            if isinstance(reply, ZnodeStat):
                stats[id(op)] = _stat(op.value, reply)
                continue
            if zxid is None:  # a create answers with its path alone: read its czxid
                found = await self._result(functools.partial(self._zk.exists_async, op.path))
                zxid = int(found.czxid) if found else 0
            stats[id(op)] = Stat(op.value, 0, zxid)
        return [stats.get(id(op)) for op in ops]

    async def state_after(self, change: Change) -> Stat | None:
        """The state of `change.path` as of `change` or later: what this process's write
        that covers it wrote (see the module docstring), else read now."""
        written = change.written if isinstance(change, ZooKeeperChange) else None
        if written is not None:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.timeout):
                    stat = await asyncio.shield(written)
                if stat is not None:
                    return stat
        return await self.get(change.path)

    def _deliver_change(self, kind: ChangeKind, path: str) -> None:
        """A notification, on the loop in order with replies: published, with the outcome
        of the first write of `path` still in flight (whose reply is yet to come)."""
        in_flight = self._writing.get(path) if kind is not ChangeKind.DELETED else None
        written = in_flight[0] if in_flight else None
        self._subscribers.publish(ZooKeeperChange(kind, path, written))

    # -- session ------------------------------------------------------------------------

    def _on_state(self, state: str) -> None:
        """kazoo's state listener (its own thread): session events, the watch re-added."""
        previous, self._state = self._state, state
        client_id = self._zk.client_id
        if state == KazooState.CONNECTED and client_id is not None:
            self._session = int(client_id[0])
        elif state == KazooState.LOST and self._session is not None:
            self._lost_sessions.add(self._session)
        events: list[SessionEvent] = []
        if state == KazooState.SUSPENDED:
            events.append(SessionEvent.CONNECTION_LOST)
        elif state == KazooState.LOST and previous != KazooState.LOST:
            events.append(SessionEvent.SESSION_LOST)
        elif state == KazooState.CONNECTED:
            if previous == KazooState.SUSPENDED:
                events.append(SessionEvent.RECONNECTED)
            elif previous == KazooState.LOST and self._started is not None \
                    and self._started.done():
                events.append(SessionEvent.SESSION_REESTABLISHED)
            if self._watching:
                self._add_watch(resync=True)
        if self._inbox is not None:
            for event in events:
                self._inbox.post(self._subscribers.emit, event)

    def add_session_listener(self, listener: SessionListener) -> None:
        self._subscribers.listeners.append(listener)

    async def session_id(self) -> int:
        await self._connect()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout
        while (client_id := self._zk.client_id) is None or not self._zk.connected:
            if loop.time() > deadline:
                raise Unavailable("metadata store unavailable: no ZooKeeper session")
            await asyncio.sleep(0.02)
        return int(client_id[0])

    def session_lost(self, session: int) -> bool:
        """Whether `session` is known to have ended (expired or closed)."""
        return session in self._lost_sessions

    def on_session(self, session: int | None) -> bool:
        """Whether the calls answered now are answered on `session` (still alive)."""
        return session is not None and self._session == session \
            and session not in self._lost_sessions

    def last_revision(self) -> int:
        return int(self._zk.last_zxid)

    async def expire_session(self, hosts: str | None = None) -> None:
        """Expire the session as ZooKeeper does after a timeout: a second client attaches
        to it (through `hosts`, by default this client's) and closes it."""
        await self._connect()
        session = self._zk.client_id

        def close_session() -> None:
            other = KazooClient(hosts=hosts or self.hosts, client_id=session,
                                timeout=self.session_timeout)
            other.start(timeout=self.timeout)
            other.stop()
            other.close()

        await asyncio.to_thread(close_session)

    # -- change stream ------------------------------------------------------------------

    def _install_reader_hook(self) -> None:
        """See the module docstring: persistent-watch notifications, read before kazoo's
        own dispatch (which drops them), on kazoo's reader thread, where one that no open
        stream wants (as the change history's record znodes, one per recorded write, when
        nothing reads the history's stream) goes no further (`Subscribers.wanted`); the
        results of requests kazoo takes from its queue to send, noted before it writes them;
        and the wait for a session request's answer, bounded by the store timeout."""
        connection = self._zk._connection
        read_event = connection._read_watch_event
        send_request = connection._send_request

        def send_noted(read_timeout: float, connect_timeout: float) -> Any:
            with contextlib.suppress(IndexError, TypeError):
                self._sent.add(self._zk._queue[0][1])
            return send_request(read_timeout, connect_timeout)

        connection._send_request = send_noted

        def read_watch_event(buffer: bytes, offset: int) -> Any:
            watch, _ = Watch.deserialize(buffer, offset)
            kind = _EVENT_KINDS.get(watch.type)
            if kind is not None and self._watching and self._inbox is not None:
                path = self._zk.unchroot(watch.path)
                if self._subscribers.wanted(path):
                    self._inbox.post(self._deliver_change, kind, path)
            return read_event(buffer, offset)

        connection._read_watch_event = read_watch_event

        invoke = connection._invoke
        bound = self.timeout

        def invoke_bounded(timeout: float, request: Any, xid: int | None = None) -> Any:
            if isinstance(request, Connect):  # the session request (module docstring)
                timeout = min(timeout, bound)
            return invoke(timeout, request, xid)

        connection._invoke = invoke_bounded

    def _add_watch(self, *, resync: bool) -> Any:
        """Queue `addWatch` on the root (non-blocking); `RESYNC` once it is in place."""
        outcome = self._zk.handler.async_result()
        root = self.chroot or "/"
        self._zk._call(_AddWatch(root, _PERSISTENT_RECURSIVE), outcome)
        if resync:
            def announce(result: Any) -> None:
                if result.successful() and self._inbox is not None:
                    self._inbox.post(self._subscribers.publish, Change(ChangeKind.RESYNC, "/"))

            outcome.rawlink(announce)
        return outcome

    async def watch(self) -> ChangeStream:
        stream = self._subscribers.open_stream()
        if not self._watching:
            await self._connect()
            self._watching = True
            try:
                await self._result(lambda: self._add_watch(resync=False))
            except BaseException:
                self._watching = False
                stream.close()
                raise
        return stream

    async def close(self) -> None:
        self._closed = True
        self._watching = False
        self._subscribers.close_streams()
        if self._started is not None:
            await asyncio.to_thread(self._zk.stop)
            self._zk.close()


def _succeed(future: asyncio.Future[Any], value: Any) -> None:
    if not future.done():
        future.set_result(value)


def _fail(future: asyncio.Future[Any], exc: BaseException) -> None:
    if not future.done():
        future.set_exception(exc)


def _written(puts: Sequence[Put], writes: Sequence[Op], result: Any) -> dict[int, Stat]:
    """By `id` of each `Put` of a committed multi, the state it wrote (a create's revision is
    the multi's zxid, known from a setData's reply in the same multi); empty when the multi
    failed."""
    try:
        results = result.get_nowait()
    except BaseException:
        return {}
    if any(isinstance(r, Exception) for r in results):
        return {}
    replies = list(results[len(results) - len(writes):])
    zxid = next((int(r.mzxid) for r in replies if isinstance(r, ZnodeStat)), None)
    by_op = {id(op): reply for op, reply in zip(writes, replies, strict=True)}
    written: dict[int, Stat] = {}
    for op in puts:
        reply = by_op[id(op)]
        if isinstance(reply, ZnodeStat):
            written[id(op)] = _stat(op.value, reply)
        elif zxid is not None:
            written[id(op)] = Stat(op.value, 0, zxid)
    return written
