"""The values of BookKeeper's auto-recovery keys, in the protobuf text format BookKeeper
writes them in (`ZkLedgerUnderreplicationManager`, kept by Pulsar's under-replication manager):

- `/ledgers/underreplication/ledgers/.../urL<id>`: `UnderreplicatedLedgerFormat`, one
  `replica: "<bookieId>"` line per missing copy and `ctime: <ms>` when the marker stores the
  mark time;
- `/ledgers/underreplication/locks/urL<id>`: `LockDataFormat`, `bookieId: "<host>"` of the
  worker holding the lock (may be empty);
- `/ledgers/underreplication/LAYOUT`: `LedgerRereplicationLayoutFormat`,
  `type: "BASIC"` and `version: 1`.

Pure: no I/O and no etcd client.
"""

from __future__ import annotations

from dataclasses import dataclass

from google.protobuf import text_format

from metastore.errors import MetadataFormatError
from metastore.proto.bookkeeper_formats_pb2 import (
    LedgerRereplicationLayoutFormat,
    LockDataFormat,
    UnderreplicatedLedgerFormat,
)

REREPLICATION_LAYOUT_TYPE = "BASIC"
REREPLICATION_LAYOUT_VERSION = 1


@dataclass(frozen=True)
class UnderreplicatedLedger:
    """Which bookies lost their copy of the ledger, and when it was marked (ms), if stored."""

    replicas: tuple[str, ...]
    ctime: int | None = None


def encode_underreplicated_ledger(mark: UnderreplicatedLedger) -> bytes:
    message = UnderreplicatedLedgerFormat(replica=list(mark.replicas))
    if mark.ctime is not None:
        message.ctime = mark.ctime
    return text_format.MessageToString(message).encode()


def decode_underreplicated_ledger(raw: bytes) -> UnderreplicatedLedger:
    message = UnderreplicatedLedgerFormat()
    _parse(raw, message, "under-replication mark")
    return UnderreplicatedLedger(
        tuple(message.replica), message.ctime if message.HasField("ctime") else None
    )


def encode_lock_data(bookie_id: str | None) -> bytes:
    message = LockDataFormat()
    if bookie_id is not None:
        message.bookieId = bookie_id
    return text_format.MessageToString(message).encode()


def decode_lock_data(raw: bytes) -> str | None:
    """The lock holder's id, None when the lock does not say."""
    message = LockDataFormat()
    _parse(raw, message, "under-replication lock")
    return message.bookieId if message.HasField("bookieId") else None


def encode_rereplication_layout() -> bytes:
    message = LedgerRereplicationLayoutFormat(
        type=REREPLICATION_LAYOUT_TYPE, version=REREPLICATION_LAYOUT_VERSION
    )
    return text_format.MessageToString(message).encode()


def decode_rereplication_layout(raw: bytes) -> tuple[str, int]:
    message = LedgerRereplicationLayoutFormat()
    _parse(raw, message, "under-replication layout")
    return message.type, message.version


def _parse(
    raw: bytes,
    message: UnderreplicatedLedgerFormat | LockDataFormat | LedgerRereplicationLayoutFormat,
    what: str,
) -> None:
    try:
        text_format.Parse(raw.decode(), message)
    except (text_format.ParseError, UnicodeDecodeError) as exc:
        raise MetadataFormatError(what, str(exc)) from exc
    if not message.IsInitialized():
        raise MetadataFormatError(what, "a required field is missing")
