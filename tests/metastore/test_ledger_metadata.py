"""Ledger metadata values, byte for byte: the reference's verified 202-byte V3 example,
bytes built by hand from the field table (reference 1.1), BookKeeper's reader rules, the
older V2/V1 text formats, and round trips."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metastore.errors import MetadataFormatError
from metastore.ledger_metadata import (
    DigestType,
    LedgerMetadata,
    LedgerState,
    decode_ledger_metadata,
    encode_ledger_metadata,
)

# shared/reference/storage-pipeline-anchors.md 1.1, "Verified example" (202 bytes)
REFERENCE_EXAMPLE = bytes.fromhex(
    """
42 6f 6f 6b 69 65 4d 65 74 61 64 61 74 61 46 6f 72 6d 61 74 56 65 72 73 69 6f 6e 09 33 0a aa 01
08 02 10 02 18 00 20 ff ff ff ff ff ff ff ff ff 01 28 01 32 22 0a 0e 31 32 37 2e 30 2e 30 2e 31
3a 33 31 38 31 0a 0e 31 32 37 2e 30 2e 30 2e 32 3a 33 31 38 31 10 00 38 03 42 00 48 02 5a 15 0a
0b 61 70 70 6c 69 63 61 74 69 6f 6e 12 06 70 75 6c 73 61 72 5a 1b 0a 09 63 6f 6d 70 6f 6e 65 6e
74 12 0e 6d 61 6e 61 67 65 64 2d 6c 65 64 67 65 72 5a 35 0a 15 70 75 6c 73 61 72 2f 6d 61 6e 61
67 65 64 2d 6c 65 64 67 65 72 12 1c 70 75 62 6c 69 63 2f 64 65 66 61 75 6c 74 2f 70 65 72 73 69
73 74 65 6e 74 2f 74 31 60 00
"""
)
PULSAR_KEYS = {
    "application": b"pulsar",
    "component": b"managed-ledger",
    "pulsar/managed-ledger": b"public/default/persistent/t1",
}
EXAMPLE = LedgerMetadata(
    ledger_id=1,
    ensemble_size=2,
    write_quorum_size=2,
    ack_quorum_size=2,
    ensembles={0: ("127.0.0.1:3181", "127.0.0.2:3181")},
    custom_metadata=PULSAR_KEYS,
)
HEADER_V3 = b"BookieMetadataFormatVersion\t3\n"


def test_reference_example_byte_for_byte() -> None:
    assert len(REFERENCE_EXAMPLE) == 202
    assert encode_ledger_metadata(EXAMPLE) == REFERENCE_EXAMPLE
    decoded = decode_ledger_metadata(1, REFERENCE_EXAMPLE)
    assert decoded == EXAMPLE
    assert list(decoded.custom_metadata) == list(PULSAR_KEYS)  # order kept
    assert decoded.ctime is None and decoded.ctoken == 0


def _field(number: int, wire: int) -> bytes:
    return bytes([number << 3 | wire])


def _len(number: int, payload: bytes) -> bytes:
    assert len(payload) < 128
    return _field(number, 2) + bytes([len(payload)]) + payload


def test_closed_ledger_from_the_field_table() -> None:
    """Every field, in field-number order: Qw=2 (1), E=3 (2), length 300 (3), lastEntryId 9
    (4), CLOSED (5), two segments (6), MAC -> HMAC=2 (7), password (8), Qa=2 (9), ctime (10),
    one custom entry (11), cToken 7 (12)."""
    seg0 = _len(1, b"a:1") + _len(1, b"b:1") + _len(1, b"c:1") + _field(2, 0) + b"\x00"
    seg1 = _len(1, b"a:1") + _len(1, b"b:1") + _len(1, b"d:1") + _field(2, 0) + b"\x05"
    body = (
        _field(1, 0) + b"\x02"
        + _field(2, 0) + b"\x03"
        + _field(3, 0) + b"\xac\x02"  # 300
        + _field(4, 0) + b"\x09"
        + _field(5, 0) + b"\x03"
        + _len(6, seg0)
        + _len(6, seg1)
        + _field(7, 0) + b"\x02"
        + _len(8, b"pw")
        + _field(9, 0) + b"\x02"
        + _field(10, 0) + b"\xe8\x07"  # 1000
        + _len(11, _len(1, b"k") + _len(2, b"\x00\xff"))
        + _field(12, 0) + b"\x07"
    )  # fmt: skip
    metadata = LedgerMetadata(
        ledger_id=42,
        ensemble_size=3,
        write_quorum_size=2,
        ack_quorum_size=2,
        ensembles={5: ("a:1", "b:1", "d:1"), 0: ("a:1", "b:1", "c:1")},
        state=LedgerState.CLOSED,
        last_entry_id=9,
        length=300,
        digest_type=DigestType.MAC,
        password=b"pw",
        custom_metadata={"k": b"\x00\xff"},
        ctime=1000,
        ctoken=7,
    )
    raw = HEADER_V3 + bytes([len(body)]) + body
    assert encode_ledger_metadata(metadata) == raw
    assert decode_ledger_metadata(42, raw) == metadata
    assert list(metadata.ensembles) == [0, 5]
    assert metadata.ensemble_for(4) == ("a:1", "b:1", "c:1")
    assert metadata.ensemble_for(5) == metadata.current_ensemble == ("a:1", "b:1", "d:1")


def _v3(body: bytes) -> bytes:
    return HEADER_V3 + bytes([len(body)]) + body


MINIMAL = (
    _field(1, 0) + b"\x01" + _field(2, 0) + b"\x01" + _field(3, 0) + b"\x00"
    + _field(5, 0) + b"\x01" + _len(6, _len(1, b"h:1") + _field(2, 0) + b"\x00")
)  # fmt: skip


def test_reader_rules() -> None:
    # not closed: a stored last entry id and length are ignored
    open_with_length = MINIMAL + _field(4, 0) + b"\x05" + _field(3, 0) + b"\x07"
    decoded = decode_ledger_metadata(3, _v3(open_with_length))
    assert (decoded.last_entry_id, decoded.length) == (-1, 0)
    # no ack quorum: Qa = Qw; no password: no digest type either
    decoded = decode_ledger_metadata(3, _v3(MINIMAL + _field(7, 0) + b"\x03"))
    assert decoded.ack_quorum_size == decoded.write_quorum_size == 1
    assert decoded.digest_type is None and decoded.password is None
    # a metadata without password encodes without fields 7 and 8
    assert decode_ledger_metadata(3, encode_ledger_metadata(decoded)) == decoded
    assert b"\x38" not in encode_ledger_metadata(decoded)[len(HEADER_V3) + 1 :]


V2_TEXT = b"""BookieMetadataFormatVersion\t2
quorumSize: 2
ensembleSize: 3
length: 100
lastEntryId: 4
state: CLOSED
segment {
  ensembleMember: "10.0.0.1:3181"
  ensembleMember: "10.0.0.2:3181"
  ensembleMember: "10.0.0.3:3181"
  firstEntryId: 0
}
digestType: CRC32
password: "secret"
ackQuorumSize: 2
ctime: 1600000000000
customMetadata {
  key: "application"
  value: "pulsar"
}
"""


def test_version_2_text() -> None:
    decoded = decode_ledger_metadata(7, V2_TEXT)
    assert decoded == LedgerMetadata(
        ledger_id=7,
        ensemble_size=3,
        write_quorum_size=2,
        ack_quorum_size=2,
        ensembles={0: ("10.0.0.1:3181", "10.0.0.2:3181", "10.0.0.3:3181")},
        state=LedgerState.CLOSED,
        last_entry_id=4,
        length=100,
        digest_type=DigestType.CRC32,
        password=b"secret",
        custom_metadata={"application": b"pulsar"},
        ctime=1600000000000,
        format_version=2,
    )
    assert decode_ledger_metadata(7, encode_ledger_metadata(decoded)) == decoded


@pytest.mark.parametrize(
    ("tail", "state", "last_entry_id", "length"),
    [
        ("", LedgerState.OPEN, -1, 0),
        ("\n7\tCLOSED", LedgerState.CLOSED, 7, 50),
        ("\n-102\tCLOSED", LedgerState.IN_RECOVERY, -1, 0),
    ],
)
def test_version_1_text(tail: str, state: LedgerState, last_entry_id: int, length: int) -> None:
    raw = f"BookieMetadataFormatVersion\t1\n2\n2\n50\n0\ta:1\tb:1\n3\ta:1\tc:1{tail}".encode()
    decoded = decode_ledger_metadata(9, raw)
    assert decoded == LedgerMetadata(
        ledger_id=9,
        ensemble_size=2,
        write_quorum_size=2,
        ack_quorum_size=2,
        ensembles={0: ("a:1", "b:1"), 3: ("a:1", "c:1")},
        state=state,
        last_entry_id=last_entry_id,
        length=length,
        digest_type=None,
        password=None,
        format_version=1,
    )
    if state is LedgerState.CLOSED:  # the length line counts only once closed
        assert encode_ledger_metadata(decoded) == raw
    assert decode_ledger_metadata(9, encode_ledger_metadata(decoded)) == decoded


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        (b"", "no BookieMetadataFormatVersion header"),
        (b"BookieMetadataFormatVersion 3\n", "no BookieMetadataFormatVersion header"),
        (b"BookieMetadataFormatVersion\tx\n", "unreadable format version"),
        (b"BookieMetadataFormatVersion\t4\n", "format version 4"),
        (HEADER_V3, "length prefix"),
        (HEADER_V3 + b"\x10\x08", "length prefix says 16"),
        (_v3(b"\xff\xff\xff"), "ledger 1"),
        (_v3(_field(1, 0) + b"\x01"), "required field"),
        (_v3(MINIMAL.replace(b"\x10\x01", b"\x10\x02")), "every ensemble must have 2"),
        (b"BookieMetadataFormatVersion\t2\nquorumSize: x\n", "ledger 1"),
        (b"BookieMetadataFormatVersion\t1\n2\n", "too short"),
        (b"BookieMetadataFormatVersion\t1\nx\n2\n3\n", "ledger 1"),
    ],
)
def test_undecodable_values(raw: bytes, problem: str) -> None:
    with pytest.raises(MetadataFormatError, match=problem):
        decode_ledger_metadata(1, raw)


def test_invalid_metadata_is_refused() -> None:
    with pytest.raises(ValueError, match="E >= Qw >= Qa"):
        dataclasses.replace(EXAMPLE, ack_quorum_size=3)
    with pytest.raises(ValueError, match="not closed"):
        dataclasses.replace(EXAMPLE, last_entry_id=3)
    with pytest.raises(ValueError, match="go together"):
        dataclasses.replace(EXAMPLE, password=None)
    with pytest.raises(ValueError, match="at least one ensemble"):
        dataclasses.replace(EXAMPLE, ensembles={})


bookie = st.builds(
    "{}:{}".format, st.text("abc.0123", min_size=1, max_size=8), st.integers(0, 65535)
)


@st.composite
def ledger_metadata(draw: st.DrawFn) -> LedgerMetadata:
    ensemble_size = draw(st.integers(1, 5))
    write_quorum = draw(st.integers(1, ensemble_size))
    firsts = draw(st.lists(st.integers(0, 2**40), min_size=1, max_size=4, unique=True))
    state = draw(st.sampled_from(LedgerState))
    closed = state is LedgerState.CLOSED
    with_password = draw(st.booleans())
    version = draw(st.sampled_from([2, 3]))
    return LedgerMetadata(
        ledger_id=draw(st.integers(0, 2**63 - 1)),
        ensemble_size=ensemble_size,
        write_quorum_size=write_quorum,
        ack_quorum_size=draw(st.integers(1, write_quorum)),
        ensembles={
            f: tuple(draw(st.lists(bookie, min_size=ensemble_size, max_size=ensemble_size)))
            for f in firsts
        },
        state=state,
        last_entry_id=draw(st.integers(-1, 2**62)) if closed else -1,
        length=draw(st.integers(0, 2**62)) if closed else 0,
        digest_type=draw(st.sampled_from(DigestType)) if with_password else None,
        password=draw(st.binary(max_size=8)) if with_password else None,
        custom_metadata=draw(st.dictionaries(st.text(max_size=8), st.binary(max_size=8))),
        ctime=draw(st.none() | st.integers(0, 2**62)),
        ctoken=draw(st.integers(-(2**63), 2**63 - 1)) if version == 3 else 0,
        format_version=version,
    )


@settings(max_examples=60)
@given(ledger_metadata())
def test_round_trip(metadata: LedgerMetadata) -> None:
    assert decode_ledger_metadata(metadata.ledger_id, encode_ledger_metadata(metadata)) == metadata
