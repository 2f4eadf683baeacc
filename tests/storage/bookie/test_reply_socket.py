"""Add responses sent by the journal's writer thread (`addpath.ReplySocket`, `ReplyRun`): a
synced group's run leaves on the connection's socket from that thread; what a full socket
does not take, and anything the loop writes meanwhile, follows it whole and in order; a client
that stops reading, or goes away with adds in flight, gets whole frames or nothing."""

from __future__ import annotations

import asyncio
import os
import socket
import threading
from pathlib import Path
from typing import cast

import uvloop

from storage.bookie.addpath import GroupWriter, ReplyRun, ReplySocket
from storage.bookie.journal import journal_path
from storage.bookie.protocol import OpCode, ResultCode, encode_add, encode_read
from storage.bookie_client import BookieClient
from tests.storage.bookie.conftest import BookieFactory
from tests.storage.bookie.support import MASTER_KEY, entry
from tests.storage.bookie.test_addpath import _reports, _writer
from tests.storage.bookie.test_batch_path import responses
from tests.support import wait_until_async


class Flow(asyncio.Protocol):
    """What the bookie's connection does with flow control: told of every byte the transport
    holds (high-water mark 0) and of when it has written them all (`ReplySocket.drained`)."""

    def __init__(self, reply: ReplySocket) -> None:
        self.reply = reply

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not subclasses of asyncio's
        cast(asyncio.WriteTransport, transport).set_write_buffer_limits(high=0, low=0)

    def resume_writing(self) -> None:
        self.reply.drained()


def send_buffer_max() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/tcp_wmem").read_text().split()[2])
    except (OSError, ValueError, IndexError):
        return 4 << 20


def fill(sock: socket.socket) -> int:
    """Bytes written straight to the (non-blocking) socket until it takes no more."""
    written = 0
    while True:
        try:
            written += sock.send(b"f" * 4096)
        except BlockingIOError:
            return written


def read_exactly(sock: socket.socket, size: int, timeout: float = 10) -> bytes:
    sock.settimeout(timeout)
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(min(size - len(data), 1 << 20))
        assert chunk, f"closed after {len(data)} of {size} bytes"
        data += chunk
    return bytes(data)


async def test_runs_leave_from_the_writer_and_a_full_socket_hands_the_rest_to_the_loop(
    tmp_path: Path,
) -> None:
    await full_socket_scenario(tmp_path)


def test_the_same_on_uvloop(tmp_path: Path) -> None:
    """The bookie runs on uvloop, whose transports write and report flow control their own way."""
    uvloop.run(full_socket_scenario(tmp_path))


async def full_socket_scenario(tmp_path: Path) -> None:
    loop = asyncio.get_running_loop()
    ours, peer = socket.socketpair()
    ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    peer.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    reply = ReplySocket(ours.fileno())
    transport, _ = await loop.connect_accepted_socket(lambda: Flow(reply), ours)
    fd = os.open(journal_path(tmp_path, 1), os.O_RDWR | os.O_CREAT, 0o644)
    writer: GroupWriter = _writer(tmp_path, fd)
    try:
        # A synced run is sent whole by the writer, before the loop hears of its group.
        run = ReplyRun(reply, b"a" * 100)
        _reports(writer, writer.submit([b"record"], 1, [run]))
        assert run.sent == 100 and read_exactly(peer, 100) == b"a" * 100

        # A run larger than the socket takes: the writer sends part, and holds the socket.
        big = ReplyRun(reply, bytes(range(256)) * 4096)
        _reports(writer, writer.submit([b"record"], 1, [big]))
        assert 0 < big.sent < len(big.data) and reply.held
        assert not reply.write(transport, [b"loop"])  # the loop's bytes wait for the rest
        after = ReplyRun(reply, b"z" * 10)
        _reports(writer, writer.submit([b"record"], 1, [after]))
        assert after.sent == 0  # left to the loop: it must not pass the held run

        # The loop sends the rest, then what it held, then the run the writer left to it.
        reply.send_rest(transport, big)
        assert not reply.held
        assert reply.write(transport, [b"loop"])
        reply.send_rest(transport, after)
        # The peer reads a little: the socket has room, but the transport (whose loop has not
        # run since) still holds bytes, so the writer still leaves runs to the loop.
        head = read_exactly(peer, 4096)
        assert transport.get_write_buffer_size() > 0
        mid = ReplyRun(reply, b"m" * 10)
        _reports(writer, writer.submit([b"record"], 1, [mid]))
        assert mid.sent == 0
        reply.send_rest(transport, mid)
        expected = big.data + b"loop" + b"z" * 10 + b"m" * 10
        tail = await loop.run_in_executor(None, read_exactly, peer, len(expected) - len(head))
        assert head + tail == expected

        # While the transport still holds bytes the writer leaves runs to the loop; once it
        # has written them all (drained), the writer sends again.
        await wait_until_async(lambda: transport.get_write_buffer_size() == 0)
        again = ReplyRun(reply, b"b" * 50)
        _reports(writer, writer.submit([b"record"], 1, [again]))
        assert again.sent == 50 and read_exactly(peer, 50) == b"b" * 50

        # A run the full socket takes none of is owed by the loop: until the loop has written
        # it, the writer sends no later run, even once the socket has room (runs leave in the
        # order of their groups).
        filled = fill(ours)
        owed = ReplyRun(reply, b"o" * 20)
        _reports(writer, writer.submit([b"record"], 1, [owed]))
        assert owed.sent == 0 and reply.owed == 1 and not reply.held
        assert read_exactly(peer, filled) == b"f" * filled  # room again, nothing held
        later = ReplyRun(reply, b"l" * 20)
        _reports(writer, writer.submit([b"record"], 1, [later]))
        assert later.sent == 0 and reply.owed == 2
        reply.send_rest(transport, owed)
        reply.send_rest(transport, later)
        assert reply.owed == 0
        tail = await loop.run_in_executor(None, read_exactly, peer, 40)
        assert tail == b"o" * 20 + b"l" * 20
        await wait_until_async(lambda: transport.get_write_buffer_size() == 0)
        after_all = ReplyRun(reply, b"a" * 30)
        _reports(writer, writer.submit([b"record"], 1, [after_all]))
        assert after_all.sent == 30 and read_exactly(peer, 30) == b"a" * 30

        # A failed group sends nothing; a closed socket takes nothing.
        reply.close()
        closed = ReplyRun(reply, b"c" * 10)
        _reports(writer, writer.submit([b"record"], 1, [closed]))
        assert closed.sent == 0
    finally:
        writer.close()
        os.close(writer.fd)
        transport.abort()
        peer.close()


