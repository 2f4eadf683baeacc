"""The compiled add path (`storage.bookie.addpath`) against the protocol's Python encoder and
decoder and the `crc32c` wheel: random frames, malformed frames, oversize entries and
negative ids, in process and through a real bookie process."""

from __future__ import annotations

import errno
import os
import select
import socket
import struct
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import crc32c as wheel
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storage.bookie.addpath import (
    GroupWriter,
    WriteCache,
    crc32c,
    entry_digest,
    frame_records,
    frame_spans,
    frames_end,
    record_header,
    take_adds,
    with_result,
)
from storage.bookie.entrylog import Location
from storage.bookie.errors import MalformedFrame
from storage.bookie.format import decode_record, encode_record, package_entry
from storage.bookie.index import Index
from storage.bookie.journal import LogMark, journal_path, replay
from storage.bookie.protocol import (
    MAX_FRAME_SIZE,
    AddRequest,
    FrameReader,
    OpCode,
    ResultCode,
    decode_request,
    encode_add,
    encode_add_response,
    encode_read,
)
from tests.storage.bookie.conftest import BookieFactory
from tests.storage.bookie.support import MASTER_KEY, entry
from tests.storage.bookie.test_batch_path import receive
from tests.support import REPO, wait_until

OTHER_KEY = b"\xee" * 20
NO_WAIT = 1 << 62
SETTINGS = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


def python_digest(packaged: bytes) -> int:
    return wheel.crc32c(packaged[36:], wheel.crc32c(packaged[:32]))


@st.composite
def frames(draw: st.DrawFn) -> tuple[bytes, int]:
    """An encoded request (an add of any kind, now and then damaged, or a read) and its kind:
    0 for an add the fast path must take, 1 for any other frame."""
    kind = draw(st.sampled_from(["add", "add", "add", "flags", "key", "digest", "ids", "read"]))
    ledger_id = draw(st.integers(0, 5))
    entry_id = draw(st.integers(0, 1 << 40))
    payload = draw(st.binary(max_size=3000))
    packaged = package_entry(ledger_id, entry_id, entry_id - 1, len(payload), payload)
    if kind == "read":
        return encode_read(ledger_id, entry_id), 1
    if kind == "flags":
        return encode_add(ledger_id, entry_id, MASTER_KEY, packaged,
                          draw(st.sampled_from([1, 2, 4, 6]))), 1
    if kind == "key":
        return encode_add(ledger_id, entry_id, OTHER_KEY, packaged), 1
    if kind == "digest":
        damaged = bytearray(packaged)
        at = draw(st.integers(16, len(packaged) - 1))  # past the ids, which the frame repeats
        damaged[at] ^= 1 << draw(st.integers(0, 7))
        return encode_add(ledger_id, entry_id, MASTER_KEY, bytes(damaged)), 1
    if kind == "ids":
        bad_ledger = draw(st.booleans())
        negative = draw(st.integers(-(1 << 63), -1))
        lid, eid = (negative, entry_id) if bad_ledger else (ledger_id, negative)
        packaged = package_entry(lid, eid, -1, len(payload), payload)
        return encode_add(lid, eid, MASTER_KEY, packaged), 1
    return encode_add(ledger_id, entry_id, MASTER_KEY, packaged), 0


@dataclass
class Expected:
    end: int
    adds: list[AddRequest]


def expected_run(buf: bytes, writable: dict[int, bytes]) -> Expected:
    """What the module's docstring says `take_adds` takes, decided with the Python decoder."""
    pos, adds = 0, []
    while pos < len(buf):
        (size,) = struct.unpack_from(">I", buf, pos)
        request = decode_request(buf[pos + 4 : pos + 4 + size])
        if not (
            isinstance(request, AddRequest) and request.flags == 0
            and request.ledger_id >= 0 and request.entry_id >= 0
            and writable.get(request.ledger_id) == request.master_key
            and python_digest(request.entry) == struct.unpack_from(">I", request.entry, 32)[0]
        ):
            break
        adds.append(request)
        pos += 4 + size
    return Expected(pos, adds)


