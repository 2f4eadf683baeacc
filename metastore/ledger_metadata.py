"""BookKeeper ledger metadata: the value of a ledger's key (`/ledgers/00/0000/L0001`), byte
for byte as BookKeeper's `LedgerMetadataSerDe` writes it, and a typed `LedgerMetadata`.

Layout of a value (format version 3, what new ledgers are written in):

    "BookieMetadataFormatVersion" TAB "3" LF       the header line (29 bytes for one digit)
    varint32(len(body))                            protobuf's length-delimited framing
    body                                           LedgerMetadataFormat, binary

The body's fields are written in field-number order, as the Java serializer writes them:
quorumSize (Qw), ensembleSize, length, lastEntryId (always; -1 while not closed), state, one
segment per ensemble in first-entry order, digestType and password (always together; an empty
password is empty bytes), ackQuorumSize, ctime (only when the creator stores it), the custom
metadata entries in the order given, cToken (always in V3; 0 unless the creator set one).

Older values a real cluster may still hold are read too, and written back in the version they
were read in (as BookKeeper keeps a ledger's format version):

- version 2: the same message in protobuf text format after the header (no cToken);
- version 1: lines of text: Qw, E, length, one `firstEntry TAB bookie TAB ...` line per
  ensemble, and a final `lastEntryId TAB CLOSED` line once closed (-102 meant in recovery).

Reader rules kept from BookKeeper: the last entry id and length count only when CLOSED; a
missing ack quorum means Qa = Qw; digest type and password are taken only together.

Pure: no I/O and no etcd client, so Spark workers decode metadata with it.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from google.protobuf import text_format
from google.protobuf.message import DecodeError

from metastore.errors import MetadataFormatError
from metastore.proto.bookkeeper_formats_pb2 import LedgerMetadataFormat

HEADER_KEY = b"BookieMetadataFormatVersion\t"
CURRENT_FORMAT_VERSION = 3
INVALID_ENTRY_ID = -1
"""Last entry id of a ledger that is not closed, or closed empty."""
_V1_CLOSED = "CLOSED"
_V1_IN_RECOVERY_ENTRY_ID = -102
_MAX_VERSION_DIGITS = 10
_WHAT = "ledger metadata"


class LedgerState(enum.Enum):
    OPEN = 1
    IN_RECOVERY = 2
    CLOSED = 3


class DigestType(enum.Enum):
    """BookKeeper's client names; the stored enum calls MAC `HMAC` (same number)."""

    CRC32 = 1
    MAC = 2
    CRC32C = 3
    DUMMY = 4


@dataclass(frozen=True)
class LedgerMetadata:
    """One ledger's metadata. `ensembles` maps each ensemble's first entry id to its bookie
    ids in write order, sorted by first entry id. `ctime` is None when the creator did not
    store one; `digest_type` and `password` are both None only for ledgers created without a
    password by old clients. `format_version` is the version the value is written in."""

    ledger_id: int
    ensemble_size: int
    write_quorum_size: int
    ack_quorum_size: int
    ensembles: Mapping[int, tuple[str, ...]]
    state: LedgerState = LedgerState.OPEN
    last_entry_id: int = INVALID_ENTRY_ID
    length: int = 0
    digest_type: DigestType | None = DigestType.CRC32C
    password: bytes | None = b""
    custom_metadata: Mapping[str, bytes] = field(default_factory=dict)
    ctime: int | None = None
    ctoken: int = 0
    format_version: int = CURRENT_FORMAT_VERSION

    def __post_init__(self) -> None:
        ordered = {int(first): tuple(self.ensembles[first]) for first in sorted(self.ensembles)}
        object.__setattr__(self, "ensembles", ordered)
        object.__setattr__(self, "custom_metadata", dict(self.custom_metadata))
        problem = self._problem()
        if problem:
            raise ValueError(f"ledger {self.ledger_id}: {problem}")

    def _problem(self) -> str | None:
        if self.ledger_id < 0:
            return "ledger id must be >= 0"
        if not self.ensemble_size >= self.write_quorum_size >= self.ack_quorum_size >= 1:
            return "need E >= Qw >= Qa >= 1"
        if not self.ensembles:
            return "there must be at least one ensemble"
        if any(len(bookies) != self.ensemble_size for bookies in self.ensembles.values()):
            return f"every ensemble must have {self.ensemble_size} bookies"
        if self.state is not LedgerState.CLOSED and (
            self.last_entry_id != INVALID_ENTRY_ID or self.length != 0
        ):
            return "a ledger that is not closed has last entry id -1 and length 0"
        if (self.digest_type is None) != (self.password is None):
            return "digest type and password go together"
        if self.format_version not in (1, 2, 3):
            return f"unknown metadata format version {self.format_version}"
        return None

    @property
    def is_closed(self) -> bool:
        return self.state is LedgerState.CLOSED

    @property
    def current_ensemble(self) -> tuple[str, ...]:
        """The last ensemble: the one new entries go to."""
        return self.ensembles[max(self.ensembles)]

    def ensemble_for(self, entry_id: int) -> tuple[str, ...]:
        """The ensemble that holds `entry_id` (the last one starting at or before it)."""
        chosen = next(iter(self.ensembles.values()))
        for first, bookies in self.ensembles.items():
            if first > entry_id:
                break
            chosen = bookies
        return chosen


