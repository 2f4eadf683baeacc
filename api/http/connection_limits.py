"""Bounds on the admin port's connections, as upstream's Jetty bounds its own: at most
`maxHttpServerConnections` open at once (Pulsar's key; 0: no limit), and a connection that
stalls is closed: one that sends nothing for `httpServerIdleTimeoutSeconds` (Jetty's idle
timeout, 30 s), one whose request headers are not complete `httpServerHeaderTimeoutSeconds`
after their first byte, one whose request body is not complete `httpServerBodyTimeoutSeconds`
after its headers. Between requests uvicorn's keep-alive timer applies the idle timeout.

`http_protocol(limits, base)` is uvicorn's httptools protocol (or the TLS listener's) with
these bounds (and the header names of `api.http.header_case`, the access line of
`api.log_lines.AccessLog`); the handler of the request in
progress is never cut by them (the request deadline bounds it). Each cut is logged once: the
first of a kind at once, with its peer, and the others of that kind as one count per
`CutLog.WINDOW` seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import struct
import time
from typing import Any, ClassVar, cast

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from api.http.header_case import CaseRestoringTransport
from api.log_lines import AccessLog
from api.settings import ConnectionLimits

log = logging.getLogger(__name__)


# The ASGI scope extension that closes the request's connection at once (a stream whose client
# stopped reading: a graceful close would wait for the client to read what is buffered).
ABORT_EXTENSION = "connection.abort"

SETTING = {
    "idle": "httpServerIdleTimeoutSeconds",
    "header": "httpServerHeaderTimeoutSeconds",
    "body": "httpServerBodyTimeoutSeconds",
    "limit": "maxHttpServerConnections",
}


class CutLog:
    """One line for the first cut of each kind, then one count per window."""

    WINDOW = 10.0

    def __init__(self, name: str) -> None:
        self.name = name
        self._since: dict[str, float] = {}
        self._counts: dict[str, int] = {}

    def note(self, kind: str, peer: Any, detail: str) -> None:
        now = time.monotonic()
        since = self._since.get(kind)
        if since is None or now - since >= self.WINDOW:
            more = self._counts.pop(kind, 0)
            tail = f" ({more} more since the last line)" if more else ""
            log.warning("%s: closed the connection of %s: %s%s", self.name, _peer(peer),
                        detail, tail)
            self._since[kind] = now
        else:
            self._counts[kind] = self._counts.get(kind, 0) + 1


def drop(transport: asyncio.Transport) -> None:
    """Close a connection at once with a reset: data it buffered for a client that does not
    read is discarded, in the process and in the kernel (a plain close would queue the end
    behind it, keeping the connection open as long as the client does not read)."""
    sock = transport.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()


def _peer(peer: Any) -> str:
    if isinstance(peer, tuple) and len(peer) >= 2:
        return f"{peer[0]}:{peer[1]}"
    return str(peer)


class GuardedHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with `limits` (set on the subclass `http_protocol`
    makes)."""

    limits: ClassVar[ConnectionLimits] = ConnectionLimits()
    cuts: ClassVar[CutLog] = CutLog("admin port")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.access_logger = cast(logging.Logger, AccessLog(self.access_logger))

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        # One timer per connection, re-armed only when it fires early: a request moves the
        # bound (`_bound_kind`, `_bound_at`) without a loop call; the timer, when it fires,
        # cuts the connection if the bound in force has passed, else waits for the rest.
        self._guard: asyncio.TimerHandle | None = None
        self._guard_at = 0.0
        self._bound_kind: str | None = None
        self._bound_at = 0.0
        super().connection_made(transport)
        self.transport = cast(asyncio.Transport, CaseRestoringTransport(transport))
        most = self.limits.max_connections
        if most > 0 and len(self.connections) > most:
            self.cuts.note("limit", self.client,
                           f"{most} connections open (maxHttpServerConnections)")
            drop(transport)
            return
        self._arm("idle", self.limits.idle_timeout)

    def connection_lost(self, exc: Exception | None) -> None:
        self._bound_kind = None
        guard = getattr(self, "_guard", None)
        if guard is not None:
            guard.cancel()
            self._guard = None
        super().connection_lost(exc)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._arm("header", self.limits.header_timeout)

    def on_headers_complete(self) -> None:
        super().on_headers_complete()
        scope: dict[str, Any] = self.scope  # type: ignore[assignment]
        transport = self.transport
        scope["extensions"] = {**scope.get("extensions", {}),
                               ABORT_EXTENSION: lambda: drop(transport)}
        self._arm("body", self.limits.body_timeout)

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._disarm()  # the handler runs; the response's end re-arms the keep-alive timer

    def _arm(self, kind: str, seconds: float) -> None:
        if seconds <= 0:
            self._bound_kind = None
            return
        self._bound_kind = kind
        self._bound_at = self.loop.time() + seconds
        if self._guard is None or self._guard_at > self._bound_at:  # none, or too late
            self._start_guard()

    def _start_guard(self) -> None:
        if self._guard is not None:
            self._guard.cancel()
        self._guard_at = self._bound_at
        self._guard = self.loop.call_at(self._bound_at, self._expire)

    def _disarm(self) -> None:
        self._bound_kind = None

    def _expire(self) -> None:
        self._guard = None
        kind = self._bound_kind
        if kind is None:
            return
        if self._bound_at > self.loop.time():  # moved by a later request: wait for the rest
            self._start_guard()
            return
        self._bound_kind = None
        self._cut(kind, {"idle": self.limits.idle_timeout, "header": self.limits.header_timeout,
                         "body": self.limits.body_timeout}[kind])

    def _cut(self, kind: str, seconds: float) -> None:
        if self.transport.is_closing():
            return
        what = {"idle": "nothing received", "header": "request headers not complete",
                "body": "request body not complete"}[kind]
        self.cuts.note(kind, self.client, f"{what} after {seconds:g} s ({SETTING[kind]})")
        drop(self.transport)


def http_protocol(limits: ConnectionLimits,
                  base: type[HttpToolsProtocol] = HttpToolsProtocol) -> type[HttpToolsProtocol]:
    """`base` (uvicorn's httptools protocol or a subclass) bounded by `limits`."""
    bases = (GuardedHttpProtocol,) if base is HttpToolsProtocol else (
        GuardedHttpProtocol, base)
    return type(f"Guarded{base.__name__}", bases, {"limits": limits,
                                                    "cuts": CutLog("admin port")})