@SETTINGS
@given(st.lists(frames(), max_size=12), st.sets(st.integers(0, 5)))
def test_take_adds_agrees_with_the_python_decoder_on_random_frames(
    drawn: list[tuple[bytes, int]], writable_ids: set[int]
) -> None:
    writable = {lid: MASTER_KEY for lid in writable_ids}
    buf = b"".join(frame for frame, _ in drawn)
    expected = expected_run(buf, writable)
    cache = WriteCache()
    pos, count, size, records, responses = take_adds(buf, 0, len(buf), writable, cache, NO_WAIT)
    assert pos == expected.end
    assert count == len(expected.adds)
    assert size == sum(len(add.entry) for add in expected.adds)
    assert responses == b"".join(
        encode_add_response(ResultCode.EOK, add.ledger_id, add.entry_id) for add in expected.adds)
    bodies, offset = [], 0
    while (found := decode_record(records, offset)) is not None:
        body, offset = found
        bodies.append(bytes(body))
    assert offset == len(records)
    assert bodies == [add.entry for add in expected.adds]
    assert records == b"".join(
        struct.pack(">II", len(add.entry), wheel.crc32c(add.entry)) + add.entry
        for add in expected.adds)
    last: dict[tuple[int, int], bytes] = {}
    for add in expected.adds:
        last[add.ledger_id, add.entry_id] = add.entry
    assert {(lid, eid): body for lid, eid, body in cache.items()} == last
    assert cache.entries == len(last)
    assert cache.size == sum(len(value) for value in last.values())
    for (ledger_id, entry_id), kept in last.items():
        assert cache.get(ledger_id, entry_id) == kept
    for ledger_id in {lid for lid, _ in last}:
        assert cache.last_entry(ledger_id) == max(eid for lid, eid in last if lid == ledger_id)
        assert sorted(cache.entry_ids(ledger_id)) == sorted(
            eid for lid, eid in last if lid == ledger_id)
    # the checkpoint frames the cached entries with the CRCs the add path computed
    assert cache.sort() == len(last)
    _, _, run, _ = cache.frame_sorted(0, len(last), 0, 0, 1 << 50, 1 << 50, [])
    assert run == b"".join(encode_record(last[key]) for key in sorted(last))


@SETTINGS
@given(st.binary(max_size=5000), st.integers(0, (1 << 32) - 1))
def test_crc32c_digest_and_record_header_agree_with_the_crc32c_wheel(
    data: bytes, value: int
) -> None:
    assert crc32c(data) == wheel.crc32c(data)
    assert crc32c(data, value) == wheel.crc32c(data, value)
    assert crc32c(memoryview(data)[1:]) == wheel.crc32c(data[1:])
    assert record_header(data) == struct.pack(">II", len(data), wheel.crc32c(data))
    packaged = package_entry(1, 2, 1, len(data), data)
    assert entry_digest(packaged) == python_digest(packaged)


@SETTINGS
@given(st.lists(frames(), max_size=6), st.integers(0, 200), st.binary(max_size=64))
def test_truncated_and_garbage_buffers_never_read_past_their_end(
    drawn: list[tuple[bytes, int]], cut: int, garbage: bytes
) -> None:
    """Any buffer, any span inside it: take_adds stops within it and takes only whole
    admissible adds; frames_end finds the same whole frames as the Python reader would."""
    buf = b"".join(frame for frame, _ in drawn) + garbage
    end = max(0, len(buf) - cut)
    pos, *_ = take_adds(buf, 0, end, {lid: MASTER_KEY for lid in range(6)},
                        WriteCache(), NO_WAIT)
    assert 0 <= pos <= end
    whole = 0
    while whole + 4 <= end:
        (size,) = struct.unpack_from(">I", buf, whole)
        if size < 4 or whole + 4 + size > end:
            break
        whole += 4 + size
    assert pos <= whole


def test_malformed_lengths_raise_and_short_tails_wait() -> None:
    with pytest.raises(MalformedFrame, match="frame length 3 out of range"):
        frames_end(b"\x00\x00\x00\x03abc", 0, 1024)
    with pytest.raises(MalformedFrame, match="out of range"):
        frames_end(struct.pack(">I", 1025) + b"\0" * 1025, 0, 1024)
    add = encode_add(1, 0, MASTER_KEY, entry(1, 0))
    assert frames_end(add + add[:3], 0, 1024) == (len(add), 4)
    assert frames_end(add + add[:10], 0, 1024) == (len(add), len(add))
    assert frames_end(add, 0, 1024) == (len(add), 0)
    assert frame_spans(add + add, 0, 2 * len(add)) == [
        (4, len(add)), (len(add) + 4, 2 * len(add))]
    with pytest.raises(ValueError, match="outside a buffer"):
        take_adds(add, 0, len(add) + 1, {1: MASTER_KEY}, WriteCache(), NO_WAIT)
    with pytest.raises(ValueError, match="outside a buffer"):
        take_adds(add, -1, len(add), {1: MASTER_KEY}, WriteCache(), NO_WAIT)


