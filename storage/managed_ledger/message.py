"""The bytes a Pulsar broker stores in each entry of a topic's ledgers (no I/O).

    0      2         6              10                 10+m
    +------+---------+--------------+------------------+-----------+
    |0x0e01| crc32c  | metadataSize | MessageMetadata  | payload   |
    +------+---------+--------------+------------------+-----------+
    magic (`Commands.magicCrc32c`), CRC32C over everything after itself, the protobuf
    length (big-endian u32), the protobuf, then the payload
    (`Commands.serializeMetadataAndPayload`).

`MessageMetadata` (PulsarApi.proto) fields written here: 1 producer_name (string), 2 sequence_id
(uint64), 3 publish_time (uint64 ms), 4 properties (KeyValue {1 key, 2 value}), 6 partition_key
(string), 9 uncompressed_size (uint32), 12 event_time (uint64 ms). Unknown fields are skipped
on decode, so entries written by a real broker (more fields) read too.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass, field

from crc32c import crc32c

MAGIC_CRC32C = 0x0E01
MAGIC_BROKER_ENTRY_METADATA = 0x0E02
_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")


class MessageFormatError(ValueError):
    """An entry that is not a Pulsar message (bad magic, checksum or protobuf)."""


@dataclass(frozen=True)
class MessageMetadata:
    producer_name: str
    sequence_id: int
    publish_time: int
    properties: Mapping[str, str] = field(default_factory=dict)
    partition_key: str | None = None
    event_time: int = 0
    uncompressed_size: int = 0


@dataclass(frozen=True)
class Message:
    metadata: MessageMetadata
    payload: bytes


def _varint(value: int) -> bytes:
    out = bytearray()
    value &= (1 << 64) - 1
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _key(number: int, wire: int) -> bytes:
    return _varint(number << 3 | wire)


def _bytes_field(number: int, value: bytes) -> bytes:
    return _key(number, 2) + _varint(len(value)) + value


def encode_metadata(md: MessageMetadata) -> bytes:
    out = bytearray()
    out += _bytes_field(1, md.producer_name.encode())
    out += _key(2, 0) + _varint(md.sequence_id)
    out += _key(3, 0) + _varint(md.publish_time)
    for key, value in md.properties.items():
        out += _bytes_field(4, _bytes_field(1, key.encode()) + _bytes_field(2, value.encode()))
    if md.partition_key is not None:
        out += _bytes_field(6, md.partition_key.encode())
    out += _key(9, 0) + _varint(md.uncompressed_size)
    if md.event_time:
        out += _key(12, 0) + _varint(md.event_time)
    return bytes(out)


def encode_message(md: MessageMetadata, payload: bytes) -> bytes:
    body = encode_metadata(md)
    rest = _U32.pack(len(body)) + body + payload
    return _U16.pack(MAGIC_CRC32C) + _U32.pack(crc32c(rest)) + rest


def _read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        if pos >= len(buf):
            raise MessageFormatError("truncated varint")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise MessageFormatError("varint too long")


def _fields(buf: bytes) -> list[tuple[int, int | bytes]]:
    out: list[tuple[int, int | bytes]] = []
    pos = 0
    while pos < len(buf):
        key, pos = _read_varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _read_varint(buf, pos)
            out.append((number, value))
        elif wire == 2:
            size, pos = _read_varint(buf, pos)
            if pos + size > len(buf):
                raise MessageFormatError("truncated field")
            out.append((number, buf[pos:pos + size]))
            pos += size
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        else:
            raise MessageFormatError(f"unsupported wire type {wire}")
    return out


def decode_metadata(buf: bytes) -> MessageMetadata:
    producer, sequence, publish, event, size = "", 0, 0, 0, 0
    properties: dict[str, str] = {}
    partition_key: str | None = None
    for number, value in _fields(buf):
        if isinstance(value, bytes):
            if number == 1:
                producer = value.decode()
            elif number == 4:
                kv = {n: v for n, v in _fields(value) if isinstance(v, bytes)}
                properties[kv.get(1, b"").decode()] = kv.get(2, b"").decode()
            elif number == 6:
                partition_key = value.decode()
        elif number == 2:
            sequence = value
        elif number == 3:
            publish = value
        elif number == 9:
            size = value
        elif number == 12:
            event = value
    return MessageMetadata(producer, sequence, publish, properties, partition_key, event, size)


def decode_message(entry: bytes) -> Message:
    """Split an entry into metadata and payload; a broker-entry-metadata prefix is skipped."""
    pos = 0
    if len(entry) >= 6 and _U16.unpack_from(entry)[0] == MAGIC_BROKER_ENTRY_METADATA:
        (size,) = _U32.unpack_from(entry, 2)
        pos = 6 + size
    if len(entry) < pos + 10 or _U16.unpack_from(entry, pos)[0] != MAGIC_CRC32C:
        raise MessageFormatError("not a Pulsar message: bad magic")
    (checksum,) = _U32.unpack_from(entry, pos + 2)
    if crc32c(entry[pos + 6:]) != checksum:
        raise MessageFormatError("message checksum mismatch")
    (size,) = _U32.unpack_from(entry, pos + 6)
    start = pos + 10
    if start + size > len(entry):
        raise MessageFormatError("truncated message metadata")
    return Message(decode_metadata(entry[start:start + size]), entry[start + size:])
