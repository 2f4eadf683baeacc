"""Jackson: JSON as Pulsar's and BookKeeper's object mappers write and bind it.

`jackson_pretty` is `writerWithDefaultPrettyPrinter().writeValueAsString(value)` with Jackson's
`DefaultPrettyPrinter`: 2-space indent, `"key" : value`, arrays inline `[ "a", "b" ]` (arrays do
not indent their elements, so an object inside an array is indented by its object depth), empty
`[ ]` and `{ }`, `\\n` line ends and no trailing newline. Strings keep UTF-8 and escape control
characters as `\\u00XX` (upper-case hex) except Jackson's short escapes; doubles print as Java's
`Double.toString`. With `omit_null` (Pulsar's mapper: `Include.NON_NULL`) null object fields are
dropped; without it they print as `null`.

`jackson_text`, `jackson_long` and `jackson_bool` are the coercions Jackson applies when it binds
a JSON value into a `String`, `long` or `boolean` field.
"""

from __future__ import annotations

import json
import math
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
