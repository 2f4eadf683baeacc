"""`metastore.kazoo_bridge`'s handler: its `select` keeps the contract kazoo's connection
thread relies on (that of `select.select` and kazoo's `selector_select`), on real sockets."""

from __future__ import annotations

import socket

import pytest
from kazoo.handlers.utils import selector_select

from metastore.kazoo_bridge import InlineCallbackHandler


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