async def test_a_failed_group_sends_none_of_its_runs(tmp_path: Path) -> None:
    ours, peer = socket.socketpair()
    reply = ReplySocket(ours.fileno())
    journal_path(tmp_path, 1).write_bytes(b"")
    fd = os.open(journal_path(tmp_path, 1), os.O_RDONLY)  # its writes fail: EBADF
    writer = _writer(tmp_path, fd)
    try:
        run = ReplyRun(reply, b"never")
        (report,) = _reports(writer, writer.submit([b"record"], 1, [run]))
        assert report[1] != 0 and run.sent == 0
        peer.setblocking(False)
        try:
            leaked = peer.recv(100)
        except BlockingIOError:
            leaked = b""
        assert leaked == b""
    finally:
        writer.close()
        os.close(writer.fd)
        reply.close()
        ours.close()
        peer.close()


async def test_a_client_that_stops_reading_gets_every_response_whole(
    start_bookie: BookieFactory,
) -> None:
    """Thousands of adds, with reads among them, from a client that reads nothing until it
    has sent them all (or the bookie, its responses backed up, stops reading): every add is
    acknowledged once, every read answered with its entry, and the stream parses to the end."""
    bookie = start_bookie()
    # More responses (28 bytes each) than the bookie's socket can buffer however far the
    # kernel grows its send buffer (tcp_wmem's maximum), so the socket fills.
    count, ledger = send_buffer_max() // 28 + 20_000, 7
    frames = []
    for i in range(count):
        frames.append(encode_add(ledger, i, MASTER_KEY, entry(ledger, i)))
        if i % 500 == 499:
            frames.append(encode_read(ledger, i))
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", bookie.port))
    with sock:
        sent = threading.Event()

        def send_all() -> None:
            sock.sendall(b"".join(frames))
            sent.set()

        sender = threading.Thread(target=send_all, daemon=True)
        sender.start()
        sent.wait(3)  # all sent, or the bookie stopped reading: read from here on
        # 28 bytes per add response; a read's adds its entry
        size = 28 * len(frames) + sum(len(entry(ledger, i)) for i in range(499, count, 500))
        found = responses(read_exactly(sock, size, timeout=30))
        sender.join(30)
        sock.settimeout(0.5)
        try:
            extra = sock.recv(65536)
        except TimeoutError:
            extra = b""
    assert not sender.is_alive() and extra == b""
    adds = sorted(eid for op, code, lid, eid, _ in found if op == OpCode.ADD_ENTRY
                  and code == ResultCode.EOK and lid == ledger)
    assert adds == list(range(count))
    reads = [(eid, code, data) for op, code, _, eid, data in found if op == OpCode.READ_ENTRY]
    assert reads == [(i, ResultCode.EOK, entry(ledger, i)) for i in range(499, count, 500)]


async def test_a_client_gone_with_adds_in_flight_harms_no_other(
    start_bookie: BookieFactory,
) -> None:
    bookie = start_bookie()
    for round_ in range(5):
        with socket.create_connection(("127.0.0.1", bookie.port)) as gone:
            gone.sendall(b"".join(encode_add(9, round_ * 2000 + i, MASTER_KEY,
                                             entry(9, round_ * 2000 + i)) for i in range(2000)))
            gone.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\1\0\0\0\0\0\0\0")  # RST
        async with await BookieClient.connect(bookie.bookie_id) as client:
            await client.add(10, round_, MASTER_KEY, entry(10, round_))
            assert await client.read(10, round_) == entry(10, round_)
    assert bookie.process is not None and bookie.process.poll() is None
