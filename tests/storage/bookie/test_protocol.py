"""Golden bytes of BookKeeper V2 frames (layouts from upstream BookieProtoEncoding)."""

from __future__ import annotations

import pytest

from storage.bookie.errors import MalformedFrame
from storage.bookie.format import package_entry
from storage.bookie.protocol import (
    FLAG_RECOVERY_ADD,
    AddRequest,
    Flag,
    FrameReader,
    OpCode,
    ReadRequest,
    ResultCode,
    decode_request,
    decode_request_at,
    decode_response,
    encode_add,
    encode_add_response,
    encode_read,
    encode_response,
)

KEY = bytes(range(20))
ENTRY = package_entry(1, 2, 1, 15, b"hello")


def test_result_codes_are_upstreams() -> None:
    assert {c.name: c.value for c in ResultCode} == {
        "EOK": 0, "ENOLEDGER": 1, "ENOENTRY": 2, "EBADREQ": 100, "EIO": 101, "EUA": 102,
        "EBADVERSION": 103, "EFENCED": 104, "EREADONLY": 105, "ETOOMANYREQUESTS": 106,
        "EUNKNOWNLEDGERSTATE": 107,
    }  # fmt: skip


def test_add_request_golden_bytes() -> None:
    frame = encode_add(1, 2, KEY, ENTRY, Flag.RECOVERY_ADD | Flag.HIGH_PRIORITY)
    # length 4 + 20 + 41 = 65; header: version 2, opcode 1 (ADDENTRY), flags 0x0006.
    assert frame == bytes.fromhex("0000004102010006") + KEY + ENTRY
    request = decode_request(frame[4:])
    assert request == AddRequest(1, 2, KEY, ENTRY, Flag.RECOVERY_ADD | Flag.HIGH_PRIORITY)
    assert isinstance(request, AddRequest) and request.recovery and request.high_priority


def test_read_request_golden_bytes() -> None:
    plain = encode_read(1, -1)
    assert plain == bytes.fromhex(
        "00000014" "02020000" "0000000000000001" "ffffffffffffffff"
    )  # fmt: skip
    assert decode_request(plain[4:]) == ReadRequest(1, -1, None, Flag.NONE)
    fencing = encode_read(1, -1, KEY, Flag.DO_FENCING)
    assert fencing == bytes.fromhex(
        "00000028" "02020001" "0000000000000001" "ffffffffffffffff"
    ) + KEY  # fmt: skip
    request = decode_request(fencing[4:])
    assert isinstance(request, ReadRequest) and request.fencing and request.master_key == KEY


def test_response_golden_bytes() -> None:
    add = encode_response(OpCode.ADD_ENTRY, ResultCode.EFENCED, 1, 2)
    assert add == bytes.fromhex(
        "00000018" "02010000" "00000068" "0000000000000001" "0000000000000002"
    )  # fmt: skip
    read = encode_response(OpCode.READ_ENTRY, ResultCode.EOK, 1, 2, ENTRY)
    assert read == bytes.fromhex(
        "00000041" "02020000" "00000000" "0000000000000001" "0000000000000002"
    ) + ENTRY  # fmt: skip
    decoded = decode_response(read[4:])
    assert (decoded.opcode, decoded.code, decoded.entry) == (OpCode.READ_ENTRY, 0, ENTRY)
    assert decode_response(add[4:]).code == ResultCode.EFENCED


@pytest.mark.parametrize(
    "body",
    [
        b"\x02\x01",  # shorter than a header
        bytes.fromhex("03010000") + KEY + ENTRY,  # protocol version 3 in a V2 frame
        bytes.fromhex("02090000") + b"\0" * 16,  # unknown opcode
        # READ_LAC and WRITE_LAC exist only in the V3 (protobuf) protocol: upstream's V2
        # decoder (RequestEnDeCoderPreV3) has no case for them and rejects the frame.
        bytes.fromhex("02040000") + b"\0" * 16,
        bytes.fromhex("02050000") + KEY + b"\0" * 24,
        bytes.fromhex("02010000") + KEY[:10],  # add without room for its ids
        bytes.fromhex("02020001") + b"\0" * 16,  # fencing read without master key
    ],
)
def test_malformed_requests_are_rejected(body: bytes) -> None:
    with pytest.raises(MalformedFrame):
        decode_request(body)


def test_frame_reader_cuts_and_rejects() -> None:
    reader = FrameReader(max_frame=1024)
    frames = encode_read(1, 0) + encode_read(1, 1)
    assert reader.feed(frames[:10]) == []
    assert len(reader.feed(frames[10:])) == 2
    with pytest.raises(MalformedFrame):
        FrameReader(max_frame=1024).feed(b"\xff\xff\xff\xff" + b"\0" * 8)
    with pytest.raises(MalformedFrame):
        FrameReader().feed(b"\x00\x00\x00\x01\x00")


def test_encoders_refuse_inconsistent_requests() -> None:
    with pytest.raises(ValueError):
        encode_add(1, 3, KEY, ENTRY)  # entry 2 packaged, 3 claimed
    with pytest.raises(ValueError):
        encode_read(1, 0, None, Flag.DO_FENCING)


def test_fast_paths_agree_with_the_plain_codecs() -> None:
    assert encode_add_response(ResultCode.EFENCED, 1, 2) == encode_response(
        OpCode.ADD_ENTRY, ResultCode.EFENCED, 1, 2
    )
    frames = encode_read(7, 3) + encode_add(1, 2, KEY, ENTRY, FLAG_RECOVERY_ADD)
    buf, spans = FrameReader().spans(frames)
    assert [decode_request_at(buf, start, end) for start, end in spans] == [
        decode_request(body) for body in FrameReader().feed(frames)
    ]
    add = decode_request_at(buf, *spans[1])
    assert (add.ledger_id, add.entry_id, add.master_key, add.entry, add.flags) == (
        1, 2, KEY, ENTRY, FLAG_RECOVERY_ADD
    )  # fmt: skip


def test_frame_reader_joins_a_large_frame_from_small_reads() -> None:
    big = encode_add(1, 2, KEY, package_entry(1, 2, 1, 300_000, b"x" * 300_000))
    stream = big + encode_read(1, 2)
    reader = FrameReader()
    bodies: list[bytes] = []
    for at in range(0, len(stream), 4096):
        bodies += reader.feed(stream[at : at + 4096])
    assert bodies == [big[4:], encode_read(1, 2)[4:]]
