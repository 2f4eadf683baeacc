"""The repair copy's window (`storage.autorecovery.worker.in_window`): every entry once, never
more than the window in flight, the next one started as soon as one finishes, and the first
failure stops the rest."""

from __future__ import annotations

import asyncio

import pytest

from storage.autorecovery.worker import in_window


async def test_every_item_once_and_never_more_than_the_window_in_flight() -> None:
    running: set[int] = set()
    most = 0
    done: list[int] = []
    release: dict[int, asyncio.Event] = {i: asyncio.Event() for i in range(40)}

    async def work(item: int) -> None:
        nonlocal most
        running.add(item)
        most = max(most, len(running))
        await release[item].wait()
        running.discard(item)
        done.append(item)

    copy = asyncio.ensure_future(in_window(work, list(range(40)), 7))
    for item in range(40):  # finish them one at a time: a new one starts in each slot freed
        for _ in range(100):  # a bounded wait for the lanes to settle
            if item in running and len(running) == min(7, 40 - item):
                break
            await asyncio.sleep(0)
        assert item in running
        assert len(running) == min(7, 40 - item)  # the freed slot was taken at once
        release[item].set()
    await asyncio.wait_for(copy, 5)
    assert sorted(done) == list(range(40))
    assert most == 7


async def test_the_first_failure_is_raised_and_nothing_more_starts() -> None:
    started: list[int] = []
    cancelled: list[int] = []
    blocked = asyncio.Event()

    async def work(item: int) -> None:
        started.append(item)
        if item == 3:
            raise OSError("bookie gone")
        try:
            await blocked.wait()
        except asyncio.CancelledError:
            cancelled.append(item)
            raise

    with pytest.raises(OSError, match="bookie gone"):
        await asyncio.wait_for(in_window(work, list(range(100)), 4), 5)
    assert started == [0, 1, 2, 3]
    # the other lanes were cancelled before in_window returned: their items stopped where they
    # waited, so releasing them now starts nothing more
    assert sorted(cancelled) == [0, 1, 2]
    blocked.set()
    for _ in range(10):
        await asyncio.sleep(0)  # turns of the loop for any lane still alive
    assert started == [0, 1, 2, 3]


async def test_an_empty_stripe_does_nothing() -> None:
    async def work(item: int) -> None:
        raise AssertionError(item)

    await in_window(work, [], 10)
