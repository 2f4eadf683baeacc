"""A `text/event-stream` response (Server-Sent Events) that never stalls the server.

Unlike a plain streaming response it bounds every write (`send_timeout`: a client that stops
reading is dropped instead of holding its task forever) and ends the stream as soon as the
client disconnects (the frames' generator is closed, so whatever feeds it stops too)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

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
        streaming = asyncio.create_task(self._stream(send), name="event stream")
        listening = asyncio.create_task(_disconnected(receive), name="event stream client")
        try:
            await asyncio.wait({streaming, listening}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (streaming, listening):
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, TimeoutError, OSError):
                    await task

    async def _stream(self, send: Send) -> None:
        await send(
            {"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers}
        )
        try:
            async for chunk in self.frames:
                async with asyncio.timeout(self.send_timeout):
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            aclose = getattr(self.frames, "aclose", None)
            if aclose is not None:
                await aclose()


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
