"""BookKeeper's V2 binary protocol: frames in and out, no I/O.

Derived from upstream `BookieProtocol` and `BookieProtoEncoding.RequestEnDeCoderPreV3` /
`ResponseEnDeCoderPreV3`. Every frame is a 4-byte big-endian length, then the body:

    header u32 = version << 24 | opcode << 16 | flags       (version 2)

    ADD request      header | master key (20 B) | packaged entry
    READ request     header | ledgerId i64 | entryId i64 [| master key (20 B) when DO_FENCING]
    response         header (flags 0) | result i32 | ledgerId i64 | entryId i64 [| packaged entry]

A response carries the request's ledger and entry ids (entry -1 for a "last entry" read), so a
V2 client matches responses to requests by (opcode, ledgerId, entryId).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum, IntFlag

from storage.bookie.errors import MalformedFrame

PROTOCOL_VERSION = 2
MASTER_KEY_LENGTH = 20
LAST_ADD_CONFIRMED = -1
# Upstream's nettyMaxFrameSizeBytes default (5 MiB) plus room for the headers.
MAX_FRAME_SIZE = 5 * 1024 * 1024 + 1024

FRAME_LEN = struct.Struct(">I")
_HEADER = struct.Struct(">I")
_IDS = struct.Struct(">qq")
_RESPONSE = struct.Struct(">Iiqq")
_READ = struct.Struct(">Iqq")
_ADD = struct.Struct(">I20sqq")  # header, master key, then the entry's own ledger and entry id


class OpCode(IntEnum):
    ADD_ENTRY = 1
    READ_ENTRY = 2
    AUTH = 3
    READ_LAC = 4
    WRITE_LAC = 5
    GET_BOOKIE_INFO = 6
    BATCH_READ_ENTRY = 7


class Flag(IntFlag):
    NONE = 0
    DO_FENCING = 0x1
    RECOVERY_ADD = 0x2
    HIGH_PRIORITY = 0x4


# The same bits as plain ints for the per-request paths: `int & IntFlag` goes through
# IntFlag.__rand__ and builds a Flag, ~5 µs a request on this machine.
FLAG_DO_FENCING = 0x1
FLAG_RECOVERY_ADD = 0x2
FLAG_HIGH_PRIORITY = 0x4


class ResultCode(IntEnum):
    EOK = 0
    ENOLEDGER = 1
    ENOENTRY = 2
    EBADREQ = 100
    EIO = 101
    EUA = 102
    EBADVERSION = 103
    EFENCED = 104
    EREADONLY = 105
    ETOOMANYREQUESTS = 106
    EUNKNOWNLEDGERSTATE = 107


@dataclass(slots=True)
class AddRequest:
    ledger_id: int
    entry_id: int
    master_key: bytes
    entry: bytes  # the packaged entry
    flags: int = 0  # Flag bits, kept an int (see FLAG_*)

    @property
    def recovery(self) -> bool:
        return bool(self.flags & FLAG_RECOVERY_ADD)

    @property
    def high_priority(self) -> bool:
        return bool(self.flags & FLAG_HIGH_PRIORITY)


@dataclass(slots=True)
class ReadRequest:
    ledger_id: int
    entry_id: int
    master_key: bytes | None = None
    flags: int = 0

    @property
    def fencing(self) -> bool:
        return bool(self.flags & FLAG_DO_FENCING)


@dataclass(frozen=True, slots=True)
class Response:
    opcode: OpCode
    code: int  # a ResultCode value (kept an int so unknown codes survive decoding)
    ledger_id: int
    entry_id: int
    entry: bytes = b""  # reads only


Request = AddRequest | ReadRequest


def header(opcode: int, flags: int) -> int:
    return (PROTOCOL_VERSION << 24) | ((int(opcode) & 0xFF) << 16) | (int(flags) & 0xFFFF)


def split_header(value: int) -> tuple[int, int, int]:
    """(version, opcode, flags); version 0 frames carry only an opcode, as upstream."""
    version = value >> 24
    if version == 0:
        return 0, value & 0xFF, 0
    return version, (value >> 16) & 0xFF, value & 0xFFFF


def _frame(body_len: int) -> bytes:
    return FRAME_LEN.pack(body_len)


def encode_add(
    ledger_id: int, entry_id: int, master_key: bytes, entry: bytes, flags: int = 0
) -> bytes:
    if len(master_key) != MASTER_KEY_LENGTH:
        raise ValueError(f"master key must be {MASTER_KEY_LENGTH} bytes")
    ids = _IDS.unpack_from(entry) if len(entry) >= _IDS.size else None
    if ids != (ledger_id, entry_id):
        raise ValueError("the packaged entry does not start with this ledger and entry id")
    body_len = 4 + MASTER_KEY_LENGTH + len(entry)
    return _frame(body_len) + _HEADER.pack(header(OpCode.ADD_ENTRY, flags)) + master_key + entry


def encode_read(
    ledger_id: int, entry_id: int, master_key: bytes | None = None, flags: int = 0
) -> bytes:
    if flags & FLAG_DO_FENCING:
        if master_key is None or len(master_key) != MASTER_KEY_LENGTH:
            raise ValueError("a fencing read needs the 20-byte master key")
        body = _READ.pack(header(OpCode.READ_ENTRY, flags), ledger_id, entry_id) + master_key
    else:
        body = _READ.pack(header(OpCode.READ_ENTRY, flags), ledger_id, entry_id)
    return _frame(len(body)) + body


def encode_request(request: Request) -> bytes:
    if isinstance(request, AddRequest):
        return encode_add(
            request.ledger_id, request.entry_id, request.master_key, request.entry, request.flags
        )
    return encode_read(request.ledger_id, request.entry_id, request.master_key, request.flags)


def encode_response(
    opcode: int, code: int, ledger_id: int, entry_id: int, entry: bytes = b""
) -> bytes:
    body_len = _RESPONSE.size + len(entry)
    head = _RESPONSE.pack(header(opcode, 0), code, ledger_id, entry_id)
    return _frame(body_len) + head + entry if entry else _frame(body_len) + head


def decode_request(body: bytes) -> Request:
    """Parse one request body (without its length); MalformedFrame for anything else."""
    size = len(body)
    if size < 4:
        raise MalformedFrame("frame shorter than its header")
    (head,) = _HEADER.unpack_from(body)
    version, opcode, flags = split_header(head)
    if version != PROTOCOL_VERSION:
        raise MalformedFrame(f"unsupported protocol version {version}")
    if opcode == OpCode.ADD_ENTRY:
        if size < _ADD.size:
            raise MalformedFrame("add request shorter than master key and entry ids")
        _, key, ledger_id, entry_id = _ADD.unpack_from(body)
        return AddRequest(ledger_id, entry_id, key, body[4 + MASTER_KEY_LENGTH :], flags)
    if opcode == OpCode.READ_ENTRY:
        if size < _READ.size:
            raise MalformedFrame("read request shorter than its ids")
        _, ledger_id, entry_id = _READ.unpack_from(body)
        master_key = None
        if flags & FLAG_DO_FENCING:
            if size < _READ.size + MASTER_KEY_LENGTH:
                raise MalformedFrame("fencing read without its master key")
            master_key = body[_READ.size : _READ.size + MASTER_KEY_LENGTH]
        return ReadRequest(ledger_id, entry_id, master_key, flags)
    raise MalformedFrame(f"unsupported opcode {opcode}")


def decode_response(body: bytes | memoryview) -> Response:
    if len(body) < _RESPONSE.size:
        raise MalformedFrame("response shorter than its header")
    head, code, ledger_id, entry_id = _RESPONSE.unpack_from(body)
    _, opcode, _ = split_header(head)
    if opcode not in (OpCode.ADD_ENTRY, OpCode.READ_ENTRY):
        raise MalformedFrame(f"unsupported response opcode {opcode}")
    entry = bytes(body[_RESPONSE.size :]) if opcode == OpCode.READ_ENTRY else b""
    return Response(OpCode(opcode), code, ledger_id, entry_id, entry)


class FrameReader:
    """Cuts a byte stream into frame bodies; MalformedFrame on an impossible length."""

    def __init__(self, max_frame: int = MAX_FRAME_SIZE) -> None:
        self.max_frame = max_frame
        self._buf = bytearray()

    def feed(self, data: bytes) -> list[bytes]:
        self._buf += data
        frames: list[bytes] = []
        buf = self._buf
        pos = 0
        while len(buf) - pos >= 4:
            (size,) = FRAME_LEN.unpack_from(buf, pos)
            if size < 4 or size > self.max_frame:
                raise MalformedFrame(f"frame length {size} out of range")
            if len(buf) - pos - 4 < size:
                break
            frames.append(bytes(buf[pos + 4 : pos + 4 + size]))
            pos += 4 + size
        if pos:
            del buf[:pos]
        return frames
