"""kazoo's replies and watch notifications delivered to an asyncio event loop: one thread
hop, in the order ZooKeeper sent them.

kazoo's threading handler runs the callbacks of a request's result on a completion thread of
its own, so a reply travels connection thread -> completion thread -> loop, and a watch
notification (taken on the connection thread) can overtake the reply ZooKeeper sent before
it. `InlineCallbackHandler` (a kazoo handler, passed as `KazooClient(handler=...)`) runs
those callbacks where the result is settled, on kazoo's connection thread; they post to a
`LoopInbox`, which runs what was posted on the loop in posting order, waking the loop once
per burst rather than once per item. Callbacks must not block: they only post.

A burst is what kazoo's connection thread reads before it next waits: a write's watch
notifications and its reply come in one read from the socket but are taken one message at a
time, and waking the loop for the first would hand the interpreter to the loop while the
connection thread still has the rest to read (two wake-ups and a contended lock per write
instead of one). So what that thread posts (`InlineCallbackHandler.defers`) is held until
it has nothing more to read: its `select` finds nothing ready at once, or it leaves
`connection_loop_step` (an error or the end of the connection).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import select
import threading
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from kazoo.client import KazooClient
from kazoo.handlers.threading import AsyncResult, SequentialThreadingHandler

__all__ = ["InlineCallbackHandler", "LoopInbox", "loop_inbox"]

log = logging.getLogger(__name__)


class _InlineResult(AsyncResult):
    """kazoo's `AsyncResult`, its callbacks run by whoever settles it (or links to it once
    settled) instead of on the handler's completion thread."""

    def _do_callbacks(self) -> None:
        for callback in self._callbacks:
            try:
                callback(self)
            except Exception:  # never into kazoo's connection thread
                log.exception("ZooKeeper result callback failed")


class InlineCallbackHandler(SequentialThreadingHandler):
    """See the module docstring; watch callbacks (`dispatch_callback`) keep kazoo's own
    callback thread. `select` is one `poll` call: kazoo's connection thread selects before
    every read and write of a message, and kazoo's own (a `selectors` object made, filled
    and closed per call: an epoll descriptor each time) costs ~30 us a call."""

    def __init__(self) -> None:
        super().__init__()
        self._waiter: int | None = None  # the thread that selects: kazoo's connection thread
        self._held: list[LoopInbox] = []  # inboxes with posts waiting for that thread to wait

    def async_result(self) -> AsyncResult:
        return _InlineResult(self)

    def defers(self, inbox: LoopInbox) -> bool:
        """Whether `inbox`'s post from the calling thread is held until that thread waits
        (the module docstring); if so, `inbox` is woken then."""
        if threading.get_ident() != self._waiter:
            return False
        if inbox not in self._held:
            self._held.append(inbox)
        return True

    def release(self) -> None:
        """Wake the inboxes holding posts of the calling (connection) thread."""
        held, self._held = self._held, []
        for inbox in held:
            inbox.wake()

    @contextlib.contextmanager
    def connection_loop_step(self) -> Iterator[None]:
        """Around kazoo's connection attempt (its read and write loop): what the thread
        posted is released when it leaves, however it leaves."""
        self._waiter = threading.get_ident()
        try:
            yield
        finally:
            self._waiter = None
            self.release()

    def select(self, rlist: Sequence[Any], wlist: Sequence[Any], xlist: Sequence[Any],
               timeout: float | None = None) -> tuple[list[Any], list[Any], list[Any]]:  # fmt: skip
        """`select.select`'s contract (as kazoo's `selector_select`, no descriptor limit):
        the objects of `rlist` and `wlist` ready within `timeout` seconds; `xlist` unused.
        A descriptor in error or hung up is ready both ways, as with `selectors`."""
        if timeout is not None and timeout < 0:
            raise ValueError("timeout must be non-negative")
        poller = select.poll()
        wanted: dict[int, int] = {}
        for fileobj in rlist:
            fd = _fd(fileobj)
            wanted[fd] = wanted.get(fd, 0) | select.POLLIN
        for fileobj in wlist:
            fd = _fd(fileobj)
            wanted[fd] = wanted.get(fd, 0) | select.POLLOUT
        for fd, events in wanted.items():
            poller.register(fd, events)
        ready: dict[int, int] = {}
        if self._held and threading.get_ident() == self._waiter:
            ready = dict(poller.poll(0))
            if not ready:  # about to wait: the loop gets what this thread read until now
                self.release()
        if not ready:
            ready = dict(poller.poll(None if timeout is None else timeout * 1000))
        readable = [f for f in rlist if ready.get(_fd(f), 0) & ~select.POLLOUT]
        writable = [f for f in wlist if ready.get(_fd(f), 0) & ~select.POLLIN]
        return readable, writable, []