def test_short_bodies_and_a_full_cache_are_left_to_the_general_path() -> None:
    writable = {1: MASTER_KEY}
    add = encode_add(1, 0, MASTER_KEY, entry(1, 0))
    # An add body cut below its entry header (the length says so): not taken.
    short = struct.pack(">I", 4 + 20 + 35) + add[4 : 4 + 4 + 20 + 35]
    assert take_adds(short, 0, len(short), writable, WriteCache(), NO_WAIT)[:3] == (0, 0, 0)
    cache = WriteCache()
    cache.put(9, 0, b"x" * 100)
    assert take_adds(add, 0, len(add), writable, cache, 100)[:3] == (0, 0, 0)
    assert take_adds(add, 0, len(add), writable, cache, 101)[:2] == (len(add), 1)


def test_with_result_rewrites_every_response_code() -> None:
    run = b"".join(encode_add_response(ResultCode.EOK, 3, eid) for eid in range(4))
    assert with_result(run, ResultCode.EIO) == b"".join(
        encode_add_response(ResultCode.EIO, 3, eid) for eid in range(4))
    assert with_result(b"", ResultCode.EIO) == b""


def test_frame_reader_keeps_an_incomplete_tail_until_it_is_whole() -> None:
    reader = FrameReader()
    add = encode_add(1, 0, MASTER_KEY, entry(1, 0))
    stream = add * 3
    seen = []
    for piece in (stream[:5], stream[5:70], stream[70:200], stream[200:]):
        buf, start, end = reader.whole(piece)
        seen += [buf[a:b] for a, b in frame_spans(buf, start, end)]
    assert seen == [add[4:]] * 3


def test_oversize_frames_close_the_connection_and_large_entries_go_through(
    start_bookie: BookieFactory,
) -> None:
    """A frame above the bookie's limit closes that connection only; a 4 MiB entry (within
    it) is taken by the add path, acknowledged and read back whole."""
    bookie = start_bookie()
    big = os.urandom(4 * 1024 * 1024)
    with socket.create_connection(("127.0.0.1", bookie.port)) as sock:
        sock.sendall(encode_add(2, 0, MASTER_KEY, entry(2, 0)))  # makes ledger 2 writable
        assert [(c, lid, eid) for _, c, lid, eid, _ in receive(sock, 1)] == [
            (ResultCode.EOK, 2, 0)]
        sock.sendall(encode_add(2, 1, MASTER_KEY, entry(2, 1, big)))
        assert [(c, lid, eid) for _, c, lid, eid, _ in receive(sock, 1)] == [
            (ResultCode.EOK, 2, 1)]
        sock.sendall(encode_read(2, 1))
        [(opcode, code, _, _, body)] = receive(sock, 1)
        assert (opcode, code, body) == (OpCode.READ_ENTRY, ResultCode.EOK, entry(2, 1, big))
    with socket.create_connection(("127.0.0.1", bookie.port)) as sock:
        sock.sendall(struct.pack(">I", MAX_FRAME_SIZE + 1) + b"\x02\x01\x00\x00")
        sock.settimeout(5)
        assert sock.recv(100) == b""  # closed by the bookie
    with socket.create_connection(("127.0.0.1", bookie.port)) as sock:
        sock.sendall(encode_read(2, 0))
        assert [(c, lid, eid) for _, c, lid, eid, _ in receive(sock, 1)] == [
            (ResultCode.EOK, 2, 0)]


