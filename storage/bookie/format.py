"""Byte formats of stored data, pure (no I/O): the packaged entry and the on-disk records.

Packaged entry (what a client sends, a bookie stores and returns), as BookKeeper's
`DigestManager.computeDigestAndPackageForSending` lays it out for the CRC32C digest type:

    0        8        16                24       32       36
    +--------+--------+-----------------+--------+--------+-------------+
    |ledgerId|entryId |lastAddConfirmed |length  |crc32c  | payload ... |
    +--------+--------+-----------------+--------+--------+-------------+
    big-endian int64 each; `length` is the ledger's cumulative length including this payload;
    crc32c (4 bytes, big-endian) = CRC32C over bytes [0, 32) followed by the payload.

Journal and entry-log record (ours; BookKeeper's journal has no per-record checksum):

    +--------+--------+---------------+
    |len u32 |crc u32 | body (len B)  |    crc = CRC32C(body); a zero len ends a file
    +--------+--------+---------------+

A record body is either a packaged entry or a meta record shaped like BookKeeper's journal meta
entries (`Journal`/`BookieImpl`): ledgerId, a negative entry id, then data:

    ledgerId | METAENTRY_ID_LEDGER_KEY (-0x1000) | keyLen u32 | master key
    ledgerId | METAENTRY_ID_FENCE_KEY  (-0x2000)

CRC32C, the entry digest and the record header come from the compiled add path
(`storage.bookie.addpath`: the SSE4.2 instruction where the CPU has it), which checks and
journals a writer's adds with the same code.
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass

from storage.bookie.addpath import crc32c, entry_digest, record_header
from storage.bookie.errors import CorruptEntry

HEADER = struct.Struct(">qqqq")
DIGEST = struct.Struct(">I")
HEADER_LEN = HEADER.size  # 32
DIGEST_LEN = DIGEST.size  # 4
ENTRY_OVERHEAD = HEADER_LEN + DIGEST_LEN
IDS = struct.Struct(">qq")
_CHECK = struct.Struct(">qq16xI")  # ledgerId, entryId, (LAC, length), digest

METAENTRY_ID_LEDGER_KEY = -0x1000
METAENTRY_ID_FENCE_KEY = -0x2000

RECORD_HEADER = struct.Struct(">II")
RECORD_HEADER_LEN = RECORD_HEADER.size
MAX_RECORD = 64 * 1024 * 1024


@dataclass(frozen=True)
class EntryHeader:
    ledger_id: int
    entry_id: int
    last_add_confirmed: int
    length: int


def package_entry(
    ledger_id: int, entry_id: int, last_add_confirmed: int, length: int, payload: bytes
) -> bytes:
    """The packaged entry as a BookKeeper client with the CRC32C digest builds it."""
    header = HEADER.pack(ledger_id, entry_id, last_add_confirmed, length)
    digest = crc32c(payload, crc32c(header))
    return header + DIGEST.pack(digest) + payload


def entry_ids(packaged: bytes | memoryview) -> tuple[int, int]:
    if len(packaged) < IDS.size:
        raise CorruptEntry(f"entry of {len(packaged)} bytes is shorter than its ids")
    ledger_id, entry_id = IDS.unpack_from(packaged)
    return ledger_id, entry_id


def check_entry(packaged: bytes, ledger_id: int, entry_id: int) -> None:
    """The per-request check (digest and ids), without building a header; CorruptEntry."""
    if len(packaged) < ENTRY_OVERHEAD:
        raise CorruptEntry(f"entry of {len(packaged)} bytes is shorter than its header")
    found_ledger, found_entry, digest = _CHECK.unpack_from(packaged)
    if digest != entry_digest(packaged):
        raise CorruptEntry(f"digest mismatch in ledger {ledger_id} entry {entry_id}")
    if found_ledger != ledger_id or found_entry != entry_id:
        raise CorruptEntry(
            f"expected ledger {ledger_id} entry {entry_id}, found {found_ledger} {found_entry}"
        )


def verify_entry(
    packaged: bytes | memoryview, ledger_id: int | None = None, entry_id: int | None = None
) -> EntryHeader:
    """Check the digest (and the expected ids); raise CorruptEntry, never return bad bytes."""
    if len(packaged) < ENTRY_OVERHEAD:
        raise CorruptEntry(f"entry of {len(packaged)} bytes is shorter than its header")
    header = EntryHeader(*HEADER.unpack_from(packaged))
    (stored,) = DIGEST.unpack_from(packaged, HEADER_LEN)
    if stored != entry_digest(packaged):
        raise CorruptEntry(f"digest mismatch in ledger {header.ledger_id} entry {header.entry_id}")
    if ledger_id is not None and header.ledger_id != ledger_id:
        raise CorruptEntry(f"expected ledger {ledger_id}, found {header.ledger_id}")
    if entry_id is not None and header.entry_id != entry_id:
        raise CorruptEntry(f"expected entry {entry_id}, found {header.entry_id}")
    return header


def entry_payload(packaged: bytes | memoryview) -> bytes:
    return bytes(packaged[ENTRY_OVERHEAD:])


def master_key_record(ledger_id: int, master_key: bytes) -> bytes:
    return (
        IDS.pack(ledger_id, METAENTRY_ID_LEDGER_KEY)
        + struct.pack(">I", len(master_key))
        + (master_key)
    )


def fence_record(ledger_id: int) -> bytes:
    return IDS.pack(ledger_id, METAENTRY_ID_FENCE_KEY)


def parse_master_key_record(body: bytes | memoryview) -> bytes:
    (size,) = struct.unpack_from(">I", body, IDS.size)
    key = bytes(body[IDS.size + 4 : IDS.size + 4 + size])
    if len(key) != size:
        raise CorruptEntry("truncated master-key record")
    return key


def encode_record(body: bytes | memoryview) -> bytes:
    return record_header(body) + bytes(body)


def decode_record(
    buf: bytes | memoryview | mmap.mmap, offset: int
) -> tuple[memoryview, int] | None:
    """The record body at `offset` and the offset after it, or None at the end of valid data
    (a zero length from preallocation, a torn write, or a checksum mismatch)."""
    view = memoryview(buf)
    if offset + RECORD_HEADER_LEN > len(view):
        return None
    size, crc = RECORD_HEADER.unpack_from(view, offset)
    start = offset + RECORD_HEADER_LEN
    if size == 0 or size > MAX_RECORD or start + size > len(view):
        return None
    body = view[start : start + size]
    if crc32c(body) != crc:
        return None
    return body, start + size
