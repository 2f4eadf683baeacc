"""Pulsar's message framing and the broker's date format, as pure functions: metadata fields
kept with their presence, written in field-number order, Java's date printing."""

from __future__ import annotations

from datetime import UTC, timedelta, timezone

from javaformats import format_date
from storage.managed_ledger.message import (
    MessageMetadata,
    decode_message,
    encode_message,
    encode_metadata,
)


def test_fields_round_trip_with_their_presence() -> None:
    md = MessageMetadata(
        producer_name="p", sequence_id=7, publish_time=1_700_000_000_123,
        properties={"b": "2", "a": "1"}, partition_key="k", event_time=0,
        uncompressed_size=3, replicate_to=("c1", "c2"), compression=0,
        partition_key_b64_encoded=False, deliver_at_time=-5, num_messages_in_batch=-1,
        null_value=True, uuid="u", schema_version=b"\x00\x01",
    )  # fmt: skip
    got = decode_message(encode_message(md, b"abc"))
    assert got.payload == b"abc" and got.metadata == md
    assert list(got.metadata.properties) == ["b", "a"]  # their order, as stored
    bare = decode_message(encode_message(MessageMetadata("p", 1, 2), b"")).metadata
    assert bare.event_time is None and bare.compression is None  # absent, not zero
    assert bare.partition_key_b64_encoded is None and bare.replicate_to == ()


def test_fields_are_written_in_field_number_order() -> None:
    md = MessageMetadata("p", 1, 2, partition_key="k", replicate_to=("c",), compression=0,
                         uncompressed_size=5, event_time=9)
    # 1 producer, 2 sequence, 3 publish, 6 key, 7 replicate_to, 8 compression, 9 size, 12 event
    assert encode_metadata(md) == (b"\x0a\x01p" b"\x10\x01" b"\x18\x02" b"\x32\x01k" b"\x3a\x01c"
                                   b"\x40\x00" b"\x48\x05" b"\x60\x09")


def test_dates_print_as_java_iso_offset_date_time() -> None:
    assert format_date(1_789_490_671_800, UTC) == "2026-09-15T16:44:31.8Z"
    assert format_date(1_789_490_671_000, UTC) == "2026-09-15T16:44:31Z"
    assert format_date(1_789_490_671_050, UTC) == "2026-09-15T16:44:31.05Z"
    assert format_date(0, UTC) == "1970-01-01T00:00:00Z"
    assert format_date(-1, UTC) == "1969-12-31T23:59:59.999Z"
    india = timezone(timedelta(hours=5, minutes=30))
    assert format_date(1_789_490_671_123, india) == "2026-09-15T22:14:31.123+05:30"