def test_negative_and_damaged_adds_to_a_writable_ledger_store_nothing(
    start_bookie: BookieFactory,
) -> None:
    """On a ledger the add path takes (writable, same key), a negative entry id, a damaged
    digest and another master key are each answered with their code by the general path,
    between the adds around them, and nothing of them is stored."""
    bookie = start_bookie()
    damaged = bytearray(entry(4, 3))
    damaged[-1] ^= 0xFF
    frames = [
        encode_add(4, 0, MASTER_KEY, entry(4, 0)),
        encode_add(4, 1, MASTER_KEY, entry(4, 1)),
        encode_add(4, -5, MASTER_KEY, package_entry(4, -5, -1, 10, b"x" * 10)),
        encode_add(4, 2, MASTER_KEY, entry(4, 2)),
        encode_add(4, 3, MASTER_KEY, bytes(damaged)),
        encode_add(4, 4, OTHER_KEY, entry(4, 4)),
        encode_add(4, 5, MASTER_KEY, entry(4, 5)),
    ]
    with socket.create_connection(("127.0.0.1", bookie.port)) as sock:
        sock.sendall(frames[0])
        receive(sock, 1)
        sock.sendall(b"".join(frames[1:]))
        found = receive(sock, len(frames) - 1)
        assert sorted((lid, eid, code) for _, code, lid, eid, _ in found) == sorted([
            (4, 1, ResultCode.EOK), (4, -5, ResultCode.EBADREQ), (4, 2, ResultCode.EOK),
            (4, 3, ResultCode.EBADREQ), (4, 4, ResultCode.EUA), (4, 5, ResultCode.EOK),
        ])
    bookie.kill()
    bookie.start()  # replayed from the journal
    with socket.create_connection(("127.0.0.1", bookie.port)) as sock:
        sock.sendall(b"".join(encode_read(4, eid) for eid in range(6)))
        found = receive(sock, 6)
    assert sorted((eid, code) for _, code, _, eid, _ in found) == [
        (0, ResultCode.EOK), (1, ResultCode.EOK), (2, ResultCode.EOK),
        (3, ResultCode.ENOENTRY), (4, ResultCode.ENOENTRY), (5, ResultCode.EOK),
    ]


@SETTINGS
@given(st.lists(st.binary(max_size=300), max_size=40), st.integers(0, 1 << 40),
       st.integers(1, 4000), st.integers(1, 4000), st.integers(0, (1 << 32) - 1))
def test_frame_records_agrees_with_encode_record_and_location_encode(
    bodies: list[bytes], offset: int, room: int, chunk: int, log_id: int
) -> None:
    """The checkpoint's compiled framing: the same bytes as `encode_record`, the same
    locations as `Location.encode`, stopping where the log is full or the chunk is."""
    limit, chunk_end = offset + room, offset + chunk
    index, end, run, placed = frame_records(bodies, 0, len(bodies), log_id, offset, limit,
                                            chunk_end)
    expected_run, expected_placed, at, taken = b"", [], offset, 0
    for body in bodies:
        if at >= limit:
            break
        expected_placed.append(Location(log_id, at + 8, len(body)).encode())
        expected_run += encode_record(body)
        at += 8 + len(body)
        taken += 1
        if at >= chunk_end:
            break
    assert (index, end, run, placed) == (taken, at, expected_run, expected_placed)


# A write-cache half against a dict: puts (new ids, the same ids again, large entries that take
# a block of their own), drops of ledgers, and the checkpoint's sorted framing.
cache_ops = st.lists(st.one_of(
    st.tuples(st.just("put"), st.integers(0, 6), st.integers(0, 1 << 62),
              st.integers(0, 2000)),
    st.tuples(st.just("again"), st.integers(0, 100), st.just(0), st.integers(0, 2000)),
    st.tuples(st.just("large"), st.integers(0, 6), st.integers(0, 50),
              st.sampled_from([(1 << 18) - 1, 1 << 18, (1 << 20) + 3])),
    st.tuples(st.just("drop"), st.integers(0, 6), st.just(0), st.just(0)),
), max_size=60)


def _model_cache(ops: list[tuple[str, int, int, int]]) -> tuple[WriteCache,
                                                                dict[tuple[int, int], bytes]]:
    cache = WriteCache()
    model: dict[tuple[int, int], bytes] = {}
    for number, (op, a, b, n) in enumerate(ops):
        if op == "drop":
            cache.drop({a})
            model = {key: body for key, body in model.items() if key[0] != a}
            continue
        if op == "again":
            if not model:
                continue
            a, b = sorted(model)[a % len(model)]
        body = bytes([number % 251]) * n
        cache.put(a, b, body)
        model[a, b] = body
    return cache, model


