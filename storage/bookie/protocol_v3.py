"""BookKeeper's V3 (protobuf) protocol: frames in and out, no I/O.

A V3 frame is a 4-byte big-endian length and then one `Request` or `Response` message of
`BookkeeperProtocol.proto` (upstream `BookieProtoEncoding.RequestEnDecoderV3` /
`ResponseEnDecoderV3`). Requests and responses are matched by the header's `txnId`; a response
carries the request's operation and txnId with version VERSION_THREE (upstream
`PacketProcessorBaseV3.getHeader`).

V2 and V3 frames share a connection here. Upstream's bookie tries V3 first and falls back to
V2 for the rest of the connection; the first byte tells them apart without trying: a V2 body
starts with its protocol version (2), a V3 message with the tag of its field 1, the header
(0x0A: field 1, length-delimited), which no V2 version byte equals.

Of the V3 operations our bookies answer ADD_ENTRY and READ_ENTRY (the same adds and reads as
V2's, for upstream clients with `useV2WireProtocol=false`, BookKeeper's default),
GET_LIST_OF_ENTRIES_OF_LEDGER and GET_BOOKIE_INFO (the data file system's total and free bytes,
which upstream's clients read for disk-weighted placement and the audit's snapshot reads for its
bookies table); every other one is answered EBADREQ with the request's header, as upstream
answers an operation it does not know.
"""

from __future__ import annotations

import struct

from google.protobuf.message import DecodeError

from storage.bookie.errors import MalformedFrame
from storage.bookie.proto.bookkeeper_protocol_pb2 import (
    AddRequest as V3AddRequest,
)
from storage.bookie.proto.bookkeeper_protocol_pb2 import (
    BKPacketHeader,
    GetBookieInfoRequest,
    GetBookieInfoResponse,
    GetListOfEntriesOfLedgerResponse,
    OperationType,
    ProtocolVersion,
    Request,
    Response,
    StatusCode,
)
from storage.bookie.proto.bookkeeper_protocol_pb2 import (
    ReadRequest as V3ReadRequest,
)

V3Request = Request
V3Response = Response

V3_FIRST_BYTE = 0x0A
"""The first byte of every V3 message (header = field 1, wire type 2)."""
_FRAME_LEN = struct.Struct(">I")

ADD_ENTRY: int = OperationType.ADD_ENTRY
READ_ENTRY: int = OperationType.READ_ENTRY
RECOVERY_ADD: int = V3AddRequest.RECOVERY_ADD
FENCE_LEDGER: int = V3ReadRequest.FENCE_LEDGER
GET_LIST_OF_ENTRIES_OF_LEDGER: int = OperationType.GET_LIST_OF_ENTRIES_OF_LEDGER
GET_BOOKIE_INFO: int = OperationType.GET_BOOKIE_INFO
TOTAL_DISK_CAPACITY: int = GetBookieInfoRequest.TOTAL_DISK_CAPACITY
FREE_DISK_SPACE: int = GetBookieInfoRequest.FREE_DISK_SPACE
VERSION_THREE: int = ProtocolVersion.VERSION_THREE
V3_EOK: int = StatusCode.EOK
V3_ENOLEDGER: int = StatusCode.ENOLEDGER
V3_EBADREQ: int = StatusCode.EBADREQ
V3_EIO: int = StatusCode.EIO
V3_EBADVERSION: int = StatusCode.EBADVERSION

# V3 status -> V2 result code (the values of `protocol.ResultCode`), for the typed errors.
V2_CODE_OF_STATUS: dict[int, int] = {
    StatusCode.EOK: 0,
    StatusCode.ENOLEDGER: 1,
    StatusCode.ENOENTRY: 2,
    StatusCode.EBADREQ: 100,
    StatusCode.EIO: 101,
    StatusCode.EUA: 102,
    StatusCode.EBADVERSION: 103,
    StatusCode.EFENCED: 104,
    StatusCode.EREADONLY: 105,
    StatusCode.ETOOMANYREQUESTS: 106,
    StatusCode.EUNKNOWNLEDGERSTATE: 107,
}


def _frame(message: Request | Response) -> bytes:
    body = message.SerializeToString()
    return _FRAME_LEN.pack(len(body)) + body


def is_v3(buf: bytes | memoryview, start: int) -> bool:
    return buf[start] == V3_FIRST_BYTE


def _request(operation: int, txn_id: int) -> Request:
    """A version-3 `Request` of `operation` with `txn_id`; the caller fills its body."""
    request = Request()
    request.header.version = ProtocolVersion.VERSION_THREE
    request.header.operation = operation  # type: ignore[assignment]
    request.header.txnId = txn_id
    return request


