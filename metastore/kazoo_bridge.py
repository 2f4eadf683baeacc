"""kazoo's replies and watch notifications delivered to an asyncio event loop: one thread
hop, in the order ZooKeeper sent them.

kazoo's threading handler runs the callbacks of a request's result on a completion thread of
its own, so a reply travels connection thread -> completion thread -> loop, and a watch
notification (taken on the connection thread) can overtake the reply ZooKeeper sent before
it. `InlineCallbackHandler` (a kazoo handler, passed as `KazooClient(handler=...)`) runs
those callbacks where the result is settled, on kazoo's connection thread; they post to a
`LoopInbox`, which runs what was posted on the loop in posting order, waking the loop once
per burst rather than once per item. Callbacks must not block: they only post.
"""

from __future__ import annotations

import asyncio
import logging
import select
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from kazoo.handlers.threading import AsyncResult, SequentialThreadingHandler

__all__ = ["InlineCallbackHandler", "LoopInbox"]

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

    def async_result(self) -> AsyncResult:
        return _InlineResult(self)

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

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._posted: deque[tuple[Callable[..., Any], tuple[Any, ...]]] = deque()
        self._scheduled = False

    def post(self, call: Callable[..., Any], *args: Any) -> None:
        """Run `call(*args)` on the loop soon (dropped once the loop is closed)."""
        self._posted.append((call, args))
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
