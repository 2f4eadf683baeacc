"""Bounds on the bookie port's connections (the settings are ours; BookKeeper's Netty server
has no such keys): at most `maxServerConnections` open at once (0: no limit), and a stalled
connection is closed: one that sends nothing for `serverIdleTimeoutSeconds`, or holds a frame
it does not complete for `serverFrameTimeoutSeconds` (half a frame sent, the rest never, or a
byte at a time). A connection that keeps completing frames is never cut, however large they
are.

One sweeper per server looks at every connection every `interval` seconds; the per-read cost
on a connection is two counter updates, so the add path pays nothing measurable. Each cut is
logged once: the first of a kind with its peer, the others of that kind as one count per
`WINDOW` seconds.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Protocol

log = logging.getLogger(__name__)

WINDOW = 10.0


@dataclass(frozen=True)
class ConnectionLimits:
    max_connections: int = 1024  # maxServerConnections; <= 0: no limit
    idle_timeout: float = 300.0  # serverIdleTimeoutSeconds; <= 0: never
    frame_timeout: float = 30.0  # serverFrameTimeoutSeconds; <= 0: never

    @property
    def interval(self) -> float:
        timeouts = [t for t in (self.idle_timeout, self.frame_timeout) if t > 0]
        return min(1.0, max(0.05, min(timeouts) / 4)) if timeouts else 0.0


class Bounded(Protocol):
    """What the sweeper reads of a connection."""

    reads: int  # data_received calls so far
    frames: int  # whole frames received so far

    @property
    def partial(self) -> bool:
        """A frame is begun and not complete."""

    def cut(self, reason: str) -> None:
        """Close the connection now."""


@dataclass
class _Seen:
    reads: int
    frames: int
    quiet_since: float  # last time `reads` moved
    stuck_since: float | None  # since when the same frame has been incomplete


class ConnectionBounds:
    def __init__(self, limits: ConnectionLimits) -> None:
        self.limits = limits
        self._open: dict[Bounded, _Seen] = {}
        self._sweeper: asyncio.Task[None] | None = None
        self._logged: dict[str, float] = {}
        self._unlogged: dict[str, int] = {}

    def admit(self, connection: Bounded, peer: object) -> bool:
        """Register a new connection; False (after logging) when over the limit."""
        most = self.limits.max_connections
        if most > 0 and len(self._open) >= most:
            self._note("limit", peer, f"{most} connections open (maxServerConnections)")
            return False
        self._open[connection] = _Seen(connection.reads, connection.frames, time.monotonic(),
                                       None)
        if self._sweeper is None and self.limits.interval > 0:
            self._sweeper = asyncio.get_running_loop().create_task(self._sweep())
        return True

    def leave(self, connection: Bounded) -> None:
        self._open.pop(connection, None)

    async def _sweep(self) -> None:
        limits = self.limits
        while True:
            await asyncio.sleep(limits.interval)
            now = time.monotonic()
            for connection, seen in list(self._open.items()):
                reason = self._stalled(connection, seen, now)
                if reason is not None:
                    self._open.pop(connection, None)
                    connection.cut(reason)

    def _stalled(self, connection: Bounded, seen: _Seen, now: float) -> str | None:
        limits = self.limits
        if connection.reads != seen.reads:
            seen.reads, seen.quiet_since = connection.reads, now
        elif limits.idle_timeout > 0 and now - seen.quiet_since >= limits.idle_timeout:
            return self._cut_text("idle", connection,
                                  f"nothing received for {limits.idle_timeout:g} s "
                                  f"(serverIdleTimeoutSeconds)")
        if not connection.partial or connection.frames != seen.frames:
            seen.frames = connection.frames
            seen.stuck_since = now if connection.partial else None
        elif seen.stuck_since is None:
            seen.stuck_since = now
        elif limits.frame_timeout > 0 and now - seen.stuck_since >= limits.frame_timeout:
            return self._cut_text("frame", connection,
                                  f"a frame not completed in {limits.frame_timeout:g} s "
                                  f"(serverFrameTimeoutSeconds)")
        return None

    def _cut_text(self, kind: str, connection: Bounded, detail: str) -> str:
        self._note(kind, getattr(connection, "peer", None), detail)
        return detail

    def _note(self, kind: str, peer: object, detail: str) -> None:
        now = time.monotonic()
        since = self._logged.get(kind)
        if since is None or now - since >= WINDOW:
            more = self._unlogged.pop(kind, 0)
            tail = f" ({more} more since the last line)" if more else ""
            log.warning("closed the connection of %s: %s%s", peer, detail, tail)
            self._logged[kind] = now
        else:
            self._unlogged[kind] = self._unlogged.get(kind, 0) + 1

    def close(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
