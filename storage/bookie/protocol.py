"""BookKeeper's V2 binary protocol: frames in and out, no I/O.

Derived from upstream `BookieProtocol` and `BookieProtoEncoding.RequestEnDeCoderPreV3` /
`ResponseEnDeCoderPreV3`. Every frame is a 4-byte big-endian length, then the body:

    header u32 = version << 24 | opcode << 16 | flags       (version 2)

    ADD request      header | master key (20 B) | packaged entry
    READ request     header | ledgerId i64 | entryId i64 [| master key (20 B) when DO_FENCING]
    response         header (flags 0) | result i32 | ledgerId i64 | entryId i64 [| packaged entry]

A response carries the request's ledger and entry ids (entry -1 for a "last entry" read), so a
V2 client matches responses to requests by (opcode, ledgerId, entryId).

A V3 (protobuf) request on the same connection is told apart by its first byte and parsed by
`protocol_v3` (`decode_request_at` returns its `Request` message).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum, IntFlag

from storage.bookie.addpath import frame_spans, frames_end
from storage.bookie.errors import MalformedFrame
from storage.bookie.protocol_v3 import V3_FIRST_BYTE, V3Request, decode_v3_request

PROTOCOL_VERSION = 2
MASTER_KEY_LENGTH = 20
LAST_ADD_CONFIRMED = -1
# nettyMaxFrameSizeBytes as Pulsar's bookkeeper.conf sets it: Pulsar's maxMessageSize default
# (5 MiB) plus its frame padding (10 KiB)
MAX_FRAME_SIZE = 5 * 1024 * 1024 + 10 * 1024

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
AnyRequest = AddRequest | ReadRequest | V3Request


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
    head = _ADD_REQUEST_HEAD | (flags & 0xFFFF)
    return _ADD_FRAME_HEAD.pack(4 + MASTER_KEY_LENGTH + len(entry), head, master_key) + entry


_ADD_FRAME_HEAD = struct.Struct(">II20s")  # frame length, header, master key
_ADD_REQUEST_HEAD = (PROTOCOL_VERSION << 24) | (OpCode.ADD_ENTRY << 16)


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


def decode_request(body: bytes) -> AnyRequest:
    """Parse one request body (without its length); MalformedFrame for anything else."""
    return decode_request_at(body, 0, len(body))


_ADD_V2 = (PROTOCOL_VERSION << 8) | OpCode.ADD_ENTRY  # header >> 16 of a V2 add


def decode_request_at(buf: bytes, start: int, end: int) -> AnyRequest:
    """`decode_request` of the body at buf[start:end], slicing the master key and the entry
    straight out of the received buffer (one copy of the entry, none of the frame)."""
    size = end - start
    if size < 4:
        raise MalformedFrame("frame shorter than its header")
    (head,) = _HEADER.unpack_from(buf, start)
    if head >> 16 == _ADD_V2 and size >= _ADD.size:  # the hot path: a well-formed add
        ledger_id, entry_id = _IDS.unpack_from(buf, start + 4 + MASTER_KEY_LENGTH)
        return AddRequest(
            ledger_id, entry_id, buf[start + 4 : start + 24], buf[start + 24 : end], head & 0xFFFF
        )
    version, opcode, flags = split_header(head)
    if version != PROTOCOL_VERSION:
        if version == V3_FIRST_BYTE:
            return decode_v3_request(buf, start, end)
        raise MalformedFrame(f"unsupported protocol version {version}")
    if opcode == OpCode.ADD_ENTRY:
        raise MalformedFrame("add request shorter than master key and entry ids")
    if opcode == OpCode.READ_ENTRY:
        if size < _READ.size:
            raise MalformedFrame("read request shorter than its ids")
        _, ledger_id, entry_id = _READ.unpack_from(buf, start)
        master_key = None
        if flags & FLAG_DO_FENCING:
            if size < _READ.size + MASTER_KEY_LENGTH:
                raise MalformedFrame("fencing read without its master key")
            master_key = bytes(buf[start + _READ.size : start + _READ.size + MASTER_KEY_LENGTH])
        return ReadRequest(ledger_id, entry_id, master_key, flags)
    raise MalformedFrame(f"unsupported opcode {opcode}")


_ADD_RESPONSE = struct.Struct(">IIiqq")  # frame length, header, result, ledgerId, entryId
_ADD_RESPONSE_HEAD = (PROTOCOL_VERSION << 24) | (OpCode.ADD_ENTRY << 16)


def encode_add_response(code: int, ledger_id: int, entry_id: int) -> bytes:
    """`encode_response` for an add, in one pack (it is sent once per add)."""
    return _ADD_RESPONSE.pack(_RESPONSE.size, _ADD_RESPONSE_HEAD, code, ledger_id, entry_id)


# The batch path of the server (`RequestHandler.handle_buffer`): an add request with no
# flags is recognised by its whole header; its response is a fixed prefix (length, header,
# result) followed by the 16 id bytes the request's entry starts with, sliced, not re-packed.
PLAIN_ADD_HEADER = _ADD_REQUEST_HEAD  # version 2, ADD_ENTRY, flags 0
ADD_MIN_BODY = _ADD.size  # header, master key, ledger and entry id
ADD_IDS_AT = 4 + MASTER_KEY_LENGTH  # where the entry (and its two ids) starts in an add body
ADD_IDS = _IDS


def add_response_prefix(code: int) -> bytes:
    """The first 12 bytes of an add response with `code`; the request's id bytes follow."""
    return _ADD_RESPONSE.pack(_RESPONSE.size, _ADD_RESPONSE_HEAD, code, 0, 0)[:12]