def _fd(fileobj: Any) -> int:
    fd = fileobj if isinstance(fileobj, int) else int(fileobj.fileno())
    if fd < 0:  # a closed socket: as kazoo's own select
        raise TypeError(f"invalid file descriptor: {fd}")
    return fd


class LoopInbox:
    """Run calls posted from any thread on `loop`, in posting order."""

    def __init__(
        self, loop: asyncio.AbstractEventLoop, handler: InlineCallbackHandler | None = None
    ) -> None:
        """`handler`: the kazoo handler whose connection thread's posts are held until that
        thread waits (module docstring); None: every post wakes the loop."""
        self.loop = loop
        self._handler = handler
        self._posted: deque[tuple[Callable[..., Any], tuple[Any, ...]]] = deque()
        self._scheduled = False

    def post(self, call: Callable[..., Any], *args: Any) -> None:
        """Run `call(*args)` on the loop soon (dropped once the loop is closed)."""
        self._posted.append((call, args))
        if not self._scheduled and (self._handler is None or not self._handler.defers(self)):
            self.wake()

    def wake(self) -> None:
        """Have the loop run what was posted (once per burst)."""
        if not self._scheduled:
            self._scheduled = True
            try:
                self.loop.call_soon_threadsafe(self._drain)
            except RuntimeError:  # the loop is closed
                self._posted.clear()

    def _drain(self) -> None:
        # Reset before taking: a post from now on either is taken below or schedules a drain.
        self._scheduled = False
        posted = self._posted
        while posted:
            call, args = posted.popleft()
            try:
                call(*args)
            except Exception:
                log.exception("call posted to the event loop failed")

    def settle(
        self, outcome: Any, on_delivery: Callable[[Any], None] | None = None
    ) -> asyncio.Future[Any]:
        """A future on the loop completed with kazoo's result `outcome` once it is settled;
        `on_delivery(outcome)` runs on the loop just before, in order with everything else
        posted."""
        future: asyncio.Future[Any] = self.loop.create_future()
        delivered: list[bool] = []  # kazoo may call a callback again when more are linked

        def deliver(result: Any) -> None:
            if delivered:
                return
            delivered.append(True)
            if on_delivery is not None:
                on_delivery(result)
            if future.done():  # its waiter gave up (cancelled)
                return
            try:
                value = result.get_nowait()
            except BaseException as exc:
                future.set_exception(exc)
            else:
                future.set_result(value)

        outcome.rawlink(lambda result: self.post(deliver, result))
        return future


def loop_inbox(client: KazooClient, loop: asyncio.AbstractEventLoop) -> LoopInbox:
    """The inbox through which `client`'s results reach `loop`. With an
    `InlineCallbackHandler`, what its connection thread posts is held until that thread
    waits: each of kazoo's connection attempts (its private `_connect_attempt`, the read and
    write loop of one connection) runs in `connection_loop_step`. Call before
    `client.start`; once per client."""
    handler = client.handler
    if not isinstance(handler, InlineCallbackHandler):
        return LoopInbox(loop)
    connection = client._connection
    attempt = connection._connect_attempt

    def stepped(*args: Any) -> Any:
        with handler.connection_loop_step():
            return attempt(*args)

    connection._connect_attempt = stepped
    return LoopInbox(loop, handler)