# -- encoding ---------------------------------------------------------------------------------


def encode_ledger_metadata(metadata: LedgerMetadata) -> bytes:
    """The value stored at the ledger's key, in `metadata.format_version`."""
    header = HEADER_KEY + str(metadata.format_version).encode() + b"\n"
    if metadata.format_version == 1:
        return header + _v1_text(metadata).encode()
    message = _to_message(metadata, with_ctoken=metadata.format_version == 3)
    if metadata.format_version == 2:
        return header + text_format.MessageToString(message).encode()
    body = message.SerializeToString()
    return header + _varint(len(body)) + body


def _to_message(metadata: LedgerMetadata, *, with_ctoken: bool) -> LedgerMetadataFormat:
    message = LedgerMetadataFormat(
        quorumSize=metadata.write_quorum_size,
        ensembleSize=metadata.ensemble_size,
        length=metadata.length,
        lastEntryId=metadata.last_entry_id,
        state=LedgerMetadataFormat.State.ValueType(metadata.state.value),
        ackQuorumSize=metadata.ack_quorum_size,
    )
    for first, bookies in metadata.ensembles.items():
        message.segment.add(ensembleMember=list(bookies), firstEntryId=first)
    if metadata.digest_type is not None and metadata.password is not None:
        message.digestType = LedgerMetadataFormat.DigestType.ValueType(metadata.digest_type.value)
        message.password = metadata.password
    if metadata.ctime is not None:
        message.ctime = metadata.ctime
    for key, value in metadata.custom_metadata.items():
        message.customMetadata.add(key=key, value=value)
    if with_ctoken:
        message.cToken = metadata.ctoken
    return message


def _v1_text(metadata: LedgerMetadata) -> str:
    lines = [str(metadata.write_quorum_size), str(metadata.ensemble_size), str(metadata.length)]
    lines += ["\t".join([str(first), *bookies]) for first, bookies in metadata.ensembles.items()]
    if metadata.state is LedgerState.IN_RECOVERY:
        lines.append(f"{_V1_IN_RECOVERY_ENTRY_ID}\t{_V1_CLOSED}")
    elif metadata.state is LedgerState.CLOSED:
        lines.append(f"{metadata.last_entry_id}\t{_V1_CLOSED}")
    return "\n".join(lines)


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


# -- decoding ---------------------------------------------------------------------------------


def decode_ledger_metadata(ledger_id: int, raw: bytes) -> LedgerMetadata:
    """Parse the value of ledger `ledger_id`'s key (format version 1, 2 or 3);
    `MetadataFormatError` when it is not ledger metadata."""
    version, offset = _read_header(raw)
    try:
        if version == 3:
            message = _parse_delimited(raw, offset)
        elif version == 2:
            message = LedgerMetadataFormat()
            text_format.Parse(raw[offset:].decode(), message)
        elif version == 1:
            return _parse_v1(ledger_id, raw[offset:].decode())
        else:
            raise MetadataFormatError(
                _WHAT, f"format version {version} is not between 1 and {CURRENT_FORMAT_VERSION}"
            )
        if not message.IsInitialized():
            raise MetadataFormatError(_WHAT, "a required field is missing")
        return _from_message(ledger_id, message, version)
    except (DecodeError, text_format.ParseError, UnicodeDecodeError, ValueError) as exc:
        if isinstance(exc, MetadataFormatError):
            raise
        raise MetadataFormatError(_WHAT, f"ledger {ledger_id}: {exc}") from exc


