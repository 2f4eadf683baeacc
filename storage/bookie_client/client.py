"""BookieClient: one asyncio connection to one bookie, pipelined, with typed errors.

V2 frames carry no request id: a response repeats the request's (opcode, ledgerId, entryId),
and a bookie answers requests with the same triple in order, so pending requests are matched by
that key first-in first-out, as BookKeeper's `PerChannelBookieClient` does for V2. A request
that times out stays queued (cancelled) until its late answer arrives and is dropped, so a
late answer never completes a newer request.

A ledger writer's adds take another way (`send_add`): the writer registers a listener for
its ledger (`listen_adds`) and sends its frames with no future, task or callback per request;
each read's add answers for that ledger go to the listener's ring of acknowledgement counters
in one compiled pass (`addacks.route_responses`), and the writer keeps their deadlines. An
add answer whose key an `add` call awaits still goes to that call.

V3 requests (GET_LIST_OF_ENTRIES_OF_LEDGER) go over the same connection and are matched by
their header's txnId; a V3 response is told apart by its first byte (`protocol_v3`).
"""

from __future__ import annotations

import asyncio
import itertools
from collections import deque
from collections.abc import Callable
from typing import cast

from storage.bookie.availability import EntryAvailability, decode_availability
from storage.bookie.errors import (
    BadRequest,
    BadVersion,
    BookieTimeout,
    ConnectionLost,
    CorruptEntry,
    Fenced,
    IOFailure,
    MalformedFrame,
    NoEntry,
    NoLedger,
    ReadOnly,
    ResponseError,
    TooManyRequests,
    Unauthorized,
    UnknownLedgerState,
)
from storage.bookie.format import verify_entry
from storage.bookie.protocol import (
    FLAG_DO_FENCING,
    FLAG_HIGH_PRIORITY,
    FLAG_RECOVERY_ADD,
    MAX_FRAME_SIZE,
    RESPONSE_HEAD_LEN,
    FrameReader,
    OpCode,
    Response,
    ResultCode,
    decode_response_head,
    encode_add,
    encode_read,
)
from storage.bookie.protocol_v3 import (
    V2_CODE_OF_STATUS,
    V3Response,
    decode_v3_response,
    encode_bookie_info_request,
    encode_list_entries_request,
    is_v3,
    response_status,
)
from storage.bookie_client.addacks import AckListener, route_responses

_ERRORS: dict[int, type[ResponseError]] = {
    ResultCode.ENOLEDGER: NoLedger,
    ResultCode.ENOENTRY: NoEntry,
    ResultCode.EBADREQ: BadRequest,
    ResultCode.EIO: IOFailure,
    ResultCode.EUA: Unauthorized,
    ResultCode.EBADVERSION: BadVersion,
    ResultCode.EFENCED: Fenced,
    ResultCode.EREADONLY: ReadOnly,
    ResultCode.ETOOMANYREQUESTS: TooManyRequests,
    ResultCode.EUNKNOWNLEDGERSTATE: UnknownLedgerState,
}

Key = tuple[int, int, int]

Pending = asyncio.Future[Response]


def _add_request(
    ledger_id: int, entry_id: int, master_key: bytes, packaged: bytes, recovery: bool
) -> bytes:
    """An add frame; a recovery add (re-replicating an entry) is flagged
    `RECOVERY_ADD | HIGH_PRIORITY`."""
    flags = FLAG_RECOVERY_ADD | FLAG_HIGH_PRIORITY if recovery else 0
    return encode_add(ledger_id, entry_id, master_key, packaged, flags)


def response_error(response: Response) -> ResponseError:
    """The typed error for a non-OK response."""
    return error_for(response.code, response.ledger_id, response.entry_id)


def error_for(code: int, ledger_id: int, entry_id: int) -> ResponseError:
    return _ERRORS.get(code, ResponseError)(code, ledger_id, entry_id)


class _Channel(asyncio.Protocol):
    def __init__(self, client: BookieClient) -> None:
        self.client = client
        self.reader = FrameReader(client.max_frame)

    def data_received(self, data: bytes) -> None:
        try:
            buf, start, end = self.reader.whole(data)
            if end > start:
                self.client._on_frames(buf, start, end)
        except MalformedFrame as exc:
            self.client._on_lost(ConnectionLost(f"bad frame from bookie: {exc}"))

    def connection_lost(self, exc: Exception | None) -> None:
        self.client._on_lost(ConnectionLost(f"connection to bookie lost: {exc}"))


