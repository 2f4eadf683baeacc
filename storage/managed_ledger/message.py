"""The bytes a Pulsar broker stores in each entry of a topic's ledgers (no I/O).

    0      2         6              10                 10+m
    +------+---------+--------------+------------------+-----------+
    |0x0e01| crc32c  | metadataSize | MessageMetadata  | payload   |
    +------+---------+--------------+------------------+-----------+
    magic (`Commands.magicCrc32c`), CRC32C over everything after itself, the protobuf
    length (big-endian u32), the protobuf, then the payload
    (`Commands.serializeMetadataAndPayload`).

`MessageMetadata` (PulsarApi.proto): every field but the repeated `encryption_keys` is kept with
whether it was present (`None`: absent), because the read endpoints send a header only for a
field the message has, as the broker does (`PersistentTopicsBase.generateResponseWithEntry`);
`encryption_keys` are kept as their raw bytes. Fields are written in field-number order, as
the broker's generated code writes them; unknown fields are skipped on decode, so entries
written by a newer broker read too.
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
    producer_name: str  # 1
    sequence_id: int  # 2 (uint64)
    publish_time: int  # 3 (uint64, ms)
    properties: Mapping[str, str] = field(default_factory=dict)  # 4, in their order
    partition_key: str | None = None  # 6
    event_time: int | None = None  # 12 (uint64, ms)
    uncompressed_size: int | None = None  # 9 (uint32)
    replicated_from: str | None = None  # 5
    replicate_to: tuple[str, ...] = ()  # 7
    compression: int | None = None  # 8 (CompressionType)
    num_messages_in_batch: int | None = None  # 11 (int32)
    encryption_keys: tuple[bytes, ...] = ()  # 13 (EncryptionKeys, raw)
    encryption_algo: str | None = None  # 14
    encryption_param: bytes | None = None  # 15
    schema_version: bytes | None = None  # 16
    partition_key_b64_encoded: bool | None = None  # 17
    ordering_key: bytes | None = None  # 18
    deliver_at_time: int | None = None  # 19 (int64, ms)
    marker_type: int | None = None  # 20 (int32)
    txnid_least_bits: int | None = None  # 22 (uint64)
    txnid_most_bits: int | None = None  # 23 (uint64)
    highest_sequence_id: int | None = None  # 24 (uint64)
    null_value: bool | None = None  # 25
    uuid: str | None = None  # 26
    num_chunks_from_msg: int | None = None  # 27 (int32)
    total_chunk_msg_size: int | None = None  # 28 (int32)
    chunk_id: int | None = None  # 29 (int32)
    null_partition_key: bool | None = None  # 30


# PulsarApi.proto's CompressionType, as Java's enum prints it.
COMPRESSION_NAMES = {0: "NONE", 1: "LZ4", 2: "ZLIB", 3: "ZSTD", 4: "SNAPPY"}
COMPRESSION_NONE = 0

# The optional scalar fields after 4, by number: (attribute, kind). Kinds: "str", "bytes",
# "bool", "uint" (uint32/uint64/enum: unsigned varint), "int32", "int64" (signed varints).
_SCALARS: dict[int, tuple[str, str]] = {
    5: ("replicated_from", "str"),
    6: ("partition_key", "str"),
    8: ("compression", "uint"),
    9: ("uncompressed_size", "uint"),
    11: ("num_messages_in_batch", "int32"),
    12: ("event_time", "uint"),
    14: ("encryption_algo", "str"),
    15: ("encryption_param", "bytes"),
    16: ("schema_version", "bytes"),
    17: ("partition_key_b64_encoded", "bool"),
    18: ("ordering_key", "bytes"),
    19: ("deliver_at_time", "int64"),
    20: ("marker_type", "int32"),
    22: ("txnid_least_bits", "uint"),
    23: ("txnid_most_bits", "uint"),
    24: ("highest_sequence_id", "uint"),
    25: ("null_value", "bool"),
    26: ("uuid", "str"),
    27: ("num_chunks_from_msg", "int32"),
    28: ("total_chunk_msg_size", "int32"),
    29: ("chunk_id", "int32"),
    30: ("null_partition_key", "bool"),
}
_BYTES_KINDS = ("str", "bytes")


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


def _scalar(number: int, kind: str, value: object) -> bytes:
    if kind == "str":
        assert isinstance(value, str)
        return _bytes_field(number, value.encode())
    if kind == "bytes":
        assert isinstance(value, bytes)
        return _bytes_field(number, value)
    assert isinstance(value, int)  # bool included
    return _key(number, 0) + _varint(int(value))


def encode_metadata(md: MessageMetadata) -> bytes:
    out = bytearray()
    out += _bytes_field(1, md.producer_name.encode())
    out += _key(2, 0) + _varint(md.sequence_id)
    out += _key(3, 0) + _varint(md.publish_time)
    for key, value in md.properties.items():
        out += _bytes_field(4, _bytes_field(1, key.encode()) + _bytes_field(2, value.encode()))
    for number, (name, kind) in _SCALARS.items():
        value = getattr(md, name)
        if value is not None:
            out += _scalar(number, kind, value)
        if number == 6:
            for cluster in md.replicate_to:
                out += _bytes_field(7, cluster.encode())
        elif number == 12:
            for keys in md.encryption_keys:
                out += _bytes_field(13, keys)
    return bytes(out)


def message_size(encoded: bytes) -> int:
    """A message's size as Pulsar's client checks it against maxMessageSize: its metadata
    plus payload (the magic, checksum and metadata length are not counted)."""
    return len(encoded) - _U16.size - 2 * _U32.size


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


def _signed(value: int, bits: int) -> int:
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


def _decoded(kind: str, value: int | bytes) -> object:
    """A scalar field's value as the broker's Java getter returns it; MessageFormatError
    when the wire type does not fit the field."""
    if kind in _BYTES_KINDS:
        if not isinstance(value, bytes):
            raise MessageFormatError("a length-delimited field has a varint")
        return value.decode(errors="replace") if kind == "str" else value
    if isinstance(value, bytes):
        raise MessageFormatError("a varint field is length-delimited")
    if kind == "bool":
        return value != 0
    if kind == "int32":
        return _signed(value, 32)
    if kind == "int64":
        return _signed(value, 64)
    return value


def decode_metadata(buf: bytes) -> MessageMetadata:
    found: dict[str, object] = {}
    properties: dict[str, str] = {}
    replicate_to: list[str] = []
    encryption_keys: list[bytes] = []
    producer, sequence, publish = "", 0, 0
    for number, value in _fields(buf):
        if number == 1 and isinstance(value, bytes):
            producer = value.decode(errors="replace")
        elif number == 2 and isinstance(value, int):
            sequence = value
        elif number == 3 and isinstance(value, int):
            publish = value
        elif number == 4 and isinstance(value, bytes):
            kv = {n: v for n, v in _fields(value) if isinstance(v, bytes)}
            properties[kv.get(1, b"").decode(errors="replace")] = kv.get(2, b"").decode(
                errors="replace")
        elif number == 7 and isinstance(value, bytes):
            replicate_to.append(value.decode(errors="replace"))
        elif number == 13 and isinstance(value, bytes):
            encryption_keys.append(value)
        elif number in _SCALARS:
            name, kind = _SCALARS[number]
            found[name] = _decoded(kind, value)
    return MessageMetadata(producer, sequence, publish, properties,
                           replicate_to=tuple(replicate_to),
                           encryption_keys=tuple(encryption_keys), **found)  # type: ignore[arg-type]


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
