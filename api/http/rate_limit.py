"""An optional limit on write requests per client (`httpWriteRequestsPerClientLimitEnabled`).

Pulsar's `httpRequestsLimitEnabled` / `httpRequestsMaxPerSecond` put one rate limiter in front
of every request of every client together (Jetty's `RateLimitingFilter`, 429 above it). This
service's limit is narrower and per client: only writes (PUT, POST, DELETE, PATCH) count, at
most `httpWriteRequestsPerClientMaxPerSecond` of them per second from one client, where a
client is its authenticated role when the request carries a valid token, else its address.
Reads are never limited. Above the limit the answer is 429 with `Retry-After` (whole seconds
until the next write would be admitted) and Pulsar's `{"reason": ...}`.

It is a plain ASGI layer in front of the rack-write fast path and the app, so both are
covered. Each client has a token bucket holding up to one second's worth of writes,
refilled continuously.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send

from api.auth.authentication import AuthenticationFailed
from api.change_history import WRITE_METHODS, client_address
from metastore.codec import dump_json

MAX_TRACKED_CLIENTS = 10_000  # idle clients' buckets are dropped beyond this


@dataclass
class _Bucket:
    tokens: float
    updated: float


class WriteRateLimiter:
    """Token buckets by client: `allow(client)` is 0 when a write may go now, else the
    seconds until it may."""

    def __init__(self, per_second: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.per_second = per_second
        self.capacity = max(per_second, 1.0)
        self.clock = clock
        self._buckets: dict[str, _Bucket] = {}

    def allow(self, client: str) -> float:
        now = self.clock()
        bucket = self._buckets.get(client)
        if bucket is None:
            if len(self._buckets) >= MAX_TRACKED_CLIENTS:
                self._forget_idle(now)
            bucket = self._buckets[client] = _Bucket(self.capacity, now)
        else:
            elapsed = now - bucket.updated
            bucket.tokens = min(self.capacity, bucket.tokens + elapsed * self.per_second)
            bucket.updated = now
        if bucket.tokens >= 1.0:
            bucket.tokens -= 1.0
            return 0.0
        return (1.0 - bucket.tokens) / self.per_second

    def _forget_idle(self, now: float) -> None:
        """Drop the buckets that have refilled (their clients are idle); all if none has."""
        full = [key for key, b in self._buckets.items()
                if b.tokens + (now - b.updated) * self.per_second >= self.capacity]  # fmt: skip
        for key in full or list(self._buckets):
            del self._buckets[key]


class WriteRateLimit:
    """The ASGI layer: asks `WriteRateLimiter` for every write request, by role or address.
    `app_state` gives the running app's state (its `guard` authenticates, as `authorize`)."""

    def __init__(
        self, app: ASGIApp, per_second: float, app_state: Callable[[], Any]
    ) -> None:
        self.app = app
        self.limiter = WriteRateLimiter(per_second)
        self.app_state = app_state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in WRITE_METHODS:
            await self.app(scope, receive, send)
            return
        client = self._client_of(scope)
        wait = self.limiter.allow(client)
        if wait <= 0:
            await self.app(scope, receive, send)
            return
        body = dump_json({"reason": (
            f"Too many write requests: this client is limited to "
            f"{self.limiter.per_second:g} per second (httpWriteRequestsPerClientMaxPerSecond)"
        )})  # fmt: skip
        await send({"type": "http.response.start", "status": 429, "headers": [
            (b"content-type", b"application/json"),
            (b"content-length", b"%d" % len(body)),
            (b"retry-after", b"%d" % max(1, math.ceil(wait))),
        ]})  # fmt: skip
        await send({"type": "http.response.body", "body": body})

    def _client_of(self, scope: Scope) -> str:
        """`role:<role>` for a request with a valid token, else `address:<ip>`."""
        state = self.app_state()
        authenticator = None if state is None else state.guard.authenticator
        if authenticator is not None:
            headers = {name.decode("latin-1").lower(): value.decode("latin-1")
                       for name, value in scope["headers"] if name == b"authorization"}  # fmt: skip
            try:
                return "role:" + authenticator.authenticate(headers)
            except AuthenticationFailed:
                pass
        return f"address:{client_address(scope)}"
