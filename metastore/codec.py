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
from typing import Any

import orjson

from javaformats.jackson import jackson_bytes_escapes
from metastore.errors import ContentDeserializationError


def dump_json(document: Any) -> bytes:
    """Compact JSON as Jackson writes it (null fields are dropped by the models beforehand)."""
    try:
        written = orjson.dumps(document)
    except TypeError:  # orjson.JSONEncodeError: huge int, non-str key, ...
        written = json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode()
    return jackson_bytes_escapes(written)


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
