"""A bookie process answering V3 GET_LIST_OF_ENTRIES_OF_LEDGER as upstream: ENOLEDGER for a
ledger it does not know (byte for byte), EBADVERSION for a header that is not version 3, EBADREQ
for a V3 operation it does not serve, and the entries it holds, from the write cache and, after
a restart, from the index; V2 requests go on on the same connection. The client's V3 requests
time out and fail with the connection like V2 ones (plain sockets as peers)."""

from __future__ import annotations

import asyncio
import os
import socket

import pytest

from storage.bookie.errors import BookieTimeout, ConnectionLost, MalformedFrame, NoLedger
from storage.bookie.proto.bookkeeper_protocol_pb2 import Response
from storage.bookie.protocol import encode_read
from storage.bookie_client import BookieClient
from tests.storage.bookie.conftest import BookieFactory
from tests.storage.bookie.support import MASTER_KEY, entry
from tests.support import wait_until_async


def exchange(port: int, frame: bytes) -> bytes:
    """Send one frame on a fresh connection and return the one answer frame."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(frame)
        data = b""
        while len(data) < 4 or len(data) < 4 + int.from_bytes(data[:4], "big"):
            chunk = sock.recv(65536)
            assert chunk, "the bookie closed the connection"
            data += chunk
    return data


async def test_list_of_entries_of_ledger(start_bookie: BookieFactory) -> None:
    bookie = start_bookie()
    # Unknown ledger 7, txnId 5: ENOLEDGER (402) in the response and its body, the ledger id,
    # no availability field, under the request's header.
    request = bytes.fromhex("0000000d" "0a06" "0803" "100b" "1805" "e20602" "0807")
    assert exchange(bookie.port, request) == bytes.fromhex(
        "00000013" "0a06" "0803" "100b" "1805" "109203" "e20605" "089203" "1007"
    )  # fmt: skip
    # The same request with protocol version 2 in its header: EBADVERSION (503, varint f7 03).
    version_two = bytes.fromhex("0000000d" "0a06" "0802" "100b" "1805" "e20602" "0807")
    assert exchange(bookie.port, version_two) == bytes.fromhex(
        "00000013" "0a06" "0803" "100b" "1805" "10f703" "e20605" "08f703" "1007"
    )  # fmt: skip
    # READ_LAC (operation 7), not served here: EBADREQ (404) under the request's header.
    read_lac = bytes.fromhex("0000000d" "0a06" "0803" "1007" "1809" "c20602" "0801")
    assert exchange(bookie.port, read_lac) == bytes.fromhex(
        "0000000b" "0a06" "0803" "1007" "1809" "109403"
    )  # fmt: skip

    held = [0, 1, 2, 3, 4, 7, 8]
    async with await BookieClient.connect(bookie.bookie_id) as client:
        with pytest.raises(NoLedger):
            await client.entries_of_ledger(3)
        for entry_id in held:
            await client.add(3, entry_id, MASTER_KEY, entry(3, entry_id))
        await client.add(4, 5, MASTER_KEY, entry(4, 5))  # another ledger's entry
        found = await client.entries_of_ledger(3)  # from the write cache
        assert [e for e in range(12) if e in found] == held and found.entry_count == 7
        assert found.missing(range(10)) == [5, 6, 9]
        assert await client.read(3, 4) == entry(3, 4)  # V2 on the same connection
    bookie.kill()
    bookie.start()  # the journal is replayed and checkpointed: now from the index
    async with await BookieClient.connect(bookie.bookie_id) as client:
        found = await client.entries_of_ledger(3)
        assert [e for e in range(12) if e in found] == held
        assert [e for e in range(12) if e in await client.entries_of_ledger(4)] == [5]
        assert await client.read(3, 8) == entry(3, 8)
    with socket.create_connection(("127.0.0.1", bookie.port), timeout=10) as sock:
        sock.sendall(version_two + encode_read(3, 0))  # V3 then V2 frames back to back
        data = b""
        while len(data) < 0x13 + 4 + 4 + 24:
            chunk = sock.recv(65536)
            assert chunk
            data += chunk
        assert data[4:6] == b"\x0a\x06" and data[0x17 + 4 : 0x17 + 8] == b"\x02\x02\x00\x00"


async def test_v3_requests_time_out_and_fail_with_the_connection() -> None:
    writers: list[asyncio.StreamWriter] = []
    received = bytearray()  # every request byte the peer got

    async def peer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writers.append(writer)
        while chunk := await reader.read(65536):
            received.extend(chunk)

    server = await asyncio.start_server(peer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        client = await BookieClient.connect(f"127.0.0.1:{port}", timeout=0.3)
        with pytest.raises(BookieTimeout):
            await client.entries_of_ledger(7)
        first = len(received)  # one request; the next ones have the same size
        assert first > 0
        # txnId 2 answered EOK with a header that claims version 1 of the format: refused
        pending = asyncio.ensure_future(client.entries_of_ledger(7))
        await wait_until_async(lambda: len(received) >= 2 * first)  # txnId 2 is in flight
        bad = bytes.fromhex("0a06" "0803" "100b" "1802" "1000" "e20646" "0800" "1007" "1a40"
                            "00000001" + "00" * 60)
        writers[0].write(len(bad).to_bytes(4, "big") + bad)
        await writers[0].drain()
        with pytest.raises(MalformedFrame, match="Unsupported Header Version: 1"):
            await pending
        pending = asyncio.ensure_future(client.entries_of_ledger(8))
        await wait_until_async(lambda: len(received) >= 3 * first)  # txnId 3 is in flight
        writers[0].close()
        with pytest.raises(ConnectionLost):
            await pending
        await client.close()
    finally:
        server.close()


async def test_bookie_info(start_bookie: BookieFactory) -> None:
    """GET_BOOKIE_INFO as upstream's GetBookieInfoProcessorV3: the data file system's total and
    free bytes for the flags asked (both here), EBADVERSION for a header that is not version
    3; the snapshot's disk columns come from it."""
    bookie = start_bookie()
    # txnId 6, requested = TOTAL_DISK_CAPACITY | FREE_DISK_SPACE (field 105 = tag ca 06)
    request = bytes.fromhex("0000000d" "0a06" "0803" "1008" "1806" "ca0602" "0803")
    answer = Response()
    answer.ParseFromString(exchange(bookie.port, request)[4:])
    stat = os.statvfs(bookie.data_dir)
    assert (answer.header.version, answer.header.operation, answer.header.txnId) == (3, 8, 6)
    assert answer.status == 0 and answer.getBookieInfoResponse.status == 0
    info = answer.getBookieInfoResponse
    assert info.totalDiskCapacity == stat.f_blocks * stat.f_frsize
    assert 0 < info.freeDiskSpace <= info.totalDiskCapacity
    # only the free space asked for: no capacity in the answer
    free_only = bytes.fromhex("0000000d" "0a06" "0803" "1008" "1806" "ca0602" "0802")
    answer.ParseFromString(exchange(bookie.port, free_only)[4:])
    assert answer.getBookieInfoResponse.HasField("freeDiskSpace")
    assert not answer.getBookieInfoResponse.HasField("totalDiskCapacity")
    # version 2 in the header: EBADVERSION (503) in the response and its body
    version_two = bytes.fromhex("0000000d" "0a06" "0802" "1008" "1806" "ca0602" "0803")
    assert exchange(bookie.port, version_two) == bytes.fromhex(
        "00000011" "0a06" "0803" "1008" "1806" "10f703" "ca0603" "08f703"
    )  # fmt: skip
    async with await BookieClient.connect(bookie.bookie_id) as client:
        total, free = await client.bookie_info()
        assert total == stat.f_blocks * stat.f_frsize and 0 < free <= total
