"""Every request ends within the metadata-store timeout: 503 `{"reason": ...}` otherwise.

A plain ASGI middleware (not BaseHTTPMiddleware, which costs a task per request)."""

from __future__ import annotations

import asyncio

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from metastore.codec import dump_json

# Streams that last as long as the client listens (they bound their own writes instead).
UNBOUNDED_PATHS = frozenset({"/admin/v2/watch"})
# The REST producer: once its adds are in flight, their outcome is the answer (each add is
# bounded by the bookie client's timeout and the ensemble changes after it); a 503 cut in
# between would hide messages that were stored, and a retry would store them twice.
PRODUCE_PATHS = "/topics/"  # the REST producer's paths start so (also in api.http.request_rules)


class RequestDeadline:
    def __init__(self, app: ASGIApp, seconds: float) -> None:
        self.app = app
        self.seconds = seconds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if (scope["type"] != "http" or path in UNBOUNDED_PATHS
                or path.startswith(PRODUCE_PATHS)):
            await self.app(scope, receive, send)
            return
        started = False

        async def tracking_send(message: Message) -> None:
            nonlocal started
            started = True
            await send(message)

        try:
            async with asyncio.timeout(self.seconds):  # no extra task per request
                await self.app(scope, receive, tracking_send)
        except TimeoutError:
            if started:
                raise
            await send_timed_out(send, self.seconds)


async def send_timed_out(send: Send, seconds: float) -> None:
    await send_unavailable(send, f"Request timed out after {seconds:g}s")


async def send_unavailable(send: Send, reason: str) -> None:
    await send_response(send, 503, dump_json({"reason": reason}))


async def send_response(send: Send, status: int, body: bytes = b"", *,
                        close: bool = False) -> None:
    """A whole response from a plain ASGI layer; a body is JSON. `close`: the connection
    ends after it (`Connection: close`)."""
    headers = []
    if body:
        headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    if close:
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
