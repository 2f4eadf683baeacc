"""`metastore.kazoo_bridge`'s handler: its `select` keeps the contract kazoo's connection
thread relies on (that of `select.select` and kazoo's `selector_select`), on real sockets;
what that thread posts reaches the loop in order, once the thread has nothing more to read."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Callable

import pytest
from kazoo.handlers.utils import selector_select

from metastore.kazoo_bridge import InlineCallbackHandler, LoopInbox
from tests.support import wait_until_async


def test_select_reports_what_is_ready_as_kazoos_own_select() -> None:
    handler = InlineCallbackHandler()
    left, right = socket.socketpair()
    try:
        for rlist, wlist in (([left], []), ([left], [right]), ([], [left, right])):
            ours = handler.select(rlist, wlist, [], 0)
            assert ours == selector_select(rlist, wlist, [], 0)
        assert handler.select([left], [], [], 0) == ([], [], [])  # nothing to read yet
        right.send(b"\0")
        assert handler.select([left, right], [], [], 1.0) == ([left], [], [])
        assert handler.select([left.fileno()], [], [], 0) == ([left.fileno()], [], [])
        right.close()  # hung up: readable (the read then finds the end)
        assert handler.select([left], [], [], 0)[0] == [left]
        with pytest.raises(TypeError):
            handler.select([right], [], [], 0)  # closed
        with pytest.raises(ValueError):
            handler.select([left], [], [], -1)
    finally:
        left.close()
        right.close()


async def _in_thread(work: Callable[[], None]) -> None:
    await asyncio.to_thread(work)


async def test_posts_of_the_connection_thread_wait_until_it_waits() -> None:
    """What kazoo's connection thread posts while it still has something to read reaches the
    loop once it finds nothing ready (after a call that thread asked the loop for since);
    left alone when it leaves the connection's loop; another thread's post wakes the loop."""
    loop = asyncio.get_running_loop()
    handler = InlineCallbackHandler()
    inbox = LoopInbox(loop, handler)
    order: list[str] = []
    done = asyncio.Event()
    drained = threading.Event()
    left, right = socket.socketpair()

    def connection_thread() -> None:
        with handler.connection_loop_step():
            right.send(b"\0")
            inbox.post(lambda: (order.append("reply"), drained.set()))
            assert handler.select([left], [], [], 0) == ([left], [], [])  # more to read: held
            loop.call_soon_threadsafe(order.append, "later call")
            left.recv(1)
            loop.call_soon_threadsafe(order.append, "read")
            assert handler.select([left], [], [], 0) == ([], [], [])  # nothing: released
            assert drained.wait(10)
            inbox.post(order.append, "last reply")  # held until the step ends
            loop.call_soon_threadsafe(order.append, "step ends")
        loop.call_soon_threadsafe(done.set)

    try:
        await _in_thread(connection_thread)
        await asyncio.wait_for(done.wait(), 10)
        await wait_until_async(lambda: len(order) == 5)
        assert order == ["later call", "read", "reply", "step ends", "last reply"]
        order.clear()

        def other_thread() -> None:
            inbox.post(order.append, "posted")
            loop.call_soon_threadsafe(order.append, "later call")

        await _in_thread(other_thread)
        await wait_until_async(lambda: len(order) == 2)
        assert order == ["posted", "later call"]
    finally:
        left.close()
        right.close()
