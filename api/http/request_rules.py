"""One set of rules every request passes before anything routes it or touches etcd.

A plain ASGI layer outside the whole server (the rack-write fast path included), so no route
can forget a rule. A request that breaks one is answered at once with Pulsar's error shape
`{"reason": ...}` and never reaches a service, so it changes nothing:

- the URI: its path and query must percent-decode to UTF-8 (400), and the path is read as
  Pulsar's Jetty reads it (`jetty_path`: bad escapes, an escaped NUL, ambiguous path
  parameters and a climb above the root are 400; path parameters are dropped);
- the size: a body over `httpMaxRequestSize` bytes is 413, refused from its Content-Length
  before it is read, or as soon as a streamed body passes the limit (on the REST producer's
  paths the limit is at least `produce_body_limit(maxMessageSize)`, so that a message the
  broker accepts fits). So that the client reads that 413 instead of a reset, the rest of the
  body is read and discarded first, up to `DRAIN_BYTES` (a client that sent `Expect:
  100-continue` has sent none of it, so nothing is read), and the connection is closed after
  the answer;
- JSON bodies (a JSON content type): they must parse as strict JSON that Java's Jackson can
  hold: no NaN/Infinity, no number that overflows a double, no integer beyond a Java long,
  no text that does not encode as UTF-8 (a lone surrogate such as `"\\ud800"`), at most
  `MAX_JSON_DEPTH` levels of arrays and objects (400 for each);
- text bodies (the anti-affinity group, a bare string even when sent as application/json):
  valid UTF-8 (400).

Narrower rules (an int field is a Java `int`, a name matches Pulsar's pattern) are the
models' and services' business; the media type (415) is checked after routing, where the
route is known (`require_json_body`).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import unquote, unquote_to_bytes

import orjson
from fastapi import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.errors import UnsupportedMediaType
from api.http.deadline import PRODUCE_PATHS, send_response
from metastore import layer_times
from metastore.codec import dump_json

MAX_JSON_DEPTH = 64
DRAIN_BYTES = 256 * 1024 * 1024  # read and discarded past a body limit before the 413
JAVA_LONG_MIN, JAVA_LONG_MAX = -(2**63), 2**63 - 1
JAVA_INT_MIN, JAVA_INT_MAX = -(2**31), 2**31 - 1
# A run of 19 digits or more may be an integer beyond a Java long, which orjson reads as a
# float without saying so: such bodies are parsed again, integers checked one by one.
_LONG_DIGITS = re.compile(rb"\d{19,}")
_WITH_BODY = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_MAY_CONSUME = frozenset({"POST", "PUT", "PATCH"})  # methods whose body a resource reads


class RequestRejected(Exception):
    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


def is_json_media_type(content_type: str | None) -> bool:
    """`application/json` or a structured `application/...+json` type."""
    if not content_type:
        return False
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    )


def is_text_body_route(method: str, path: str) -> bool:
    """The anti-affinity group POST: a bare string body, not JSON (as Pulsar's client sends)."""
    return method == "POST" and path.startswith("/admin/") and path.endswith("/antiAffinity")


def check_uri(scope: Scope) -> None:
    raw_path = scope.get("raw_path") or scope["path"].encode("utf-8", "surrogatepass")
    for part, what in ((raw_path, "path"), (scope.get("query_string", b""), "query")):
        try:
            unquote_to_bytes(part).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise RequestRejected(400, f"Invalid URI: the {what} is not UTF-8") from exc


# What may need Jetty's reading of a path: an escape, a path parameter, a dot segment.
_SUSPECT = re.compile(rb"[%;]|(?:^|/)\.\.?(?:/|$)")
_BAD_ESCAPE = re.compile(rb"%(?![0-9A-Fa-f]{2})")


def jetty_path(scope: Scope) -> Scope:
    """The request's path as Pulsar's Jetty reads it before Jersey routes it, or 400:

    - a `%` not followed by two hex digits, or an escaped NUL (`%00`), is a bad URI;
    - path parameters (`;name=value` after a segment) are dropped from the routed path
      (`/admin/v2/clusters;x=1` lists the clusters); a `.` or `..` segment carrying them
      is ambiguous;
    - a `..` that would climb above the root is a bad URI (other dot segments are routed as
      they are, and match nothing).
    """
    raw: bytes | None = scope.get("raw_path")
    if not raw or not _SUSPECT.search(raw):
        return scope
    if _BAD_ESCAPE.search(raw):
        raise RequestRejected(400, "Invalid URI: a '%' in the path is not an escape")
    segments = raw.split(b"/")
    routed = []
    for segment in segments:
        name, parameters, _ = segment.partition(b";")
        if parameters and unquote_to_bytes(name) in (b".", b".."):
            raise RequestRejected(400, "Invalid URI: ambiguous path parameters")
        routed.append(name)
    depth = 0
    for segment in routed[1:]:
        decoded = unquote_to_bytes(segment)
        if b"\x00" in decoded:
            raise RequestRejected(400, "Invalid URI: an escaped NUL in the path")
        if decoded == b"..":
            depth -= 1
            if depth < 0:
                raise RequestRejected(400, "Invalid URI: the path climbs above the root")
        elif decoded != b".":
            depth += 1
    if b";" not in raw:
        return scope
    path = b"/".join(routed)
    return {**scope, "raw_path": path, "path": unquote(path.decode("latin-1"))}


def _reject_long_overflow(text: str) -> int:
    value = int(text)
    if not JAVA_LONG_MIN <= value <= JAVA_LONG_MAX:
        raise ValueError(f"Numeric value ({text}) out of range of a Java long")
    return value


def _reject_constant(name: str) -> Any:
    raise ValueError(f"Non-standard token '{name}': only finite numbers are accepted")


def parse_json_body(body: bytes) -> Any:
    """The body as JSON under the rules above; `RequestRejected` (400) when it breaks one."""
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise RequestRejected(400, f"Invalid JSON body: {_utf8_error(body) or exc}") from exc
    if _LONG_DIGITS.search(body):
        try:
            document = json.loads(
                body, parse_int=_reject_long_overflow, parse_constant=_reject_constant
            )
        except (ValueError, RecursionError) as exc:
            raise RequestRejected(400, f"Invalid JSON body: {exc}") from exc
    check_document(document)
    return document


def _utf8_error(body: bytes) -> str | None:
    """Jackson's words for bytes that are not UTF-8 (orjson's speak of surrogates)."""
    try:
        body.decode("utf-8")
    except UnicodeDecodeError as exc:
        byte = body[exc.start]
        kind = "middle" if byte & 0xC0 == 0x80 else "start"
        return f"Invalid UTF-8 {kind} byte 0x{byte:x} (at byte {exc.start})"
    return None


def check_document(document: Any, max_depth: int = MAX_JSON_DEPTH) -> None:
    """Depth, numbers and text of a parsed document (iteratively: no recursion limit)."""
    stack: list[tuple[Any, int]] = [(document, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict | list):
            if depth > max_depth:
                raise RequestRejected(
                    400, f"Invalid JSON body: nested deeper than {max_depth} levels"
                )
            items: Iterator[Any]
            if isinstance(value, dict):
                for key in value:
                    _check_text(key)
                items = iter(value.values())
            else:
                items = iter(value)
            stack.extend((item, depth + 1) for item in items)
        elif isinstance(value, str):
            _check_text(value)
        elif isinstance(value, float) and not math.isfinite(value):
            raise RequestRejected(400, "Invalid JSON body: only finite numbers are accepted")
        elif isinstance(value, int) and not JAVA_LONG_MIN <= value <= JAVA_LONG_MAX:
            raise RequestRejected(400, f"Invalid JSON body: {value} is out of range of a Java long")


def _check_text(text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise RequestRejected(400, "Invalid JSON body: text that is not valid UTF-8") from exc


def check_body(method: str, path: str, content_type: str | None, body: bytes) -> None:
    if not body:
        return
    if is_text_body_route(method, path):
        try:
            body.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise RequestRejected(400, "Invalid body: not UTF-8 text") from exc
        return
    if is_json_media_type(content_type):
        parse_json_body(body)


def header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope["headers"]:
        if key == name:
            return bytes(value).decode("latin-1")
    return None


def produce_body_limit(max_message_size: int) -> int:
    """A REST produce body that holds one message of `max_message_size` bytes, with room
    for JSON escapes in up to half of it and the request's other fields."""
    return 2 * max_message_size + 64 * 1024


def too_large(limit: int) -> RequestRejected:
    return RequestRejected(413, f"Request body exceeds httpMaxRequestSize ({limit} bytes)")


async def drain(receive: Receive, most: int) -> None:
    """Read and discard what is left of the request body, up to `most` bytes."""
    drained = 0
    while drained <= most:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
        drained += len(message.get("body", b""))
        if not message.get("more_body", False):
            return


class RequestRules:
    """The ASGI layer: checks, then hands the app the body it already read."""

    def __init__(self, app: ASGIApp, max_body_bytes: int,
                 max_produce_bytes: int | None = None) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        # The REST producer's paths (`/topics/...`) may carry a message up to maxMessageSize
        # in JSON, so their limit is the larger of the two.
        self.max_produce_bytes = max(max_body_bytes, max_produce_bytes or 0)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        try:
            started = layer_times.cpu_start()
            check_uri(scope)
            scope = jetty_path(scope)
            layer_times.cpu_stop("request rules", started)
            if scope["method"] not in _WITH_BODY:
                await self.app(scope, receive, send)
                return
            limit = (self.max_produce_bytes if scope["path"].startswith(PRODUCE_PATHS)
                     else self.max_body_bytes)
            length = header(scope, b"content-length")
            if length is not None and length.isdigit() and int(length) > limit:
                raise too_large(limit)
            body = await read_body(receive, limit)
            if body is None:  # the client went away
                return
            started = layer_times.cpu_start()
            check_body(scope["method"], scope["path"], header(scope, b"content-type"), body)
            layer_times.cpu_stop("request rules", started)
        except RequestRejected as rejected:
            if rejected.status == 413 and header(scope, b"expect") is None:
                await drain(receive, DRAIN_BYTES)
            await send_response(send, rejected.status, dump_json({"reason": rejected.reason}),
                                close=rejected.status == 413)
            return
        await self.app(scope, replay(body, receive), send)


async def read_body(receive: Receive, limit: int | None = None) -> bytes | None:
    """The whole request body (None when the client went away); `too_large` past `limit`."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunk = message.get("body", b"")
        size += len(chunk)
        if limit is not None and size > limit:
            raise too_large(limit)
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def replay(body: bytes, receive: Receive) -> Receive:
    """A `receive` that hands the already-read body over again, then defers to the real one."""
    replayed = False

    async def replayed_receive() -> Message:
        nonlocal replayed
        if replayed:
            return await receive()
        replayed = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replayed_receive


UNSUPPORTED_MEDIA_TYPE = "Unsupported Media Type: request bodies are application/json"


async def require_json_media_type(request: Request) -> None:
    """Jersey's 415 on a `@Consumes(APPLICATION_JSON)` resource, after routing (so an unknown
    path stays 404 and a wrong method 405): a Content-Type that is not JSON, or a body sent
    without one (Jersey reads that as application/octet-stream). The anti-affinity POST takes
    its bare group name as any text type (or octet-stream, what generated clients send)."""
    if request.method not in _MAY_CONSUME:
        return
    content_type = request.headers.get("content-type")
    text_type = content_type is None or content_type.lower().startswith(
        ("text/", "application/octet-stream")
    )
    if text_type and is_text_body_route(request.method, request.url.path):
        return
    if content_type is None:
        if await request.body():
            raise UnsupportedMediaType(UNSUPPORTED_MEDIA_TYPE)
        return
    if not is_json_media_type(content_type):
        raise UnsupportedMediaType(UNSUPPORTED_MEDIA_TYPE)