class BookieClient:
    def __init__(self, host: str, port: int, *, timeout: float = 10.0,
                 max_frame: int = MAX_FRAME_SIZE) -> None:
        self.host = host
        self.port = port
        self.timeout = timeout
        self.max_frame = max_frame  # nettyMaxFrameSizeBytes, for the answers it reads
        self._transport: asyncio.Transport | None = None
        # The requests awaiting an answer by key: one request, or a deque of them in send
        # order when one key is asked again before its answer (no deque per add).
        self._pending: dict[Key, Pending | deque[Pending]] = {}
        self._lost: ConnectionLost | None = None
        self._out: list[bytes] = []
        # Every request has the same timeout, so send order is deadline order: one sweeper
        # timer for all of them instead of a timer per request.
        self._deadlines: deque[tuple[float, Pending | asyncio.Future[V3Response]]] = deque()
        self._sweeper: asyncio.TimerHandle | None = None
        self._v3_pending: dict[int, asyncio.Future[V3Response]] = {}
        # Ledger id -> the writer's listener for the answers to `send_add` requests
        self._listeners: dict[int, AckListener] = {}
        self._txn_ids = itertools.count(1)

    @classmethod
    async def connect(cls, address: str, *, timeout: float = 10.0,
                      max_frame: int = MAX_FRAME_SIZE) -> BookieClient:
        """Connect to a bookie at `host:port` (its bookie id)."""
        host, _, port = address.rpartition(":")
        client = cls(host.strip("[]"), int(port), timeout=timeout, max_frame=max_frame)
        await client.open()
        return client

    async def open(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self.timeout):
                transport, _ = await loop.create_connection(
                    lambda: _Channel(self), self.host, self.port
                )
        except (OSError, TimeoutError) as exc:
            raise ConnectionLost(f"cannot connect to {self.host}:{self.port}: {exc}") from exc
        self._transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        self._lost = None

    @property
    def connected(self) -> bool:
        return self._transport is not None and self._lost is None

    @property
    def awaiting(self) -> int:
        """Requests sent whose answer or deadline this client still tracks (a gauge; adds
        sent with `send_add` are their writer's to track)."""
        return len(self._deadlines)

    async def close(self) -> None:
        if self._transport is not None:
            self._transport.close()
            self._transport = None
        self._on_lost(ConnectionLost("client closed"))

    async def __aenter__(self) -> BookieClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- requests -------------------------------------------------------------------------------

    async def add(
        self,
        ledger_id: int,
        entry_id: int,
        master_key: bytes,
        packaged: bytes,
        *,
        recovery: bool = False,
    ) -> None:
        """Store a packaged entry; returns once the bookie has it durably (its journal group
        was synced). Raises a ResponseError subclass (Fenced, ReadOnly, ...) otherwise."""
        frame = _add_request(ledger_id, entry_id, master_key, packaged, recovery)
        response = await self._call((OpCode.ADD_ENTRY, ledger_id, entry_id), frame)
        if response.code != ResultCode.EOK:
            raise response_error(response)

    def listen_adds(self, ledger_id: int, listener: AckListener) -> None:
        """Answers to the adds of `ledger_id` sent with `send_add` go to `listener` (its
        ring counts acknowledgements; `deliver` reports each read's errors to its callback,
        and `ConnectionLost` through `listener.callback` when this connection breaks)."""
        self._listeners[ledger_id] = listener

    def unlisten_adds(self, ledger_id: int, listener: AckListener) -> None:
        if self._listeners.get(ledger_id) is listener:
            del self._listeners[ledger_id]

    def send_add(self, frame: bytes) -> None:
        """Send an add request (`addacks.encode_add_frame`) whose answer goes to the listener
        of its ledger, not to a future: no object per request. Its deadline is the
        listener's owner's to keep. ConnectionLost when the connection is gone."""
        if self._lost is not None or self._transport is None:
            raise self._lost or ConnectionLost("not connected")
        if not self._out:
            asyncio.get_running_loop().call_soon(self._flush)
        self._out.append(frame)

    async def read(
        self,
        ledger_id: int,
        entry_id: int,
        *,
        fence: bool = False,
        master_key: bytes | None = None,
    ) -> bytes:
        """The packaged entry (entry -1: the bookie's last entry), digest-checked here too.
        `fence=True` fences the ledger first (needs the master key)."""
        flags = FLAG_DO_FENCING if fence else 0
        frame = encode_read(ledger_id, entry_id, master_key if fence else None, flags)
        response = await self._call((OpCode.READ_ENTRY, ledger_id, entry_id), frame)
        if response.code != ResultCode.EOK:
            raise response_error(response)
        verify_entry(response.entry, ledger_id, None if entry_id < 0 else entry_id)
        return response.entry

    async def fence(self, ledger_id: int, master_key: bytes) -> bytes | None:
        """Fence a ledger (a fencing read of its last entry); returns that entry, None if the
        bookie has no entry of it."""
        try:
            return await self.read(ledger_id, -1, fence=True, master_key=master_key)
        except NoEntry:
            return None

    async def _v3_call(self, frame: Callable[[int], bytes]) -> V3Response:
        """Send the V3 request `frame(txnId)` and wait for the response with that txnId."""
        if self._lost is not None or self._transport is None:
            raise self._lost or ConnectionLost("not connected")
        txn_id = next(self._txn_ids)
        future: asyncio.Future[V3Response] = asyncio.get_running_loop().create_future()
        self._v3_pending[txn_id] = future
        self._queue_frame(frame(txn_id), future)
        try:
            return await future
        finally:
            self._v3_pending.pop(txn_id, None)

    async def bookie_info(self) -> tuple[int, int]:
        """(total, free) bytes of the bookie's data file system (V3 GET_BOOKIE_INFO, as
        upstream's `BookieClient.getBookieInfo` asks for both). ResponseError for a status
        other than EOK."""
        response = await self._v3_call(encode_bookie_info_request)
        body = response.getBookieInfoResponse
        status = response_status(response, body)
        if status != 0:
            raise error_for(V2_CODE_OF_STATUS.get(status, status), -1, -1)
        return body.totalDiskCapacity, body.freeDiskSpace

    async def entries_of_ledger(self, ledger_id: int) -> EntryAvailability:
        """The entries of the ledger the bookie holds (V3 GET_LIST_OF_ENTRIES_OF_LEDGER).
        Raises NoLedger when the bookie does not know the ledger (ENOLEDGER), another
        ResponseError for another status, MalformedFrame for an answer that does not decode."""
        response = await self._v3_call(lambda txn_id: encode_list_entries_request(txn_id,
                                                                                 ledger_id))
        body = response.getListOfEntriesOfLedgerResponse
        status = response_status(response, body)
        if status != 0:
            raise error_for(V2_CODE_OF_STATUS.get(status, status), ledger_id, -1)
        try:
            return decode_availability(body.availabilityOfEntriesOfLedger)
        except ValueError as exc:
            raise MalformedFrame(f"entries of ledger {ledger_id} from "
                                 f"{self.host}:{self.port}: {exc}") from exc

    async def _call(self, key: Key, frame: bytes) -> Response:
        if self._lost is not None or self._transport is None:
            raise self._lost or ConnectionLost("not connected")
        future: asyncio.Future[Response] = asyncio.get_running_loop().create_future()
        self._queue(key, frame, future)
        return await future

    def _queue(self, key: Key, frame: bytes, pending: Pending) -> None:
        waiting = self._pending.get(key)
        if waiting is None:
            self._pending[key] = pending
        elif isinstance(waiting, deque):
            waiting.append(pending)
        else:
            self._pending[key] = deque((waiting, pending))
        self._queue_frame(frame, pending)

    def _queue_frame(self, frame: bytes, pending: Pending | asyncio.Future[V3Response]) -> None:
        """Send `frame` with the next write, `pending` failing at its deadline; a V3
        request goes straight here (matched by its txnId, not by a pending queue)."""
        loop = asyncio.get_running_loop()
        if not self._out:
            loop.call_soon(self._flush)  # requests of one loop iteration leave in one write
        self._out.append(frame)
        self._deadlines.append((loop.time() + self.timeout, pending))
        if self._sweeper is None:
            self._sweeper = loop.call_later(self._sweep_every, self._sweep)

    @property
    def _sweep_every(self) -> float:
        return min(self.timeout / 4, 0.5)

    def _flush(self) -> None:
        out, self._out = self._out, []
        if self._transport is not None:
            # uvloop hands the frames to one writev; joining them first would copy every
            # byte once more into a fresh buffer (MiBs when 64 KiB entries are copied)
            self._transport.writelines(out)

    def _sweep(self) -> None:
        """Fail requests past their deadline, leaving them queued so that a late answer is
        matched to them (and dropped) rather than to a newer request."""
        loop = asyncio.get_running_loop()
        now = loop.time()
        deadlines = self._deadlines
        while deadlines and (deadlines[0][1].done() or deadlines[0][0] <= now):
            _, future = deadlines.popleft()
            if not future.done():
                future.set_exception(
                    BookieTimeout(f"no answer from {self.host}:{self.port} in {self.timeout}s")
                )
        self._sweeper = loop.call_later(self._sweep_every, self._sweep) if deadlines else None

    def _on_frames(self, buf: bytes, start: int, end: int) -> None:
        """The response frames of one read (buf[start:end], whole frames): add answers of a
        ledger with a listener go to it in one compiled pass, each listener reached then
        delivers once; the other frames are answered here in order. Then the answered
        requests at the head of the deadline queue are dropped from it. Dropped here, a read's
        worth at a time, rather than by `_sweep`: a sweep that found half a second of answered
        adds (~9,000 per bookie at 18k ledger adds/s) stalled the event loop for several ms,
        every half second per bookie, and that was the ledger's p99 latency."""
        reached, others = route_responses(buf, start, end, self._listeners, self._pending)
        answer = self._on_response
        for body, stop in others:
            answer(buf, body, stop)
        for listener in reached:
            listener.deliver()
        deadlines = self._deadlines
        while deadlines and deadlines[0][1].done():
            deadlines.popleft()

    def _on_response(self, buf: bytes, start: int, end: int) -> None:
        """The response frame body at buf[start:end]: answer the oldest request it matches."""
        try:
            opcode, code, ledger_id, entry_id = decode_response_head(buf, start, end)
        except MalformedFrame:
            if end > start and is_v3(buf, start):
                self._on_v3_response(buf, start, end)
                return
            raise
        key = (opcode, ledger_id, entry_id)
        waiting = self._pending.get(key)
        if waiting is None:
            return  # an answer to nothing we asked: ignore
        if isinstance(waiting, deque):
            pending = waiting.popleft()
            if not waiting:
                del self._pending[key]
        else:
            pending = waiting
            del self._pending[key]
        if pending.done():
            return  # timed out meanwhile: this late answer is dropped
        entry = buf[start + RESPONSE_HEAD_LEN : end] if opcode == OpCode.READ_ENTRY else b""
        pending.set_result(Response(OpCode(opcode), code, ledger_id, entry_id, entry))

    def _on_v3_response(self, buf: bytes, start: int, end: int) -> None:
        response = decode_v3_response(buf, start, end)
        future = self._v3_pending.pop(response.header.txnId, None)
        if future is not None and not future.done():
            future.set_result(response)

    def _on_lost(self, error: ConnectionLost) -> None:
        if self._lost is None:
            self._lost = error
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
        self._deadlines.clear()
        pending, self._pending = self._pending, {}
        for waiting in pending.values():
            for future in waiting if isinstance(waiting, deque) else (waiting,):
                if not future.done():
                    future.set_exception(error)
        listeners, self._listeners = self._listeners, {}
        for listener in listeners.values():
            listener.callback(error)
        v3_pending, self._v3_pending = self._v3_pending, {}
        for v3_future in v3_pending.values():
            if not v3_future.done():
                v3_future.set_exception(error)
        if self._transport is not None:
            self._transport.abort()
            self._transport = None


__all__ = ["BookieClient", "CorruptEntry", "response_error"]