def encode_list_entries_request(txn_id: int, ledger_id: int) -> bytes:
    request = _request(GET_LIST_OF_ENTRIES_OF_LEDGER, txn_id)
    request.getListOfEntriesOfLedgerRequest.ledgerId = ledger_id
    return _frame(request)


def encode_bookie_info_request(txn_id: int,
                               requested: int = TOTAL_DISK_CAPACITY | FREE_DISK_SPACE) -> bytes:
    request = _request(GET_BOOKIE_INFO, txn_id)
    request.getBookieInfoRequest.requested = requested
    return _frame(request)


def encode_bookie_info_response(request: Request, status: int, total: int | None = None,
                                free: int | None = None) -> bytes:
    """`Response` to GET_BOOKIE_INFO (upstream `GetBookieInfoProcessorV3`): the status in the
    response and its body, and the fields the request's `requested` flags asked for."""
    response = Response(header=response_header(request), status=status)  # type: ignore[arg-type]
    body = response.getBookieInfoResponse
    body.status = status  # type: ignore[assignment]
    requested = request.getBookieInfoRequest.requested
    if free is not None and requested & FREE_DISK_SPACE:
        body.freeDiskSpace = free
    if total is not None and requested & TOTAL_DISK_CAPACITY:
        body.totalDiskCapacity = total
    return _frame(response)


def decode_v3_request(buf: bytes | memoryview, start: int, end: int) -> Request:
    request = Request()
    try:
        request.ParseFromString(bytes(buf[start:end]))
    except DecodeError as exc:
        raise MalformedFrame(f"not a V3 request: {exc}") from exc
    return request


def response_header(request: Request) -> BKPacketHeader:
    """Version 3, the request's operation and txnId (upstream `getHeader`)."""
    return BKPacketHeader(version=ProtocolVersion.VERSION_THREE,
                          operation=request.header.operation, txnId=request.header.txnId)


def encode_bad_request(request: Request) -> bytes:
    """The answer to an operation this bookie does not serve: status EBADREQ under the
    request's own header, as upstream's default case."""
    response = Response(status=StatusCode.EBADREQ)
    response.header.CopyFrom(request.header)
    return _frame(response)


def encode_list_entries_response(request: Request, status: int,
                                 availability: bytes | None) -> bytes:
    """`Response` to a GET_LIST_OF_ENTRIES_OF_LEDGER request: the status in both the response
    and its body, the ledger id, and the serialized availability when there is one (upstream
    leaves it unset on an error)."""
    ledger_id = request.getListOfEntriesOfLedgerRequest.ledgerId
    response = Response(header=response_header(request), status=status)  # type: ignore[arg-type]
    body = response.getListOfEntriesOfLedgerResponse
    body.status = status  # type: ignore[assignment]
    body.ledgerId = ledger_id
    if availability is not None:
        body.availabilityOfEntriesOfLedger = availability
    return _frame(response)


STATUS_OF_V2_CODE: dict[int, int] = {code: status for status, code in V2_CODE_OF_STATUS.items()}


def _status(code: int) -> int:
    """The V3 status of a V2 result code (EIO for one V3 has no name for)."""
    return STATUS_OF_V2_CODE.get(code, StatusCode.EIO)


def encode_add_response_v3(request: Request, code: int) -> bytes:
    """`Response` to an ADD_ENTRY: the V2 result `code` as the status of both the response and
    its body, with the request's ids (upstream `WriteEntryProcessorV3`)."""
    status = _status(code)
    response = Response(header=response_header(request), status=status)  # type: ignore[arg-type]
    body = response.addResponse
    body.status = status  # type: ignore[assignment]
    body.ledgerId = request.addRequest.ledgerId
    body.entryId = request.addRequest.entryId
    return _frame(response)


def encode_read_response_v3(request: Request, code: int, entry: bytes) -> bytes:
    """`Response` to a READ_ENTRY: the status in both, the request's ids, and the packaged
    entry when it was read (upstream `ReadEntryProcessorV3`)."""
    status = _status(code)
    response = Response(header=response_header(request), status=status)  # type: ignore[arg-type]
    body = response.readResponse
    body.status = status  # type: ignore[assignment]
    body.ledgerId = request.readRequest.ledgerId
    body.entryId = request.readRequest.entryId
    if status == StatusCode.EOK:
        body.body = entry
    return _frame(response)


def response_status(response: Response, body: GetBookieInfoResponse
                    | GetListOfEntriesOfLedgerResponse) -> int:
    """The answer's status: the response's, or its body's when the response says EOK."""
    status: int = response.status
    if status == StatusCode.EOK and body.HasField("status"):
        status = body.status
    return status


def decode_v3_response(buf: bytes | memoryview, start: int, end: int) -> Response:
    response = Response()
    try:
        response.ParseFromString(bytes(buf[start:end]))
    except DecodeError as exc:
        raise MalformedFrame(f"not a V3 response: {exc}") from exc
    return response