@SETTINGS
@given(cache_ops)
def test_write_cache_agrees_with_a_dict(ops: list[tuple[str, int, int, int]]) -> None:
    cache, model = _model_cache(ops)
    assert cache.entries == len(model)
    assert cache.size == sum(len(body) for body in model.values())
    assert {(lid, eid): body for lid, eid, body in cache.items()} == model
    for (ledger_id, entry_id), body in model.items():
        assert cache.get(ledger_id, entry_id) == body
        assert (ledger_id, entry_id) in cache
    for ledger_id in range(7):
        ids = sorted(eid for lid, eid in model if lid == ledger_id)
        assert sorted(cache.entry_ids(ledger_id)) == ids
        assert cache.last_entry(ledger_id) == (ids[-1] if ids else -1)
        assert cache.get(ledger_id, (1 << 63) - 1) is None
    assert cache.mapped >= cache.size
    other = WriteCache()
    other.put(0, 0, b"kept")
    cache.restore_into(other)
    assert {(lid, eid): body for lid, eid, body in other.items()} == {
        **model, (0, 0): b"kept"}
    cache.release()
    assert (cache.entries, cache.size, cache.mapped, cache.items()) == (0, 0, 0, [])
    assert cache.get(0, 0) is None and cache.last_entry(0) == -1
    cache.put(3, 4, b"after")  # a released half takes entries again
    assert cache.get(3, 4) == b"after"


@SETTINGS
@given(cache_ops, st.integers(0, 1 << 40), st.integers(1, 1 << 21), st.integers(1, 1 << 21),
       st.integers(1, 50), st.integers(0, (1 << 32) - 1))
def test_frame_sorted_agrees_with_encode_record_location_and_index_key(
    ops: list[tuple[str, int, int, int]], offset: int, room: int, chunk: int, piece: int,
    log_id: int,
) -> None:
    """The checkpoint's walk of a half: entries by (ledger, entry), framed as `encode_record`,
    placed as `Location.encode`, keyed as `Index.key`, stopping where the log or the chunk is
    full; piece by piece it covers every entry once."""
    cache, model = _model_cache(ops)
    assert cache.sort() == len(model)
    limit, chunk_end = offset + room, offset + chunk
    keys: list[bytes] = []
    index, end, run, placed = cache.frame_sorted(0, piece, log_id, offset, limit, chunk_end,
                                                 keys)
    expected_run, expected_placed, expected_keys, at = b"", [], [], offset
    for ledger_id, entry_id in sorted(model)[:piece]:
        if at >= limit:
            break
        body = model[ledger_id, entry_id]
        expected_placed.append(Location(log_id, at + 8, len(body)).encode())
        expected_keys.append(Index.key(ledger_id, entry_id))
        expected_run += encode_record(body)
        at += 8 + len(body)
        if at >= chunk_end:
            break
    assert (index, end, run, placed, keys) == (len(expected_keys), at, expected_run,
                                               expected_placed, expected_keys)
    everything: list[bytes] = []
    index, at = 0, 0
    while index < len(model):
        index, at, _, _ = cache.frame_sorted(index, index + piece, 0, at, 1 << 50, 1 << 50,
                                             everything)
    assert everything == [Index.key(lid, eid) for lid, eid in sorted(model)]


def test_take_adds_fills_the_cache_past_many_blocks() -> None:
    """Adds across many blocks (1 MiB each) and a cache limit reached mid-read: the adds
    before the limit are taken and readable, the rest left to the general path."""
    writable = {lid: MASTER_KEY for lid in range(4)}
    payload = b"p" * 4000
    adds = [encode_add(lid, eid, MASTER_KEY, package_entry(lid, eid, eid - 1, 0, payload))
            for eid in range(300) for lid in range(4)]
    buf = b"".join(adds)
    cache = WriteCache()
    one = len(payload) + 36
    pos, count, size, _, _ = take_adds(buf, 0, len(buf), writable, cache, 1000 * one)
    assert (count, size, cache.size) == (1000, 1000 * one, 1000 * one)
    assert pos == sum(len(add) for add in adds[:1000])
    assert cache.mapped >= 4 << 20
    assert cache.get(3, 249) == package_entry(3, 249, 248, 0, payload)
    assert cache.get(0, 250) is None


def test_frame_records_from_a_later_body() -> None:
    bodies = [b"a", b"bb", b"ccc", b"dddd"]
    index, end, run, placed = frame_records(bodies, 1, 3, 7, 100, 1 << 30, 1 << 30)
    assert (index, end) == (3, 100 + 2 * 8 + 5)
    assert run == encode_record(b"bb") + encode_record(b"ccc")
    assert placed == [Location(7, 108, 2).encode(), Location(7, 118, 3).encode()]


