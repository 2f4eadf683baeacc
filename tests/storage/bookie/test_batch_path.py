"""The server's batch path: every request of one read answered as one request at a time would
be, adds without flags acknowledged together after their journal group is durable, and a
journal group that cannot be written answered EIO for each of its adds."""

from __future__ import annotations

import asyncio
import os
import socket
import struct
from pathlib import Path

from storage.bookie.bookie import Bookie, BookieSettings
from storage.bookie.format import RECORD_HEADER_LEN
from storage.bookie.journal import ZERO_MARK, Journal, JournalSettings, replay
from storage.bookie.metrics import BookieMetrics
from storage.bookie.protocol import (
    FLAG_DO_FENCING,
    FLAG_HIGH_PRIORITY,
    FLAG_RECOVERY_ADD,
    OpCode,
    ResultCode,
    decode_response,
    encode_add,
    encode_read,
)
from storage.bookie.server import RequestHandler
from tests.storage.bookie.conftest import BookieFactory
from tests.storage.bookie.support import MASTER_KEY, entry

OTHER_KEY = b"\xee" * 20
Answer = tuple[OpCode, int, int, int, bytes]  # opcode, code, ledger, entry, entry bytes


def responses(data: bytes) -> list[Answer]:
    found = []
    offset = 0
    while offset < len(data):
        (size,) = struct.unpack_from(">I", data, offset)
        r = decode_response(data[offset + 4 : offset + 4 + size])
        found.append((r.opcode, r.code, r.ledger_id, r.entry_id, r.entry))
        offset += 4 + size
    return found


def receive(sock: socket.socket, count: int) -> list[Answer]:
    """`count` whole responses from `sock` (5 s at most for each read)."""
    sock.settimeout(5)
    data = b""
    while True:
        found = responses_if_whole(data)
        if found is not None and len(found) >= count:
            return found
        chunk = sock.recv(65536)
        assert chunk, f"connection closed after {data!r}"
        data += chunk


def responses_if_whole(data: bytes) -> list[Answer] | None:
    offset = 0
    while offset < len(data):
        if len(data) - offset < 4:
            return None
        (size,) = struct.unpack_from(">I", data, offset)
        if len(data) - offset - 4 < size:
            return None
        offset += 4 + size
    return responses(data)


def corrupt(packaged: bytes) -> bytes:
    return packaged[:-1] + bytes([packaged[-1] ^ 0xFF])


async def test_one_read_of_mixed_requests_is_answered_in_full(
    start_bookie: BookieFactory,
) -> None:
    bookie = start_bookie()
    frames = [
        encode_add(1, 0, MASTER_KEY, entry(1, 0)),
        encode_add(1, 1, MASTER_KEY, entry(1, 1)),
        encode_read(1, 0),  # not an add: read after the adds before it, from the write cache
        encode_add(1, 2, MASTER_KEY, corrupt(entry(1, 2))),  # bad digest: EBADREQ
        encode_add(1, 3, OTHER_KEY, entry(1, 3)),  # another master key: EUA
        encode_add(2, 0, MASTER_KEY, entry(2, 0), FLAG_RECOVERY_ADD | FLAG_HIGH_PRIORITY),
        encode_add(1, 4, MASTER_KEY, entry(1, 4)),
        encode_read(1, 4),
        encode_read(3, 0),  # an unknown ledger: ENOLEDGER
    ]
    with socket.create_connection(("127.0.0.1", bookie.port)) as sock:
        sock.sendall(b"".join(frames))
        found = receive(sock, len(frames))
    assert len(found) == len(frames)
    by_request = {(opcode, lid, eid): (code, data) for opcode, code, lid, eid, data in found}
    add, read = OpCode.ADD_ENTRY, OpCode.READ_ENTRY
    assert by_request == {
        (add, 1, 0): (ResultCode.EOK, b""),
        (add, 1, 1): (ResultCode.EOK, b""),
        (read, 1, 0): (ResultCode.EOK, entry(1, 0)),
        (add, 1, 2): (ResultCode.EBADREQ, b""),
        (add, 1, 3): (ResultCode.EUA, b""),
        (add, 2, 0): (ResultCode.EOK, b""),
        (add, 1, 4): (ResultCode.EOK, b""),
        (read, 1, 4): (ResultCode.EOK, entry(1, 4)),
        (read, 3, 0): (ResultCode.ENOLEDGER, b""),
    }
    # What was acknowledged is there after a crash: the journal replays it.
    bookie.kill()
    bookie.start()
    with socket.create_connection(("127.0.0.1", bookie.port)) as sock:
        reads = [(1, 0), (1, 1), (2, 0), (1, 4), (1, 2)]
        sock.sendall(b"".join(encode_read(lid, eid) for lid, eid in reads))
        found = receive(sock, len(reads))
    assert sorted((lid, eid, code, data) for _, code, lid, eid, data in found) == sorted(
        [(lid, eid, ResultCode.EOK, entry(lid, eid)) for lid, eid in reads[:-1]]
        + [(1, 2, ResultCode.ENOENTRY, b"")]
    )


