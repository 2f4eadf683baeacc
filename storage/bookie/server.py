"""The bookie's TCP server: one asyncio protocol per connection, one request handler.

Frames are cut and parsed by `protocol` (no I/O there); a frame that does not parse closes
that connection only. Adds are answered from the journal's callback (after the group's
fdatasync), so a pipelined connection never waits on one request to send the next.

`RequestHandler.handle_buffer` takes all the requests of one read at once: runs of adds
without flags (a writer's traffic) are taken in compiled code (`Bookie.add_run`,
`storage.bookie.addpath`), others without flags go through `Bookie.add_unacked`, and all of
them are answered together, in one run of responses: sent by the journal's writer thread as
soon as their group's fdatasync returns (`addpath.ReplySocket`, a duplicate of the
connection's socket), or by the loop from the group's callback when that thread could not
(the loop had bytes of its own waiting, the socket was full, or the group failed: EIO). Every
other request (reads, recovery adds, V3) goes through `handle`, in order; its response leaves
through the loop's transport, never inside a run of the writer's.

V3 requests (`protocol_v3`) share the connection: GET_BOOKIE_INFO is answered with the data
file system's total and free bytes (upstream's `GetBookieInfoProcessorV3`);
GET_LIST_OF_ENTRIES_OF_LEDGER is answered
as upstream's `GetListOfEntriesOfLedgerProcessorV3` (EBADVERSION unless the header says
version 3, ENOLEDGER for a ledger the bookie does not know, else EOK with the entries in the
`AvailabilityOfEntriesOfLedger` format), V3 adds and reads (the V2 paths, answered in V3's
frames); any other V3 operation gets EBADREQ.
"""

from __future__ import annotations

import asyncio
import logging
import os
import struct
import time
from collections.abc import Callable
from typing import Protocol, cast

from storage.bookie.addpath import ReplyRun, ReplySocket, with_result
from storage.bookie.availability import encode_availability
from storage.bookie.bookie import DEFERRED, Bookie
from storage.bookie.connections import ConnectionBounds, ConnectionLimits
from storage.bookie.errors import MalformedFrame
from storage.bookie.metrics import BookieMetrics
from storage.bookie.protocol import (
    ADD_IDS,
    ADD_IDS_AT,
    ADD_MIN_BODY,
    FLAG_DO_FENCING,
    FLAG_RECOVERY_ADD,
    MAX_FRAME_SIZE,
    PLAIN_ADD_HEADER,
    AddRequest,
    AnyRequest,
    FrameReader,
    OpCode,
    ReadRequest,
    ResultCode,
    decode_request_at,
    encode_add_response,
    encode_response,
)
from storage.bookie.protocol_v3 import (
    ADD_ENTRY,
    FENCE_LEDGER,
    GET_BOOKIE_INFO,
    GET_LIST_OF_ENTRIES_OF_LEDGER,
    READ_ENTRY,
    RECOVERY_ADD,
    V3_EBADVERSION,
    V3_EIO,
    V3_ENOLEDGER,
    V3_EOK,
    VERSION_THREE,
    V3Request,
    encode_add_response_v3,
    encode_bad_request,
    encode_bookie_info_response,
    encode_list_entries_response,
    encode_read_response_v3,
)

log = logging.getLogger(__name__)

Send = Callable[[bytes], None]
Durable = Callable[[BaseException | None], None]
_READ_RESPONSE_HEAD = 28  # frame length, header, status, ledger id, entry id
_HEADER = struct.Struct(">I")  # a request body's first word: version, opcode, flags
# Response bytes a connection's transport may hold unsent before the connection stops reading
# requests (asyncio's default high-water mark).
WRITE_BACKLOG = 64 * 1024


class RunSender(Protocol):
    """Where a read's run of add responses goes: `reply_socket`, the connection's socket as
    the journal's writer sends on it (None: the loop sends the run), and `send_rest(run)`,
    what the writer did not send of a synced run."""

    reply_socket: ReplySocket | None

    def send_rest(self, run: ReplyRun) -> None: ...


