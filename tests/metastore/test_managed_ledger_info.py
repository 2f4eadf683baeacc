"""ManagedLedgerInfo and ManagedCursorInfo values against bytes built by hand from the field
table (reference 1.2): plain, empty, compressed (magic 0x4778), and round trips."""

from __future__ import annotations

import struct
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metastore.errors import MetadataFormatError
from metastore.managed_ledger_info import (
    LedgerInfo,
    ManagedLedgerInfo,
    Position,
    decode_cursor_info,
    decode_managed_ledger_info,
    encode_cursor_info,
    encode_managed_ledger_info,
)
from metastore.proto.managed_ledger_formats_pb2 import (
    CompressionType,
    ManagedCursorInfo,
    ManagedLedgerInfoMetadata,
    OffloadContext,
)


def _varint_field(number: int, value: int) -> bytes:
    out = bytearray([number << 3])
    value &= 2**64 - 1
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _len_field(number: int, payload: bytes) -> bytes:
    assert len(payload) < 128
    return bytes([number << 3 | 2, len(payload)]) + payload


# ledgerInfo (1) {ledgerId 5, entries 10, size 1024, timestamp 1700000000000},
# ledgerInfo (1) {ledgerId 6, timestamp 0}, terminatedPosition (2) {6, 3},
# properties (3) {"k": "v"}
PLAIN = (
    _len_field(1, _varint_field(1, 5) + _varint_field(2, 10) + _varint_field(3, 1024)
               + _varint_field(4, 1700000000000))
    + _len_field(1, _varint_field(1, 6) + _varint_field(4, 0))
    + _len_field(2, _varint_field(1, 6) + _varint_field(2, 3))
    + _len_field(3, _len_field(1, b"k") + _len_field(2, b"v"))
)  # fmt: skip
INFO = ManagedLedgerInfo(
    ledgers=(
        LedgerInfo(5, entries=10, size=1024, timestamp=1700000000000),
        LedgerInfo(6, timestamp=0),
    ),
    terminated_position=Position(6, 3),
    properties={"k": "v"},
)


def test_field_table_bytes() -> None:
    assert encode_managed_ledger_info(INFO) == PLAIN
    assert decode_managed_ledger_info(PLAIN) == INFO


def test_empty_value_is_an_empty_topic() -> None:
    # Pulsar creates the topic's key with no bytes before the first ledger
    assert decode_managed_ledger_info(b"") == ManagedLedgerInfo()
    assert encode_managed_ledger_info(ManagedLedgerInfo()) == b""


def _compressed(kind: CompressionType.ValueType, payload: bytes, size: int) -> bytes:
    header = ManagedLedgerInfoMetadata(compressionType=kind, uncompressedSize=size)
    encoded = header.SerializeToString()
    return struct.pack(">Hi", 0x4778, len(encoded)) + encoded + payload


def test_zlib_compressed_value() -> None:
    raw = _compressed(CompressionType.ZLIB, zlib.compress(PLAIN), len(PLAIN))
    assert raw[:2] == b"\x47\x78"
    assert decode_managed_ledger_info(raw) == INFO
    assert decode_managed_ledger_info(_compressed(CompressionType.NONE, PLAIN, len(PLAIN))) == INFO


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        (_compressed(CompressionType.LZ4, b"\x00", 10), "compressed with LZ4"),
        (_compressed(CompressionType.ZSTD, b"\x00", 10), "compressed with ZSTD"),
        (_compressed(CompressionType.ZLIB, b"not zlib", 10), "ZLIB payload"),
        (b"\x47\x78\x00", "shorter than its header"),
        (b"\xff\xff", "ManagedLedgerInfo"),
        (_len_field(1, _varint_field(2, 10)), "required field"),  # ledgerInfo without ledgerId
    ],
)
def test_undecodable_values(raw: bytes, problem: str) -> None:
    with pytest.raises(MetadataFormatError, match=problem):
        decode_managed_ledger_info(raw)


def test_offload_context_is_kept() -> None:
    context = OffloadContext(uidMsb=1, uidLsb=2, complete=True).SerializeToString()
    info = ManagedLedgerInfo(ledgers=(LedgerInfo(9, offload_context=context),))
    decoded = decode_managed_ledger_info(encode_managed_ledger_info(info))
    assert decoded == info
    assert decoded.ledgers[0].offloaded
    assert not LedgerInfo(9).offloaded


def test_cursor_info() -> None:
    cursor = ManagedCursorInfo(cursorsLedgerId=-1, markDeleteLedgerId=5, markDeleteEntryId=3)
    cursor.properties.add(name="p", value=7)
    raw = encode_cursor_info(cursor)
    # cursorsLedgerId -1 is a 10-byte varint; then fields 2, 3 and one LongProperty (5)
    assert raw == (
        _varint_field(1, -1) + _varint_field(2, 5) + _varint_field(3, 3)
        + _len_field(5, _len_field(1, b"p") + _varint_field(2, 7))
    )  # fmt: skip
    assert decode_cursor_info(raw) == cursor
    compressed = _compressed(CompressionType.ZLIB, zlib.compress(raw), len(raw))
    assert decode_cursor_info(compressed) == cursor
    with pytest.raises(MetadataFormatError, match="ManagedCursorInfo"):
        decode_cursor_info(b"")  # cursorsLedgerId is required


optional_long = st.none() | st.integers(-(2**63), 2**63 - 1)
ledger_infos = st.builds(
    LedgerInfo,
    ledger_id=st.integers(-(2**63), 2**63 - 1),
    entries=optional_long,
    size=optional_long,
    timestamp=optional_long,
)


@settings(max_examples=60)
@given(
    st.lists(ledger_infos, max_size=4).map(tuple),
    st.none() | st.builds(Position, st.integers(0, 2**62), st.integers(-1, 2**62)),
    st.dictionaries(st.text(max_size=6), st.text(max_size=6), max_size=3),
)
def test_round_trip(
    ledgers: tuple[LedgerInfo, ...], terminated: Position | None, properties: dict[str, str]
) -> None:
    info = ManagedLedgerInfo(ledgers, terminated, properties)
    assert decode_managed_ledger_info(encode_managed_ledger_info(info)) == info