def _read_header(raw: bytes) -> tuple[int, int]:
    if not raw.startswith(HEADER_KEY):
        raise MetadataFormatError(_WHAT, "no BookieMetadataFormatVersion header")
    start = len(HEADER_KEY)
    end = raw.find(b"\n", start, start + _MAX_VERSION_DIGITS + 1)
    digits = raw[start:end]
    if end < 0 or not digits.isdigit():
        raise MetadataFormatError(_WHAT, "unreadable format version in the header")
    return int(digits), end + 1


def _parse_delimited(raw: bytes, offset: int) -> LedgerMetadataFormat:
    size = shift = 0
    while True:
        if offset >= len(raw) or shift >= 35:
            raise MetadataFormatError(_WHAT, "truncated or malformed length prefix")
        byte = raw[offset]
        offset += 1
        size |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            break
    body = raw[offset : offset + size]
    if len(body) != size:
        raise MetadataFormatError(_WHAT, f"body of {len(body)} bytes, length prefix says {size}")
    message = LedgerMetadataFormat()
    message.ParseFromString(body)
    return message


def _from_message(ledger_id: int, message: LedgerMetadataFormat, version: int) -> LedgerMetadata:
    state = LedgerState(message.state)
    closed = state is LedgerState.CLOSED
    has_password = message.HasField("password")
    return LedgerMetadata(
        ledger_id=ledger_id,
        ensemble_size=message.ensembleSize,
        write_quorum_size=message.quorumSize,
        ack_quorum_size=(
            message.ackQuorumSize if message.HasField("ackQuorumSize") else message.quorumSize
        ),
        ensembles=_ensembles((s.firstEntryId, s.ensembleMember) for s in message.segment),
        state=state,
        last_entry_id=message.lastEntryId if closed else INVALID_ENTRY_ID,
        length=message.length if closed else 0,
        digest_type=DigestType(message.digestType) if has_password else None,
        password=message.password if has_password else None,
        custom_metadata={entry.key: entry.value for entry in message.customMetadata},
        ctime=message.ctime if message.HasField("ctime") else None,
        ctoken=message.cToken,
        format_version=version,
    )


def _ensembles(segments: Iterable[tuple[int, Iterable[str]]]) -> dict[int, tuple[str, ...]]:
    ensembles: dict[int, tuple[str, ...]] = {}
    for first, bookies in segments:
        if ensembles and first <= next(reversed(ensembles)):
            raise MetadataFormatError(_WHAT, "ensembles are not in increasing first-entry order")
        ensembles[first] = tuple(bookies)
    return ensembles


def _parse_v1(ledger_id: int, text: str) -> LedgerMetadata:
    lines = text.split("\n")
    if len(lines) < 3:
        raise MetadataFormatError(_WHAT, f"ledger {ledger_id}: version 1 text is too short")
    write_quorum, ensemble_size, length = int(lines[0]), int(lines[1]), int(lines[2])
    segments: list[tuple[int, list[str]]] = []
    state, last_entry_id = LedgerState.OPEN, INVALID_ENTRY_ID
    for line in lines[3:]:
        if not line:
            continue
        parts = line.split("\t")
        if len(parts) > 1 and parts[1] == _V1_CLOSED:
            if int(parts[0]) == _V1_IN_RECOVERY_ENTRY_ID:
                state = LedgerState.IN_RECOVERY
            else:
                state, last_entry_id = LedgerState.CLOSED, int(parts[0])
            break
        segments.append((int(parts[0]), parts[1:]))
    closed = state is LedgerState.CLOSED
    return LedgerMetadata(
        ledger_id=ledger_id,
        ensemble_size=ensemble_size,
        write_quorum_size=write_quorum,
        ack_quorum_size=write_quorum,
        ensembles=_ensembles(segments),
        state=state,
        last_entry_id=last_entry_id,
        length=length if closed else 0,
        digest_type=None,
        password=None,
        format_version=1,
    )
