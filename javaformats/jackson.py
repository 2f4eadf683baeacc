"""Jackson: JSON as Pulsar's and BookKeeper's object mappers write and bind it.

`jackson_pretty` is `writerWithDefaultPrettyPrinter().writeValueAsString(value)` with Jackson's
`DefaultPrettyPrinter`: 2-space indent, `"key" : value`, arrays inline `[ "a", "b" ]` (arrays do
not indent their elements, so an object inside an array is indented by its object depth), empty
`[ ]` and `{ }`, `\\n` line ends and no trailing newline. Strings keep UTF-8 and escape control
characters as `\\u00XX` (upper-case hex) except Jackson's short escapes; doubles print as Java's
`Double.toString`. With `omit_null` (Pulsar's mapper: `Include.NON_NULL`) null object fields are
dropped; without it they print as `null`.

`jackson_bytes_escapes` turns compact JSON from orjson or Python's json into the escapes of
Jackson's UTF-8 generator (what Pulsar's metadata serdes store).

`jackson_text`, `jackson_long` and `jackson_bool` are the coercions Jackson applies when it binds
a JSON value into a `String`, `long` or `boolean` field.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

from javaformats.hashing import java_to_string
from javaformats.numbers import parse_java_long

_SHORT_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f",
                  "\r": "\\r"}  # fmt: skip


def jackson_string(text: str) -> str:
    """A JSON string as Jackson writes it: UTF-8 kept, control characters as `\\u00XX`."""
    out = ['"']
    for ch in text:
        if ch in _SHORT_ESCAPES:
            out.append(_SHORT_ESCAPES[ch])
        elif ord(ch) < 0x20:
            out.append(f"\\u{ord(ch):04X}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


# Where a compact JSON encoder's string escapes (orjson's, Python's json) differ from those of
# Jackson's UTF-8 generator (`writeValueAsBytes`, what Pulsar's metadata serdes store): Jackson
# writes a control character's `\u00XX` in upper case and a character beyond the BMP as its two
# escaped UTF-16 surrogates (`\uD83D\uDE00`); both write other characters as raw UTF-8. An
# escaped backslash is matched first so that a literal backslash followed by "u00.." is left
# alone. (Jackson's String writer, `jackson_pretty`'s model, keeps characters beyond the BMP.)
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


def jackson_bytes_escapes(written: bytes) -> bytes:
    """Compact UTF-8 JSON from orjson or Python's json with its string escapes as Jackson's
    UTF-8 generator writes them (unchanged, and no copy, when nothing differs). Two scans in
    C first (ASCII, no `\\u00`: ~1 µs a KB) spare the regex's (~12 µs a KB) for the usual
    document."""
    if written.isascii() and b"\\u00" not in written:
        return written
    if _JACKSON_SUSPECT.search(written) is None:
        return written
    return _JACKSON_ESCAPES.sub(_jackson_escape, written)


def _scalar(value: Any) -> str:
    if value is None or isinstance(value, bool | int | float):
        return java_to_string(value)  # null, true/false, Long.toString, Double.toString
    return jackson_string(str(value))


def _write(value: Any, depth: int, omit_null: bool, out: list[str]) -> None:
    if isinstance(value, Mapping):
        entries = [(k, v) for k, v in value.items() if not (omit_null and v is None)]
        if not entries:
            out.append("{ }")
            return
        out.append("{")
        for index, (key, item) in enumerate(entries):
            out.append(("," if index else "") + "\n" + "  " * (depth + 1))
            out.append(jackson_string(str(key)) + " : ")
            _write(item, depth + 1, omit_null, out)
        out.append("\n" + "  " * depth + "}")
    elif isinstance(value, list | tuple):
        if not value:
            out.append("[ ]")
            return
        out.append("[ ")
        for index, item in enumerate(value):
            if index:
                out.append(", ")
            _write(item, depth, omit_null, out)
        out.append(" ]")
    else:
        out.append(_scalar(value))


def jackson_pretty(value: Any, *, omit_null: bool = True) -> str:
    """`writerWithDefaultPrettyPrinter().writeValueAsString(value)` (see the module docstring)."""
    out: list[str] = []
    _write(value, 0, omit_null, out)
    return "".join(out)


def jackson_text(value: Any) -> Any:
    """A JSON scalar as Jackson binds it into a `String` field: `1` -> `"1"`, `true` ->
    `"true"`; strings and null as they are. Arrays and objects are returned unchanged (Jackson
    refuses them; the caller says how)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return json.dumps(value)
    return value


def jackson_long(value: Any) -> int:
    """A JSON value as Jackson binds it into a `long` field: null is 0, a float is truncated,
    a string must hold a Java long; ValueError for anything else or out of range."""
    number: int | None = None
    if value is None:
        return 0
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, float) and math.isfinite(value):
        number = int(value)
    elif isinstance(value, str):
        number = parse_java_long(value.strip())
    if number is None or not -(1 << 63) <= number < 1 << 63:
        raise ValueError(f"not a valid long: {value!r}")
    return number


def jackson_bool(value: Any) -> bool:
    """A JSON value as Jackson binds it into a `boolean` field: null is false, `"true"` and
    `"false"` as strings; ValueError for anything else."""
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value in ("true", "false"):
        return value == "true"
    raise ValueError(f"not a valid boolean: {value!r}")
