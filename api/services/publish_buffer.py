"""The bytes of messages being stored at once, over all producers (Pulsar's
`maxMessagePublishBufferSizeInMB`).

A produce request takes room for its encoded messages before its first add and gives it back
when its last add is answered; while the buffer is full, later requests wait their turn (first
come, first served), so many large requests at once queue instead of piling up in memory.
A request larger than the whole buffer runs alone once the buffer is empty.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


class PublishBuffer:
    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.used = 0
        self._waiters: deque[tuple[int, asyncio.Future[None]]] = deque()

    def _fits(self, size: int) -> bool:
        return self.used == 0 or self.used + size <= self.capacity

    @asynccontextmanager
    async def room(self, size: int) -> AsyncIterator[None]:
        """Hold `size` bytes of the buffer for the body of the `async with`."""
        if self._waiters or not self._fits(size):
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            entry = (size, waiter)
            self._waiters.append(entry)
            try:
                await waiter
            except BaseException:
                if entry in self._waiters:
                    self._waiters.remove(entry)
                elif waiter.done() and not waiter.cancelled():
                    self._release(size)  # granted, then cancelled: give the room back
                raise
        else:
            self.used += size
        try:
            yield
        finally:
            self._release(size)

    def _release(self, size: int) -> None:
        self.used -= size
        while self._waiters and self._fits(self._waiters[0][0]):
            wanted, waiter = self._waiters.popleft()
            if waiter.done():
                continue
            self.used += wanted
            waiter.set_result(None)
