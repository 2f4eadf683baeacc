"""A `text/event-stream` response (Server-Sent Events) that never stalls the server.

Unlike a plain streaming response it bounds every write (`send_timeout`: a client that stops
reading is dropped instead of holding its task forever: its connection is closed at once
through the `connection.abort` scope extension, so what was buffered for it goes too) and ends
the stream as soon as the client disconnects (the frames' generator is closed, so whatever
feeds it stops too)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from api.http.connection_limits import ABORT_EXTENSION

log = logging.getLogger(__name__)

EVENT_STREAM = "text/event-stream"


class EventStreamResponse(Response):
    media_type = EVENT_STREAM

    def __init__(self, frames: AsyncIterator[bytes], *, send_timeout: float) -> None:
        super().__init__(
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
            media_type=EVENT_STREAM,
        )
        self.raw_headers = [(k, v) for k, v in self.raw_headers if k != b"content-length"]
        self.frames = frames
        self.send_timeout = send_timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        streaming = asyncio.create_task(self._stream(scope, send), name="event stream")
        listening = asyncio.create_task(_disconnected(receive), name="event stream client")
        try:
            await asyncio.wait({streaming, listening}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (streaming, listening):
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, TimeoutError, OSError):
                    await task

    async def _stream(self, scope: Scope, send: Send) -> None:
        await send(
            {"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers}
        )
        try:
            async for chunk in self.frames:
                try:
                    async with asyncio.timeout(self.send_timeout):
                        await send({"type": "http.response.body", "body": chunk,
                                    "more_body": True})
                except TimeoutError:
                    _drop(scope, self.send_timeout)
                    raise
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            aclose = getattr(self.frames, "aclose", None)
            if aclose is not None:
                await aclose()


def _drop(scope: Scope, seconds: float) -> None:
    """Close the connection of a client that did not read for `seconds`."""
    client = scope.get("client")
    peer = f"{client[0]}:{client[1]}" if client else "a client"
    log.warning("event stream: dropped %s, which read nothing for %g s", peer, seconds)
    abort = scope.get("extensions", {}).get(ABORT_EXTENSION)
    if callable(abort):
        abort()


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