def _writer(directory: Path, fd: int, max_size: int = 1 << 30) -> GroupWriter:
    return GroupWriter(fd, 1, 0, os.fsencode(directory), 1.0, 512 * 1024, True, max_size,
                       1 << 16)


def _reports(writer: GroupWriter, token: int) -> list[tuple[int, int, float, int, int, int, int]]:
    """The writer's reports up to the one covering `token` (each wait bounded)."""
    reports: list[tuple[int, int, float, int, int, int, int]] = []
    while not reports or reports[-1][0] < token:
        ready, _, _ = select.select([writer.event_fd], [], [], 10)
        assert ready, "the journal writer reported nothing in 10 s"
        reports += writer.synced()
    return reports


def test_group_writer_writes_many_parts_in_order_and_rolls_the_file(tmp_path: Path) -> None:
    """More parts than one pwritev takes, of many sizes, land in order at the file's offset;
    a group that passes the maximum size is reported at the old file's end and the next one
    goes to a new file, preallocated."""
    fd = os.open(journal_path(tmp_path, 1), os.O_RDWR | os.O_CREAT, 0o644)
    writer = _writer(tmp_path, fd, max_size=100_000)
    try:
        parts = [bytes([i % 251]) * (i % 97) for i in range(3000)]
        size = sum(len(part) for part in parts)
        first = writer.submit(parts[:1500], 1500)
        second = writer.submit(parts[1500:], 1500)
        reports = _reports(writer, second)
        assert sum(r[4] for r in reports) == 3000 and sum(r[3] for r in reports) == size
        assert all(r[1] == 0 for r in reports) and reports[0][0] >= first
        assert reports[-1][5:] == (1, size)  # the mark: file 1, after the records
        assert journal_path(tmp_path, 1).read_bytes()[:size] == b"".join(parts)
        assert journal_path(tmp_path, 2).stat().st_size == 1 << 16
        third = writer.submit([b"next"], 1)
        assert _reports(writer, third)[-1][5:] == (2, 4)
        assert journal_path(tmp_path, 2).read_bytes()[:4] == b"next"
    finally:
        writer.close()
        os.close(writer.fd)


def test_group_writer_reports_a_failed_write_and_takes_more(tmp_path: Path) -> None:
    """A group whose write fails is reported with its errno (the journal answers its adds
    EIO) and the mark does not move; the writer takes more batches afterwards."""
    journal_path(tmp_path, 1).write_bytes(b"")
    fd = os.open(journal_path(tmp_path, 1), os.O_RDONLY)
    writer = _writer(tmp_path, fd)
    try:
        token = writer.submit([b"abc"], 1)
        (report,) = _reports(writer, token)
        assert report[0] == token and report[1] == errno.EBADF
        assert report[5:] == (1, 0)
        again = writer.submit([b"def"], 1)
        assert _reports(writer, again)[-1][1] == errno.EBADF
    finally:
        writer.close()
        os.close(writer.fd)
    with pytest.raises(RuntimeError, match="closed"):
        writer.submit([b"late"], 1)


