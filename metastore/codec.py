"""JSON of stored documents: compact, UTF-8, keys in the order given, as Pulsar writes them.

orjson does the work (the rack map of a large cluster is ~40 bytes a bookie and is rewritten
on every change, so the codec is on the hot path). What orjson refuses falls back to the
standard library: writing integers beyond 64 bits or non-string keys, reading NaN/Infinity
or a byte-order mark. Two differences remain, neither reachable from a document Pulsar
writes (Java longs are 64-bit; RFC 8259 has no NaN): integers beyond 64 bits read back as
floats, and NaN is written as null.
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

from metastore.errors import ContentDeserializationError

# Where orjson's string escapes differ from Jackson's: Jackson writes a control character's
# `\u00XX` in upper case and a character beyond the BMP as its two escaped UTF-16 surrogates
# (`\uD83D\uDE00`); both write other characters as raw UTF-8. An escaped backslash is matched
# first so that a literal backslash followed by "u00.." is left alone.
_JACKSON_SUSPECT = re.compile(rb"\\u00[01][a-f]|[\xf0-\xf4]")
_JACKSON_ESCAPES = re.compile(rb"\\\\|\\u00[01][0-9a-f]|[\xf0-\xf4][\x80-\xbf]{3}")


def _jackson_escape(found: re.Match[bytes]) -> bytes:
    text = found.group()
    if text == b"\\\\":
        return text
    if text.startswith(b"\\u"):
        return text.upper().replace(b"\\U", b"\\u")
    point = ord(text.decode()) - 0x10000
    return b"\\u%04X\\u%04X" % (0xD800 + (point >> 10), 0xDC00 + (point & 0x3FF))


def dump_json(document: Any) -> bytes:
    """Compact JSON as Jackson writes it (null fields are dropped by the models beforehand)."""
    try:
        written = orjson.dumps(document)
    except TypeError:  # orjson.JSONEncodeError: huge int, non-str key, ...
        written = json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode()
    if _JACKSON_SUSPECT.search(written) is None:
        return written
    return _JACKSON_ESCAPES.sub(_jackson_escape, written)


def load_json(raw: bytes | str) -> Any:
    """Parse a stored document; raises ValueError when it is not JSON."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return json.loads(raw)


def load_stored(path: str, raw: bytes) -> Any:
    """Parse the value stored at `path`; `ContentDeserializationError` when it is not JSON."""
    try:
        return load_json(raw)
    except ValueError as exc:
        raise ContentDeserializationError(path) from exc