def decode_response(body: bytes | memoryview) -> Response:
    opcode, code, ledger_id, entry_id = decode_response_head(body, 0, len(body))
    entry = bytes(body[_RESPONSE.size :]) if opcode == OpCode.READ_ENTRY else b""
    return Response(OpCode(opcode), code, ledger_id, entry_id, entry)


def decode_response_head(
    buf: bytes | memoryview, start: int, end: int
) -> tuple[int, int, int, int]:
    """(opcode, result code, ledgerId, entryId) of the response body at buf[start:end]; a
    read response's entry follows at start + RESPONSE_HEAD_LEN."""
    if end - start < _RESPONSE.size:
        raise MalformedFrame("response shorter than its header")
    head, code, ledger_id, entry_id = _RESPONSE.unpack_from(buf, start)
    opcode = (head >> 16) & 0xFF if head >> 24 else head & 0xFF
    if opcode != OpCode.ADD_ENTRY and opcode != OpCode.READ_ENTRY:
        raise MalformedFrame(f"unsupported response opcode {opcode}")
    return opcode, code, ledger_id, entry_id


RESPONSE_HEAD_LEN = _RESPONSE.size


class FrameReader:
    """Cuts a byte stream into frame bodies; MalformedFrame on an impossible length.

    `whole` is the hot path: it returns the received buffer itself and the span of its whole
    frames, so a caller reads each field once out of the read instead of copying every frame
    first (`spans`: the (start, end) of each frame body in it). Only an incomplete tail is
    kept, and it is not re-joined with each read until the frame it starts can be complete (a
    5 MiB frame arriving in 64 KiB reads is copied once, not once per read)."""

    def __init__(self, max_frame: int = MAX_FRAME_SIZE) -> None:
        self.max_frame = max_frame
        self._tail: list[bytes] = []
        self._tail_len = 0
        self._need = 0  # bytes the tail needs before its first frame can be whole

    @property
    def partial(self) -> bool:
        """A frame is begun and not complete."""
        return self._tail_len > 0

    def whole(self, data: bytes) -> tuple[bytes, int, int]:
        """(buffer, start, end) of the whole frames received so far, length prefixes
        included (the compiled `addpath.frames_end` checks each length)."""
        if self._tail:
            self._tail.append(data)
            self._tail_len += len(data)
            if self._tail_len < self._need:
                return b"", 0, 0
            data = b"".join(self._tail)
            self._tail, self._tail_len, self._need = [], 0, 0
        end, need = frames_end(data, 0, self.max_frame)
        if end < len(data):
            tail = data[end:] if end else data
            self._tail, self._tail_len, self._need = [tail], len(tail), need
        return data, 0, end

    def spans(self, data: bytes) -> tuple[bytes, list[tuple[int, int]]]:
        buf, start, end = self.whole(data)
        return buf, frame_spans(buf, start, end)

    def feed(self, data: bytes) -> list[bytes]:
        """Every whole frame body received so far (copies; for the non-hot paths)."""
        buf, spans = self.spans(data)
        return [buf[start:end] for start, end in spans]