def test_group_writer_writes_over_zeros_synced_ahead_and_replay_ends_at_them(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The filler writes and syncs zeros a preallocation step ahead of the writer; groups
    written over them are padded with zeros to a page boundary and the next group continues
    at the records' end; a journal whose tail is that zero-filled space replays exactly the
    records written (a zero length ends it) and reports no torn tail."""
    step = 1 << 16
    fd = os.open(journal_path(tmp_path, 1), os.O_RDWR | os.O_CREAT, 0o644)
    os.posix_fallocate(fd, 0, step)
    writer = _writer(tmp_path, fd)
    bodies = [os.urandom(100 + i) for i in range(40)]
    try:
        wait_until(lambda: writer.zeroed >= step)
        for first in range(0, len(bodies), 8):  # five groups, one after another
            token = writer.submit([encode_record(b) for b in bodies[first:first + 8]], 8)
            mark = _reports(writer, token)[-1][5:]
        records = b"".join(encode_record(b) for b in bodies)
        assert mark == (1, len(records))
        assert writer.groups_past_zeroed == 0
        wait_until(lambda: writer.zeroed >= len(records) + step)  # the next step, ahead
        data = journal_path(tmp_path, 1).read_bytes()
        assert data[:len(records)] == records
        assert len(data) >= len(records) + step and not any(data[len(records):])
    finally:
        writer.close()
        os.close(writer.fd)
    with caplog.at_level("WARNING", logger="storage.bookie.journal"):
        assert list(replay(tmp_path, LogMark(1, 0))) == bodies
    assert "tail ignored" not in caplog.text


# Each call in a child interpreter: a read or write out of bounds shows as its crash (or
# a wrong answer) there, not as this test run's.
MISUSES = {
    "frames_end(None, 0, 100)": "TypeError",
    "frames_end(b'\\x00\\x00\\x00\\x08abcdefgh', -1000000, 100)": "ValueError",
    "frames_end(b'\\x00\\x00\\x00\\x08abcdefgh', 0, -1)": "ValueError",
    "frame_spans(None, 0, 0)": "TypeError",
    "frame_spans(b'', 0, 1 << 20)": "ValueError",
    "frame_spans(b'\\x00\\x00', 0, 2)": "ValueError",
    "frame_spans(b'\\x00\\xff\\xff\\xffab', 0, 6)": "ValueError",
    "with_result(None, 1)": "TypeError",
    "take_adds(None, 0, 0, {}, WriteCache(), 1)": "TypeError",
    "take_adds(b'', 0, 0, None, WriteCache(), 1)": "TypeError",
    "take_adds(b'', 0, 0, {}, None, 1)": "TypeError",
    "WriteCache().put(1, 1, None)": "TypeError",
    "WriteCache().put(-1, 1, b'x')": "ValueError",
    "WriteCache().put(1, -1, b'x')": "ValueError",
    "WriteCache().put(1 << 64, 1, b'x')": "OverflowError",
    "WriteCache().restore_into(None)": "TypeError",
    "WriteCache().frame_sorted(-1, 1, 0, 0, 1 << 30, 1 << 30, [])": "ValueError",
    "WriteCache().frame_sorted(1, 2, 0, 0, 1 << 30, 1 << 30, [])": "ValueError",
    "WriteCache().frame_sorted(0, 1, 0, 0, 1 << 30, 1 << 30, None)": "TypeError",
    "frame_records([b'a'], -100000, 1, 0, 0, 1 << 30, 1 << 30)": "ValueError",
    "frame_records([bytearray(100)], 0, 1, 0, 0, 1 << 30, 1 << 30)": "TypeError",
    "frame_records([b'a', memoryview(b'b')], 0, 2, 0, 0, 1 << 30, 1 << 30)": "TypeError",
    "frame_records(None, 0, 1, 0, 0, 1, 1)": "TypeError",
    "GroupWriter(-1, 0, 0, b'/tmp', 1.0, 1, True, 1, 1).submit([b'a', bytearray(2)], 2)":
        "TypeError",
    "GroupWriter(-1, 0, 0, b'/tmp', 1.0, 1, True, 1, 1).submit(None, 1)": "TypeError",
    "GroupWriter(-1, 0, 0, b'/tmp', 1.0, 1, True, 1, 1).submit([b'a'], 1, [b'run'])":
        "TypeError",
    "ReplySocket(-1)": "OSError",
    "ReplyRun(None, b'')": "TypeError",
    "ReplyRun(ReplySocket(0), bytearray(1))": "TypeError",
    "ReplySocket(0).send_rest(None, None)": "TypeError",
    "GroupWriter(-1, 0, 0, b'x' * 5000, 1.0, 1, True, 1, 1)": "ValueError",
    "crc32c(None)": "TypeError",
    "record_header(None)": "TypeError",
    "entry_digest(None)": "TypeError",
}


def _run_child(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-X", "faulthandler", "-c", code], cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True,
                          text=True, timeout=60, check=False)  # fmt: skip


@pytest.mark.parametrize("call", list(MISUSES))
def test_misuse_is_refused_without_touching_memory(call: str) -> None:
    """None for a typed argument, positions outside the buffer, spans that are not whole
    frames, negative first indexes and bodies that are not bytes: each a clear error."""
    done = _run_child(f"from storage.bookie.addpath import *\ntry:\n    {call}\n"
                      f"except {MISUSES[call]} as exc:\n    print('refused', exc)\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("refused"), done.stdout