class RequestHandler:
    """Turns one request into one response, calling `send(frame)` exactly once."""

    def __init__(self, bookie: Bookie, metrics: BookieMetrics | None = None) -> None:
        self.bookie = bookie
        self.metrics = metrics
        self._v3_tasks: set[asyncio.Task[None]] = set()

    def handle(self, request: AnyRequest, send: Send) -> None:
        if isinstance(request, AddRequest):
            self._add(request, send)
        elif not isinstance(request, ReadRequest):
            self._v3(request, send)
        elif self.metrics is None:
            self._read(request, send)
        else:
            self._read(request, self._measured_read(send, self.metrics))

    def handle_buffer(self, buf: bytes, pos: int, end: int, send: Send,
                      runs: RunSender | None = None) -> None:
        """Every request of the whole frames in buf[pos:end] (length prefixes included), in
        order, each answered as `handle` answers it. Runs of a writer's plain adds are taken by
        the bookie's compiled add path (`Bookie.add_run`); the frame that ends a run takes
        `_frame`. All of this read's adds are answered in one run of responses, sent by the
        journal's writer on `runs.reply_socket` once they are durable (or by their journal
        callback through `send`)."""
        add_run = self.bookie.add_run
        acked: list[bytes] = []  # runs of EOK add responses
        count = size = 0
        started = time.perf_counter()
        while pos < end:
            pos, taken, taken_size, responses = add_run(buf, pos, end)
            if taken:
                acked.append(responses)
                count += taken
                size += taken_size
            if pos < end:
                (length,) = _HEADER.unpack_from(buf, pos)
                start, pos = pos + 4, pos + 4 + length
                added = self._frame(buf, start, pos, acked, send)
                if added >= 0:
                    count += 1
                    size += added
        if not count:
            return
        socket = runs.reply_socket if runs is not None else None
        if runs is None or socket is None:
            self.bookie.when_durable(self._answer(acked, count, size, started, send))
            return
        run = ReplyRun(socket, b"".join(acked))
        self.bookie.when_durable(self._answer(acked, count, size, started, send, run, runs), run)

    def _frame(self, buf: bytes, start: int, end: int, acked: list[bytes], send: Send) -> int:
        """One request body at buf[start:end]. An add without flags takes the bookie's
        unacked path: checked, cached and journalled as `handle` would, its EOK response
        appended to `acked` (answered by the caller's journal callback); returns its entry's
        size, or -1 when the request was answered (or will be) by `send`."""
        if end - start >= ADD_MIN_BODY and _HEADER.unpack_from(buf, start)[0] == PLAIN_ADD_HEADER:
            at = start + ADD_IDS_AT
            ledger_id, entry_id = ADD_IDS.unpack_from(buf, at)
            code = self.bookie.add_unacked(ledger_id, entry_id, buf[start + 4 : at], buf[at:end])
            if code == 0:
                acked.append(encode_add_response(code, ledger_id, entry_id))
                return end - at
            if code != DEFERRED:
                send(encode_add_response(code, ledger_id, entry_id))
                return -1
        self.handle(decode_request_at(buf, start, end), send)
        return -1

    def _answer(self, acked: list[bytes], count: int, size: int, started: float,
                send: Send, run: ReplyRun | None = None,
                runs: RunSender | None = None) -> Durable:
        """The journal callback of a read's adds: their responses in one frame run, EOK (what
        the journal's writer did not send of `run`), or EIO each when their group could not
        be written."""
        metrics = self.metrics

        def durable(error: BaseException | None) -> None:
            if error is None:
                if run is None:
                    send(b"".join(acked))
                elif runs is not None and run.sent < len(run.data):
                    runs.send_rest(run)
            else:
                send(b"".join(with_result(responses, ResultCode.EIO) for responses in acked))
            if metrics is not None:
                metrics.added_many(started, count, size, error is None)

        return durable

    def _v3(self, request: V3Request, send: Send) -> None:
        operation = request.header.operation
        if operation == ADD_ENTRY and request.HasField("addRequest"):
            self._add_v3(request, send)
            return
        if operation == READ_ENTRY and request.HasField("readRequest"):
            read = request.readRequest
            # proto2: an unset enum reads as its first value, so ask whether it was set
            fencing = read.HasField("flag") and read.flag == FENCE_LEDGER
            flags = FLAG_DO_FENCING if fencing else 0
            key = read.masterKey if read.HasField("masterKey") else None
            self._read(ReadRequest(read.ledgerId, read.entryId, key, flags), send,
                       lambda code, entry: send(encode_read_response_v3(request, code, entry)))
            return
        if operation == GET_BOOKIE_INFO:
            send(self._bookie_info(request))
            return
        if operation != GET_LIST_OF_ENTRIES_OF_LEDGER:
            send(encode_bad_request(request))
            return
        if request.header.version != VERSION_THREE:
            send(encode_list_entries_response(request, V3_EBADVERSION, None))
            return
        task = asyncio.ensure_future(self._list_entries(request, send))
        self._v3_tasks.add(task)
        task.add_done_callback(self._v3_tasks.discard)

    def _bookie_info(self, request: V3Request) -> bytes:
        """Total and free bytes of the file system holding the bookie's data (upstream sums
        its ledger directories' file systems; ours are one directory)."""
        if request.header.version != VERSION_THREE:
            return encode_bookie_info_response(request, V3_EBADVERSION)
        try:
            stat = os.statvfs(self.bookie.settings.data_dir)
        except OSError:
            log.exception("reading the data directory's disk space failed")
            return encode_bookie_info_response(request, V3_EIO)
        return encode_bookie_info_response(request, V3_EOK, stat.f_blocks * stat.f_frsize,
                                           stat.f_bavail * stat.f_frsize)

    async def _list_entries(self, request: V3Request, send: Send) -> None:
        ledger_id = request.getListOfEntriesOfLedgerRequest.ledgerId
        try:
            entries = await self.bookie.entries_of(ledger_id)
        except Exception:  # upstream answers EIO when the storage fails
            log.exception("listing the entries of ledger %d failed", ledger_id)
            send(encode_list_entries_response(request, V3_EIO, None))
            return
        if entries is None:
            send(encode_list_entries_response(request, V3_ENOLEDGER, None))
        else:
            send(encode_list_entries_response(request, V3_EOK, encode_availability(entries)))

    def _add_v3(self, request: V3Request, send: Send) -> None:
        """A V3 add: the same checks and durability as a V2 add (write flags such as
        DEFERRED_SYNC are accepted and every add is synced anyway)."""
        add = request.addRequest
        recovery = add.HasField("flag") and add.flag == RECOVERY_ADD  # unset reads as RECOVERY_ADD
        flags = FLAG_RECOVERY_ADD if recovery else 0
        self.bookie.add(AddRequest(add.ledgerId, add.entryId, add.masterKey, add.body, flags),
                        lambda code: send(encode_add_response_v3(request, code)))

    def _add(self, request: AddRequest, send: Send) -> None:
        lid, eid = request.ledger_id, request.entry_id
        metrics = self.metrics
        if metrics is None:
            self.bookie.add(
                request, lambda code: send(encode_add_response(code, lid, eid))
            )
            return
        started, size = time.perf_counter(), len(request.entry)

        def reply(code: int) -> None:
            metrics.added(started, code, size)
            send(encode_add_response(code, lid, eid))

        self.bookie.add(request, reply)

    @staticmethod
    def _measured_read(send: Send, metrics: BookieMetrics) -> Send:
        """`send`, recording the read's latency, result and entry size (in the response frame
        the status follows the length and the header; the entry follows the two ids)."""
        started = time.perf_counter()

        def read(frame: bytes) -> None:
            code = int.from_bytes(frame[8:12], "big", signed=True)
            metrics.was_read(started, code, len(frame) - _READ_RESPONSE_HEAD if code == 0 else 0)
            send(frame)

        return read

    def _read(self, request: ReadRequest, send: Send,
              answer: Callable[[int, bytes], None] | None = None) -> None:
        """A read, answered with V2's frame through `send`, or through `answer(code, entry)`
        (a V3 read)."""
        lid, eid = request.ledger_id, request.entry_id
        if not request.fencing:
            code, entry = self.bookie.read(lid, eid)
            if answer is None:
                send(encode_response(OpCode.READ_ENTRY, code, lid, eid, entry))
            else:
                answer(code, entry)
            return
        reply = answer or (lambda code, entry: send(
            encode_response(OpCode.READ_ENTRY, code, lid, eid, entry)))
        if request.master_key is None:
            reply(ResultCode.EUA, b"")
            return

        def fenced(code: int) -> None:
            # Fenced durably: now answer the read itself (upstream replies EIO when the fence
            # could not be made durable).
            entry = b""
            if code == ResultCode.EOK:
                code, entry = self.bookie.read(lid, eid)
            reply(code, entry)

        self.bookie.fence(lid, request.master_key, fenced)


