"""Golden bytes of the packaged entry and of the journal/entry-log record."""

from __future__ import annotations

import pytest
from crc32c import crc32c

from storage.bookie.errors import CorruptEntry
from storage.bookie.format import (
    decode_record,
    encode_record,
    fence_record,
    master_key_record,
    package_entry,
    parse_master_key_record,
    verify_entry,
)

# ledgerId 1, entryId 2, LAC 1, length 15, CRC32C over header + "hello" (checked with
# google-crc32c, an independent implementation), then the payload.
GOLDEN_ENTRY = bytes.fromhex(
    "0000000000000001" "0000000000000002" "0000000000000001" "000000000000000f"
    "a0b404c7" "68656c6c6f"
)  # fmt: skip


def test_crc32c_is_castagnoli() -> None:
    assert crc32c(b"123456789") == 0xE3069283  # the CRC-32C check value


def test_packaged_entry_golden_bytes() -> None:
    assert package_entry(1, 2, 1, 15, b"hello") == GOLDEN_ENTRY
    header = verify_entry(GOLDEN_ENTRY, 1, 2)
    assert (header.ledger_id, header.entry_id, header.last_add_confirmed, header.length) == (
        1, 2, 1, 15,
    )  # fmt: skip


@pytest.mark.parametrize("position", [0, 9, 17, 31, 33, 36, 40])
def test_any_flipped_byte_is_reported(position: int) -> None:
    corrupt = bytearray(GOLDEN_ENTRY)
    corrupt[position] ^= 0x01
    with pytest.raises(CorruptEntry):
        verify_entry(bytes(corrupt))


def test_wrong_ids_are_reported() -> None:
    with pytest.raises(CorruptEntry):
        verify_entry(GOLDEN_ENTRY, 1, 3)
    with pytest.raises(CorruptEntry):
        verify_entry(GOLDEN_ENTRY, 2, 2)
    with pytest.raises(CorruptEntry):
        verify_entry(GOLDEN_ENTRY[:30])


def test_record_golden_bytes_and_torn_tail() -> None:
    record = encode_record(b"abc")
    assert record == bytes.fromhex("00000003364b3fb7616263")
    stream = record + encode_record(b"defg")
    body, offset = decode_record(stream, 0) or (None, 0)
    assert body is not None and bytes(body) == b"abc"
    second = decode_record(stream, offset)
    assert second is not None and bytes(second[0]) == b"defg"
    assert decode_record(stream, second[1]) is None  # end of data
    assert decode_record(stream[:-1], offset) is None  # torn: shorter than its length
    assert decode_record(stream + b"\0" * 16, second[1]) is None  # preallocated zeros
    flipped = bytearray(stream)
    flipped[-1] ^= 0xFF
    assert decode_record(bytes(flipped), offset) is None  # checksum mismatch


def test_meta_records_golden_bytes() -> None:
    key = b"k" * 20
    record = master_key_record(5, key)
    assert record == bytes.fromhex("0000000000000005fffffffffffff00000000014") + key
    assert parse_master_key_record(record) == key
    assert fence_record(5) == bytes.fromhex("0000000000000005ffffffffffffe000")
