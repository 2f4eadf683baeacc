"""Golden bytes of BookKeeper's AvailabilityOfEntriesOfLedger (the list a bookie answers to a
V3 GET_LIST_OF_ENTRIES_OF_LEDGER) and of the V3 frames that carry it.

The format, from upstream's AvailabilityOfEntriesOfLedger: a 64-byte header (i32 version 0,
i32 number of sequence groups, zeros), then 24 bytes per group: i64 firstSequenceStart,
i64 lastSequenceStart, i32 sequenceSize, i32 sequencePeriod, all big-endian. Upstream's encoder
writes one group per run of consecutive entries (period 0); its reader takes any group.
"""

from __future__ import annotations

import pytest

from storage.bookie.availability import (
    SequenceGroup,
    decode_availability,
    encode_availability,
    sequence_groups,
)
from storage.bookie.errors import MalformedFrame
from storage.bookie.protocol import decode_request
from storage.bookie.protocol_v3 import (
    V3_ENOLEDGER,
    V3Request,
    decode_v3_response,
    encode_bad_request,
    encode_list_entries_request,
    encode_list_entries_response,
)

HEADER_ZEROS = "00" * 56


def group(first: int, last: int, size: int, period: int) -> str:
    return f"{first:016x}{last:016x}{size:08x}{period:08x}"


def test_worked_example_entries_0_1_2_5_7_8() -> None:
    # Runs [0, 1, 2], [5], [7, 8]: three groups of one sequence each, period 0.
    raw = encode_availability([0, 1, 2, 5, 7, 8])
    assert raw == bytes.fromhex(
        "00000000" "00000003" + HEADER_ZEROS
        + group(0, 0, 3, 0) + group(5, 5, 1, 0) + group(7, 7, 2, 0)
    )  # fmt: skip
    assert len(raw) == 64 + 3 * 24
    found = decode_availability(raw)
    assert [e for e in range(12) if e in found] == [0, 1, 2, 5, 7, 8]
    assert found.entry_count == 6
    assert found.missing(range(0, 10, 3)) == [3, 6, 9]


def test_duplicates_are_ignored_and_nothing_is_a_header_alone() -> None:
    assert sequence_groups([1, 1, 2, 3, 3, 9]) == [SequenceGroup(1, 1, 3, 0),
                                                    SequenceGroup(9, 9, 1, 0)]
    empty = encode_availability([])
    assert empty == bytes(64)
    assert decode_availability(empty).entry_count == 0
    assert 0 not in decode_availability(empty)


def test_a_group_with_a_period_is_read_as_upstream() -> None:
    # Sequences of 2 every 3 ids from 1 to 7: entries 1, 2, 4, 5, 7, 8 (count 6 as upstream's
    # ((7 - 1) / 3 + 1) * 2); then a single run [20, 21].
    raw = bytes.fromhex("00000000" "00000002" + HEADER_ZEROS + group(1, 7, 2, 3)
                        + group(20, 20, 2, 0))  # fmt: skip
    found = decode_availability(raw)
    assert [e for e in range(25) if e in found] == [1, 2, 4, 5, 7, 8, 20, 21]
    assert found.entry_count == 8


@pytest.mark.parametrize(
    "raw",
    [
        bytes(63),  # shorter than the header
        bytes.fromhex("00000001" "00000000" + HEADER_ZEROS),  # header version 1
        bytes.fromhex("00000000" "00000002" + HEADER_ZEROS + group(0, 0, 1, 0)),  # 1 of 2
        bytes.fromhex("00000000" "00000001" + HEADER_ZEROS + group(0, 4, 1, 0)),  # no period
    ],
)
def test_bad_availability_is_refused(raw: bytes) -> None:
    with pytest.raises(ValueError):
        decode_availability(raw)


def test_v3_list_request_and_response_golden_bytes() -> None:
    frame = encode_list_entries_request(5, 7)
    # Request{header{version: 3, operation: 11, txnId: 5} (field 1),
    #         getListOfEntriesOfLedgerRequest{ledgerId: 7} (field 108: tag varint e2 06)}
    assert frame == bytes.fromhex(
        "0000000d" "0a06" "0803" "100b" "1805" "e20602" "0807"
    )  # fmt: skip
    request = decode_request(frame[4:])
    assert isinstance(request, V3Request)
    assert request.getListOfEntriesOfLedgerRequest.ledgerId == 7
    answer = encode_list_entries_response(request, V3_ENOLEDGER, None)
    # Response{header (as the request's), status: ENOLEDGER (402, varint 92 03),
    #          getListOfEntriesOfLedgerResponse{status: 402, ledgerId: 7}}, no availability
    assert answer == bytes.fromhex(
        "00000013" "0a06" "0803" "100b" "1805" "109203" "e20605" "089203" "1007"
    )  # fmt: skip
    response = decode_v3_response(answer, 4, len(answer))
    assert response.header.txnId == 5
    assert not response.getListOfEntriesOfLedgerResponse.HasField(
        "availabilityOfEntriesOfLedger")
    # READ_LAC (operation 7) is not served: EBADREQ (404, varint 94 03) under its own header
    read_lac = decode_request(bytes.fromhex("0a06" "0803" "1007" "1809" "c20602" "0801"))
    assert isinstance(read_lac, V3Request)
    assert encode_bad_request(read_lac) == bytes.fromhex(
        "0000000b" "0a06" "0803" "1007" "1809" "109403"
    )  # fmt: skip


def test_a_v3_body_that_does_not_parse_is_malformed() -> None:
    with pytest.raises(MalformedFrame):
        decode_request(bytes.fromhex("0a06080310"))  # the header cut short
