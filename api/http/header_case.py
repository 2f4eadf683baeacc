"""Response header names in the case the app gave them, as upstream's Jetty sends them.

uvicorn writes every header name in lower case. HTTP names are case-insensitive, but some
clients look a header up by its exact name (Pulsar's Java admin client 4.x reads
`X-Pulsar-PROPERTY` so). `keep_case(names)` registers the names to send as given (custom
`X-` names only; a route registers the ones it sends), and `CaseRestoringTransport` puts them
back in each response's header block as it is written: one substring test per response when
it has no `x-` header, a replace per registered name present otherwise.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

_CANONICAL: dict[bytes, bytes] = {}  # b"\r\nx-pulsar-property: " -> b"\r\nX-Pulsar-PROPERTY: "
_MARK = b"\r\nx-"


def keep_case(names: Iterable[bytes]) -> None:
    """Send these `X-` header names with their case as given."""
    for name in names:
        if name[:2] in (b"X-", b"x-") and name != name.lower():
            lower = b"\r\n" + name.lower() + b": "
            if lower not in _CANONICAL:
                _CANONICAL[lower] = b"\r\n" + name + b": "


def restore(head: bytes) -> bytes:
    """A response's status line and headers with the registered names' case restored."""
    if _MARK not in head:
        return head
    for lower, name in _CANONICAL.items():
        if lower in head:
            head = head.replace(lower, name)
    return head


class CaseRestoringTransport:
    """A transport whose writes of a response head go through `restore`; everything else is
    the wrapped transport's."""

    def __init__(self, transport: asyncio.Transport) -> None:
        self._transport = transport
        self._write = transport.write
        # What uvicorn calls on every request, bound once (not looked up through __getattr__).
        self.is_closing = transport.is_closing
        self.get_extra_info = transport.get_extra_info
        self.close = transport.close

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if _CANONICAL and isinstance(data, bytes) and data.startswith(b"HTTP/"):
            data = restore(data)
        self._write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)
