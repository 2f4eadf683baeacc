"""The publish buffer (maxMessagePublishBufferSizeInMB): requests take room in turn."""

from __future__ import annotations

import asyncio

from api.services.publish_buffer import PublishBuffer


async def test_requests_wait_for_room_in_arrival_order() -> None:
    buffer = PublishBuffer(100)
    order: list[str] = []
    first_in = asyncio.Event()
    release_first = asyncio.Event()

    async def request(name: str, size: int, hold: asyncio.Event | None = None) -> None:
        async with buffer.room(size):
            order.append(name)
            if name == "a":
                first_in.set()
            if hold is not None:
                await hold.wait()

    a = asyncio.create_task(request("a", 80, release_first))
    await first_in.wait()
    b = asyncio.create_task(request("b", 30))  # does not fit beside a: waits
    c = asyncio.create_task(request("c", 10))  # would fit, but b came first
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert order == ["a"] and buffer.used == 80
    release_first.set()
    await asyncio.gather(a, b, c)
    assert order == ["a", "b", "c"] and buffer.used == 0


async def test_a_request_larger_than_the_buffer_runs_alone() -> None:
    buffer = PublishBuffer(10)
    async with buffer.room(50):
        assert buffer.used == 50
    assert buffer.used == 0


async def test_a_cancelled_waiter_gives_back_nothing_it_did_not_take() -> None:
    buffer = PublishBuffer(10)
    async with buffer.room(10):
        waiter = asyncio.create_task(_enter(buffer, 5))
        await asyncio.sleep(0)
        waiter.cancel()
        await asyncio.gather(waiter, return_exceptions=True)
        assert buffer.used == 10
    assert buffer.used == 0
    async with buffer.room(10):
        assert buffer.used == 10


async def _enter(buffer: PublishBuffer, size: int) -> None:
    async with buffer.room(size):
        pass