class Connection(asyncio.Protocol):
    def __init__(self, handler: RequestHandler, max_frame: int = MAX_FRAME_SIZE,
                 bounds: ConnectionBounds | None = None) -> None:
        self.handler = handler
        self.reader = FrameReader(max_frame)
        self.transport: asyncio.Transport | None = None
        self._out: list[bytes] = []
        self.bounds = bounds
        self.peer: object = None
        self.reads = 0  # for the bounds' sweeper: progress, counted not timed
        self.frames = 0
        self.reply_socket: ReplySocket | None = None  # shared with the journal's writer
        self._reading_paused = False

    @property
    def partial(self) -> bool:
        return self.reader.partial

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        self.peer = transport.get_extra_info("peername")
        if self.bounds is not None and not self.bounds.admit(self, self.peer):
            self.transport.abort()
            self.transport = None
            return
        sock = transport.get_extra_info("socket")
        if sock is None:
            return
        try:
            self.reply_socket = ReplySocket(sock.fileno())
        except OSError as exc:  # no descriptor to spare: the loop sends this connection's runs
            log.warning("responses from the event loop only for %s: %s", self.peer, exc)
            return
        # Told of every byte the transport holds and of when it has written them all: the
        # journal's writer sends only while it holds none (`ReplySocket`).
        self.transport.set_write_buffer_limits(high=0, low=0)

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        self._close_reply_socket()
        if self.bounds is not None:
            self.bounds.leave(self)

    def _close_reply_socket(self) -> None:
        if self.reply_socket is not None:
            self.reply_socket.close()

    def cut(self, reason: str) -> None:
        """Close a stalled connection (`ConnectionBounds` logged why)."""
        del reason
        self._close_reply_socket()
        if self.transport is not None:
            self.transport.abort()
            self.transport = None

    def pause_writing(self) -> None:
        """The transport holds unsent bytes (a high-water mark of 0); past WRITE_BACKLOG the
        connection stops reading until they are written."""
        self._check_backlog()

    def resume_writing(self) -> None:
        """The transport has written everything it held."""
        if self.reply_socket is not None:
            self.reply_socket.drained()
        if self._reading_paused and self.transport is not None:
            self._reading_paused = False
            self.transport.resume_reading()

    def _check_backlog(self) -> None:
        transport = self.transport
        if (transport is not None and not self._reading_paused
                and transport.get_write_buffer_size() > WRITE_BACKLOG):
            self._reading_paused = True
            transport.pause_reading()

    def send(self, frame: bytes) -> None:
        """Queue a response; all responses of one loop iteration leave in one write."""
        if not self._out:
            asyncio.get_running_loop().call_soon(self._flush)
        self._out.append(frame)

    def send_rest(self, run: ReplyRun) -> None:
        """What the journal's writer did not send of a synced run of add responses, then the
        responses held while it had sent part of it."""
        transport = self.transport
        if transport is None or self.reply_socket is None:
            return
        self.reply_socket.send_rest(transport, run)
        self._check_backlog()
        if self._out:
            self._flush()

    def _flush(self) -> None:
        transport = self.transport
        if transport is None or transport.is_closing():
            self._out = []
            return
        if self.reply_socket is None:
            transport.writelines(self._out)  # one writev under uvloop, no joined copy
        elif not self.reply_socket.write(transport, self._out):
            return  # a run of the writer's is half sent: these follow it (`send_rest`)
        self._out = []
        self._check_backlog()

    def data_received(self, data: bytes) -> None:
        self.reads += 1
        try:
            buf, pos, end = self.reader.whole(data)
            if end > pos:
                self.frames += 1  # a read that completed frames: progress
            self.handler.handle_buffer(buf, pos, end, self.send, self)
        except MalformedFrame as exc:
            self._abort(f"malformed frame: {exc}")
        except Exception as exc:  # a bug or a closing bookie: lose this connection only
            log.exception("request failed")
            self._abort(f"request failed: {exc}")

    def _abort(self, reason: str) -> None:
        peer = self.transport.get_extra_info("peername") if self.transport else None
        log.warning("closing connection from %s: %s", peer, reason)
        self._close_reply_socket()
        if self.transport is not None:
            self.transport.abort()
            self.transport = None


async def serve(bookie: Bookie, host: str, port: int, metrics: BookieMetrics | None = None,
                *, max_frame: int = MAX_FRAME_SIZE,
                limits: ConnectionLimits | None = None) -> asyncio.Server:
    handler = RequestHandler(bookie, metrics)
    bounds = ConnectionBounds(limits) if limits is not None else None
    loop = asyncio.get_running_loop()
    return await loop.create_server(lambda: Connection(handler, max_frame, bounds), host, port,
                                    reuse_address=True)
