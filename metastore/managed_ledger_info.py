"""Pulsar's managed-ledger records: a topic's ledgers (`ManagedLedgerInfo`, the value of
`/managed-ledgers/<tenant>/<ns>/persistent/<encoded topic>`) and a cursor
(`ManagedCursorInfo`, the value of each child key), as Pulsar's `MetaStoreImpl` stores them.

Values are the plain protobuf binary, no header. Two special cases on reading:

- an empty value is an empty `ManagedLedgerInfo`: Pulsar creates the topic's key with no
  bytes before it writes the first ledger;
- a value starting with the magic 0x4778 is compressed (`managedLedgerInfoCompressionType`,
  off by default): magic (2 bytes), metadata size (4 bytes, big-endian), a
  `ManagedLedgerInfoMetadata` {compression type, uncompressed size}, then the compressed
  message. ZLIB is decoded with the standard library; LZ4, ZSTD and SNAPPY are a
  `MetadataFormatError` naming the codec (none is a dependency of this project). The magic
  cannot begin a plain message (0x47 would be field 8 with the invalid wire type 7).

`ManagedLedgerInfo` is typed here (`ManagedLedgerInfo`, `LedgerInfo`, `Position`); an offload
context, which this project never writes, is kept as its encoded bytes and written back
unchanged. Cursors are handed over as the generated `ManagedCursorInfo` message.

Pure: no I/O and no etcd client, so Spark workers decode topic metadata with it.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field

from google.protobuf.message import DecodeError

from metastore.errors import MetadataFormatError
from metastore.proto.managed_ledger_formats_pb2 import (
    CompressionType,
    ManagedCursorInfo,
    ManagedLedgerInfoMetadata,
    OffloadContext,
)
from metastore.proto.managed_ledger_formats_pb2 import ManagedLedgerInfo as ManagedLedgerInfoPb

COMPRESSION_MAGIC = 0x4778
_MAGIC_BYTES = struct.pack(">H", COMPRESSION_MAGIC)


@dataclass(frozen=True)
class Position:
    ledger_id: int
    entry_id: int


@dataclass(frozen=True)
class LedgerInfo:
    """One ledger of a topic. `entries`, `size` and `timestamp` (ms, set when the ledger is
    closed; Pulsar writes 0 for the ledger being written) are None when not stored."""

    ledger_id: int
    entries: int | None = None
    size: int | None = None
    timestamp: int | None = None
    offload_context: bytes | None = None

    @property
    def offloaded(self) -> bool:
        """Whether the ledger's data was moved to tiered storage (`complete` of its
        offload context), as `stats-internal` reports it."""
        if self.offload_context is None:
            return False
        context = OffloadContext()
        context.ParseFromString(self.offload_context)
        return context.complete


@dataclass(frozen=True)
class ManagedLedgerInfo:
    """A topic's ledgers in order, its terminated position, if terminated, and its
    properties (order kept)."""

    ledgers: tuple[LedgerInfo, ...] = ()
    terminated_position: Position | None = None
    properties: Mapping[str, str] = field(default_factory=dict)


def encode_managed_ledger_info(info: ManagedLedgerInfo) -> bytes:
    """The topic key's value (uncompressed, as Pulsar writes it by default)."""
    message = ManagedLedgerInfoPb()
    for ledger in info.ledgers:
        entry = message.ledgerInfo.add(ledgerId=ledger.ledger_id)
        if ledger.entries is not None:
            entry.entries = ledger.entries
        if ledger.size is not None:
            entry.size = ledger.size
        if ledger.timestamp is not None:
            entry.timestamp = ledger.timestamp
        if ledger.offload_context is not None:
            entry.offloadContext.ParseFromString(ledger.offload_context)
    if info.terminated_position is not None:
        message.terminatedPosition.ledgerId = info.terminated_position.ledger_id
        message.terminatedPosition.entryId = info.terminated_position.entry_id
    for key, value in info.properties.items():
        message.properties.add(key=key, value=value)
    return message.SerializeToString()


def decode_managed_ledger_info(raw: bytes) -> ManagedLedgerInfo:
    """Parse a topic key's value (empty, plain or ZLIB-compressed);
    `MetadataFormatError` when it is none of these."""
    message = ManagedLedgerInfoPb()
    _parse(message, _uncompressed(raw, "ManagedLedgerInfo"), "ManagedLedgerInfo")
    terminated = None
    if message.HasField("terminatedPosition"):
        terminated = Position(
            message.terminatedPosition.ledgerId, message.terminatedPosition.entryId
        )
    return ManagedLedgerInfo(
        ledgers=tuple(
            LedgerInfo(
                ledger_id=entry.ledgerId,
                entries=entry.entries if entry.HasField("entries") else None,
                size=entry.size if entry.HasField("size") else None,
                timestamp=entry.timestamp if entry.HasField("timestamp") else None,
                offload_context=(
                    entry.offloadContext.SerializeToString()
                    if entry.HasField("offloadContext")
                    else None
                ),
            )
            for entry in message.ledgerInfo
        ),
        terminated_position=terminated,
        properties={kv.key: kv.value for kv in message.properties},
    )


def encode_cursor_info(info: ManagedCursorInfo) -> bytes:
    return info.SerializeToString()


def decode_cursor_info(raw: bytes) -> ManagedCursorInfo:
    """Parse a cursor key's value (plain or ZLIB-compressed, like the topic's)."""
    message = ManagedCursorInfo()
    _parse(message, _uncompressed(raw, "ManagedCursorInfo"), "ManagedCursorInfo")
    return message


def _parse(message: ManagedLedgerInfoPb | ManagedCursorInfo, raw: bytes, what: str) -> None:
    try:
        message.ParseFromString(raw)
    except DecodeError as exc:
        raise MetadataFormatError(what, str(exc)) from exc
    if not message.IsInitialized():
        raise MetadataFormatError(what, "a required field is missing")


def _uncompressed(raw: bytes, what: str) -> bytes:
    if not raw.startswith(_MAGIC_BYTES):
        return raw
    if len(raw) < 6:
        raise MetadataFormatError(what, "compressed value shorter than its header")
    (size,) = struct.unpack(">i", raw[2:6])
    header = ManagedLedgerInfoMetadata()  # same fields as ManagedCursorInfoMetadata
    try:
        header.ParseFromString(raw[6 : 6 + size])
    except DecodeError as exc:
        raise MetadataFormatError(what, f"compression header: {exc}") from exc
    if not header.IsInitialized():
        raise MetadataFormatError(what, "compression header lacks a required field")
    payload = raw[6 + size :]
    kind = header.compressionType
    if kind == CompressionType.NONE:
        return payload
    if kind == CompressionType.ZLIB:
        try:
            return zlib.decompress(payload)
        except zlib.error as exc:
            raise MetadataFormatError(what, f"ZLIB payload: {exc}") from exc
    raise MetadataFormatError(
        what, f"compressed with {CompressionType.Name(kind)}, which this project does not read"
    )
