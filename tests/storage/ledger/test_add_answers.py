"""A ledger's adds against peers that answer in every order, with errors, late, twice, not at
all, or with bytes that are no frame (plain sockets speaking the V2 frames, no bookie): the
caller sees its adds acknowledged in order once Qa bookies of the write set acknowledged, and
the typed error otherwise."""

from __future__ import annotations

import asyncio
import random
import struct
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from metastore.ledger_metadata import LedgerMetadata
from storage.bookie.format import verify_entry
from storage.bookie.protocol import (
    AddRequest,
    FrameReader,
    ResultCode,
    decode_request,
    encode_add_response,
)
from storage.bookie_client import BookieClient
from storage.ledger import BookiePool
from storage.ledger.errors import AddFailed, LedgerFenced
from storage.ledger.handle import WriteHandle
from storage.ledger.metadata import closed
from tests.support import wait_until_async

# What a peer does with one add request: the response frames it writes back (maybe none)
Behaviour = Callable[[AddRequest], list[bytes]]


def ok(request: AddRequest) -> list[bytes]:
    return [encode_add_response(ResultCode.EOK, request.ledger_id, request.entry_id)]


def silent(request: AddRequest) -> list[bytes]:
    return []


@dataclass
class Peer:
    behaviour: Behaviour
    shuffle: bool = False  # answer each read's requests in a random order
    requests: list[AddRequest] = field(default_factory=list)
    server: asyncio.Server | None = None
    serving: int = 0  # connections open

    @property
    def address(self) -> str:
        assert self.server is not None
        return f"127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        frames = FrameReader()
        rng = random.Random(7)
        self.serving += 1
        try:
            await self._answer(reader, writer, frames, rng)
        except ConnectionError:
            pass  # the client dropped the connection (after a malformed answer)
        finally:
            self.serving -= 1
            writer.close()

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                      frames: FrameReader, rng: random.Random) -> None:
        while data := await reader.read(65536):
            batch = [r for r in map(decode_request, frames.feed(data))
                     if isinstance(r, AddRequest)]
            self.requests += batch
            if self.shuffle:
                rng.shuffle(batch)
            for request in batch:
                writer.writelines(self.behaviour(request))
            await writer.drain()


async def peers(*behaviours: Behaviour, shuffle: bool = False) -> list[Peer]:
    started = []
    for behaviour in behaviours:
        peer = Peer(behaviour, shuffle)
        peer.server = await asyncio.start_server(peer.serve, "127.0.0.1", 0)
        started.append(peer)
    return started


def handle_on(started: list[Peer], qa: int, *, timeout: float = 10.0) -> WriteHandle:
    e = len(started)
    metadata = LedgerMetadata(5, e, e, qa, {0: tuple(p.address for p in started)},
                              password=b"pw")

    async def connect(bookie: str) -> BookieClient:
        return await BookieClient.connect(bookie, timeout=timeout)

    async def close_metadata(last: int, length: int) -> LedgerMetadata:
        return closed(metadata, last, length)

    return WriteHandle(metadata, BookiePool(connect), close_metadata)  # no ensemble change


async def stop(started: list[Peer], handle: WriteHandle) -> None:
    await handle.bookies.close()
    await wait_until_async(lambda: all(peer.serving == 0 for peer in started))
    for peer in started:
        assert peer.server is not None
        peer.server.close()


async def test_adds_complete_in_order_when_answers_come_in_any_order() -> None:
    started = await peers(ok, ok, ok, shuffle=True)
    handle = handle_on(started, 2)
    payloads = [bytes([i]) * (i + 1) for i in range(200)]
    done: list[int] = []
    futures = [handle.add_nowait(p) for p in payloads]
    for future in futures:
        future.add_done_callback(lambda f: done.append(f.result()))
    async with asyncio.timeout(30):
        assert await asyncio.gather(*futures) == list(range(200))
    assert done == list(range(200))  # completed in entry order
    assert handle.last_add_confirmed == 199 and handle.length == sum(map(len, payloads))
    # every bookie got the same request bytes, each a good packaged entry
    for peer in started:
        assert sorted(r.entry_id for r in peer.requests) == list(range(200))
        for r in peer.requests:
            header = verify_entry(r.entry, 5, r.entry_id)
            assert header.length == sum(map(len, payloads[: r.entry_id + 1]))
            assert r.entry[36:] == payloads[r.entry_id]
    closed_md = await handle.close()
    assert (closed_md.last_entry_id, closed_md.length) == (199, handle.length)
    await stop(started, handle)