async def test_a_journal_group_that_cannot_be_written_answers_eio_for_each_add(
    small_disk: Path,
) -> None:
    settings = BookieSettings(small_disk / "bookie",
                              journal=JournalSettings(journalPreAllocSizeMB=1))
    bookie = Bookie(settings)
    await bookie.open()
    metrics = BookieMetrics()
    handler = RequestHandler(bookie, metrics)
    sent: list[bytes] = []
    answered = asyncio.Event()

    def send(frame: bytes) -> None:
        sent.append(frame)
        answered.set()

    filler = small_disk / "filler"
    try:
        # Fill the disk: the journal's next preallocation (the group is over its 1 MiB) fails.
        with open(filler, "wb") as f:
            stat = os.statvfs(small_disk)
            os.posix_fallocate(f.fileno(), 0, stat.f_bavail * stat.f_frsize)
        payload = os.urandom(64 * 1024)
        buf = b"".join(encode_add(5, i, MASTER_KEY, entry(5, i, payload)) for i in range(24))
        handler.handle_buffer(buf, 0, len(buf), send)  # one read of 24 whole frames
        await asyncio.wait_for(answered.wait(), 10)
        found = responses(b"".join(sent))
        assert [(opcode, code, lid, eid) for opcode, code, lid, eid, _ in found] == [
            (OpCode.ADD_ENTRY, ResultCode.EIO, 5, i) for i in range(24)
        ]
        assert metrics.add.count(ok=False) == 24 and metrics.add.count(ok=True) == 0
    finally:
        filler.unlink(missing_ok=True)
        await bookie.close()


async def test_when_durable_runs_after_the_records_before_it_are_synced(
    tmp_path: Path,
) -> None:
    journal = Journal(tmp_path / "journal", JournalSettings(journalPreAllocSizeMB=1))
    journal.start()
    try:
        durable: asyncio.Future[list[bytes]] = asyncio.get_running_loop().create_future()

        bodies = [f"record {i}".encode() * 10 for i in range(50)]
        size = sum(RECORD_HEADER_LEN + len(body) for body in bodies)

        def done(error: BaseException | None) -> None:
            assert error is None
            # Every record appended before the callback is synced when it runs: the journal's
            # synced mark is past them, and they are in its file.
            assert journal.last_mark.offset >= size
            durable.set_result(list(replay(journal.directory, ZERO_MARK)))

        for body in bodies:
            journal.append(body)
        journal.when_durable(done)
        assert await asyncio.wait_for(durable, 10) == bodies

        nothing: asyncio.Future[BaseException | None] = (
            asyncio.get_running_loop().create_future()
        )
        journal.when_durable(nothing.set_result)  # with nothing appended since
        assert await asyncio.wait_for(nothing, 10) is None
    finally:
        await journal.close()


async def test_negative_ledger_ids_are_refused_and_leave_the_bookie_whole(
    start_bookie: BookieFactory,
) -> None:
    """Ledger ids are never negative: an add or a fencing read of one answers EBADREQ and
    stores nothing (the index keys are unsigned: a stored one broke every later checkpoint),
    and a read below entry -1 answers ENOENTRY instead of closing the connection."""
    bookie = start_bookie()
    frames = [
        encode_add(-1, 0, MASTER_KEY, entry(-1, 0)),
        encode_read(-1, 0, MASTER_KEY, FLAG_DO_FENCING),
        encode_add(1, 0, MASTER_KEY, entry(1, 0)),
        encode_read(1, -5),
        encode_read(-1, 0),
    ]
    with socket.create_connection(("127.0.0.1", bookie.port)) as sock:
        sock.sendall(b"".join(frames))
        found = receive(sock, len(frames))
    assert sorted((opcode, lid, eid, code) for opcode, code, lid, eid, _ in found) == sorted([
        (OpCode.ADD_ENTRY, -1, 0, ResultCode.EBADREQ),
        (OpCode.READ_ENTRY, -1, 0, ResultCode.EBADREQ),
        (OpCode.ADD_ENTRY, 1, 0, ResultCode.EOK),
        (OpCode.READ_ENTRY, 1, -5, ResultCode.ENOENTRY),
        (OpCode.READ_ENTRY, -1, 0, ResultCode.ENOLEDGER),
    ])
    bookie.kill()
    bookie.start()  # replays the journal and checkpoints: nothing of ledger -1 in it
    with socket.create_connection(("127.0.0.1", bookie.port)) as sock:
        sock.sendall(encode_read(1, 0) + encode_add(1, 1, MASTER_KEY, entry(1, 1)))
        found = receive(sock, 2)
    assert sorted((lid, eid, code) for _, code, lid, eid, _ in found) == [
        (1, 0, ResultCode.EOK), (1, 1, ResultCode.EOK)]
