"""BookieClient failure modes against peers that misbehave (plain sockets, no bookie)."""

from __future__ import annotations

import asyncio

import pytest

from storage.bookie.errors import BookieTimeout, ConnectionLost
from storage.bookie.format import package_entry
from storage.bookie.protocol import (
    AddRequest,
    FrameReader,
    OpCode,
    ResultCode,
    decode_request,
    encode_add_response,
    encode_response,
)
from storage.bookie_client import BookieClient
from tests.support import wait_until_async

KEY = b"\x03" * 20


async def test_silent_peer_times_out_and_late_answer_is_dropped() -> None:
    received = bytearray()  # every request byte the peer got
    writers: list[asyncio.StreamWriter] = []

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writers.append(writer)
        while chunk := await reader.read(65536):
            received.extend(chunk)

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = await BookieClient.connect(f"127.0.0.1:{port}", timeout=0.3)
    with pytest.raises(BookieTimeout):
        await client.add(1, 0, KEY, package_entry(1, 0, -1, 1, b"x"))
    first = len(received)
    assert first > 0
    # The late answer to the timed-out add must not complete the next add of the same entry.
    second = asyncio.ensure_future(client.add(1, 0, KEY, package_entry(1, 0, -1, 1, b"x")))
    await wait_until_async(lambda: len(received) >= 2 * first)  # the second add is in flight
    writers[0].write(encode_response(OpCode.ADD_ENTRY, ResultCode.EOK, 1, 0))
    await writers[0].drain()
    with pytest.raises(BookieTimeout):
        await second
    await client.close()
    server.close()


async def test_peer_closing_fails_pending_requests() -> None:
    async def closer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(1)
        writer.close()

    server = await asyncio.start_server(closer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = await BookieClient.connect(f"127.0.0.1:{port}", timeout=5)
    with pytest.raises(ConnectionLost):
        await client.read(1, 0)
    with pytest.raises(ConnectionLost):
        await client.read(1, 1)  # and later calls fail fast
    server.close()


async def test_connect_refused_is_typed() -> None:
    server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    server.close()
    await server.wait_closed()
    with pytest.raises(ConnectionLost):
        await BookieClient.connect(f"127.0.0.1:{port}", timeout=1)


async def test_answered_requests_are_forgotten_as_their_answers_arrive() -> None:
    """Not half a second later by the deadline sweep: a sweep over ~9,000 answered adds stalled
    the event loop for several ms (the ledger's p99)."""

    async def answer_all(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        frames = FrameReader()
        while data := await reader.read(65536):
            for body in frames.feed(data):
                request = decode_request(body)
                if isinstance(request, AddRequest):  # reads go unanswered
                    writer.write(
                        encode_add_response(ResultCode.EOK, request.ledger_id, request.entry_id)
                    )

    server = await asyncio.start_server(answer_all, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with await BookieClient.connect(f"127.0.0.1:{port}", timeout=60) as client:
        await asyncio.gather(*(client.add(1, i, KEY, package_entry(1, i, i - 1, i + 1, b"x"))
                               for i in range(500)))
        assert client.awaiting == 0
        silent = asyncio.ensure_future(client.read(9, 0))  # no answer: still tracked
        await asyncio.sleep(0)
        assert client.awaiting == 1
        silent.cancel()
    server.close()