async def test_one_bookie_answering_twice_is_one_copy() -> None:
    started = await peers(lambda r: ok(r) * 2, silent, silent)
    handle = handle_on(started, 2, timeout=0.5)
    future = handle.add_nowait(b"x")
    with pytest.raises(AddFailed) as failure:
        async with asyncio.timeout(30):
            await future
    assert "BookieTimeout" in str(failure.value)
    assert handle.is_broken and handle.last_add_confirmed == -1
    await stop(started, handle)


async def test_a_silent_bookie_past_the_quorum_does_not_stop_adds() -> None:
    started = await peers(ok, ok, silent)
    handle = handle_on(started, 2, timeout=0.3)
    async with asyncio.timeout(30):
        assert [await handle.add(b"y") for _ in range(5)] == list(range(5))
    # the silent bookie's copies time out (BookieTimeout), which fails no add: the quorum
    # had them
    await wait_until_async(lambda: handle.unanswered_entries == 0)
    assert not handle.is_broken
    assert (await handle.add(b"z")) == 5
    await stop(started, handle)


async def test_an_error_answer_fails_the_copy_and_fencing_fails_the_handle() -> None:
    def fenced(request: AddRequest) -> list[bytes]:
        return [encode_add_response(ResultCode.EFENCED, request.ledger_id, request.entry_id)]

    def readonly(request: AddRequest) -> list[bytes]:
        return [encode_add_response(ResultCode.EREADONLY, request.ledger_id,
                                    request.entry_id)]

    started = await peers(ok, readonly, readonly)
    handle = handle_on(started, 2)
    with pytest.raises(AddFailed) as failure:
        async with asyncio.timeout(30):
            await handle.add(b"a")
    assert "ReadOnly" in str(failure.value)
    await stop(started, handle)

    started = await peers(ok, fenced, fenced)
    handle = handle_on(started, 2)
    futures = [handle.add_nowait(b"b") for _ in range(10)]
    async with asyncio.timeout(30):
        results = await asyncio.gather(*futures, return_exceptions=True)
    assert all(isinstance(r, LedgerFenced) for r in results)
    assert handle.is_broken
    with pytest.raises(LedgerFenced):
        await handle.add(b"c")
    await stop(started, handle)


@pytest.mark.parametrize("garbage", [
    struct.pack(">I", 8) + b"\x02\x01\x00\x00\x00\x00\x00\x00",  # an add response cut short
    struct.pack(">I", 2**31),  # a length past any frame
])
async def test_a_malformed_answer_loses_that_bookie_only(garbage: bytes) -> None:
    started = await peers(ok, ok, lambda r: [garbage])
    handle = handle_on(started, 2)
    async with asyncio.timeout(30):
        assert [await handle.add(b"d") for _ in range(3)] == [0, 1, 2]
    await stop(started, handle)

    started = await peers(ok, ok, lambda r: [garbage])
    handle = handle_on(started, 3)  # Qa = 3: that bookie's copy was needed
    with pytest.raises(AddFailed) as failure:
        async with asyncio.timeout(30):
            await handle.add(b"e")
    assert "ConnectionLost" in str(failure.value)
    await stop(started, handle)


async def test_a_payload_the_encoder_refuses_leaves_the_handle_as_it_was() -> None:
    started = await peers(ok, ok, ok)
    handle = handle_on(started, 2)
    with pytest.raises(TypeError):
        handle.add_nowait(None)  # type: ignore[arg-type]
    assert (handle.last_add_pushed, handle.pending_adds, handle.unanswered_entries) == (-1, 0, 0)
    async with asyncio.timeout(30):
        assert await handle.add(memoryview(b"m")) == 0  # any buffer is a payload
    assert handle.length == 1
    await stop(started, handle)


async def test_a_lost_connection_is_dialled_again_for_the_next_copy() -> None:
    started = await peers(ok, ok, ok)
    handle = handle_on(started, 3)  # every copy is needed
    async with asyncio.timeout(30):
        assert await handle.add(b"f") == 0
        connection = handle.bookies.cached(started[2].address)
        assert connection is not None
        await connection.close()  # no copy was unanswered: nothing fails
        assert await handle.add(b"g") == 1  # its copy went over a new connection
    assert handle.bookies.cached(started[2].address) not in (None, connection)
    assert [r.entry_id for r in started[2].requests] == [0, 1]
    await stop(started, handle)
