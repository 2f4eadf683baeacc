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

`jackson_text`, `jackson_string_field`, `jackson_integer` (`jackson_long`), `jackson_double` and
`jackson_bool` are the coercions Jackson applies when it binds a JSON value into a `String`,
`int` or `long`, `double` or `boolean` field (Pulsar's mapper, as its admin API binds request
bodies and its metadata store reads documents: scalars coerced, a single value never taken
for an array), with Jackson's words when it refuses one; `jackson_token` names a value as
those words do.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

from javaformats.hashing import java_to_string
from javaformats.numbers import INT_RANGE, LONG_RANGE, is_java_integer, java_double

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


def jackson_token(value: Any) -> str:
    """A JSON value as Jackson's binding errors name it: `String "x"`, `Integer value (token
    `JsonToken.VALUE_NUMBER_INT`)`, `Array value (token `JsonToken.START_ARRAY`)`, ..."""
    if isinstance(value, str):
        return f"String {json.dumps(value, ensure_ascii=False)}"
    if isinstance(value, bool):
        return f"Boolean value (token `JsonToken.VALUE_{'TRUE' if value else 'FALSE'}`)"
    if isinstance(value, int):
        return "Integer value (token `JsonToken.VALUE_NUMBER_INT`)"
    if isinstance(value, float):
        return "Floating-point value (token `JsonToken.VALUE_NUMBER_FLOAT`)"
    if isinstance(value, list):
        return "Array value (token `JsonToken.START_ARRAY`)"
    if isinstance(value, dict):
        return "Object value (token `JsonToken.START_OBJECT`)"
    return "Null value (token `JsonToken.VALUE_NULL`)"


def _refused(java_type: str, value: Any, why: str = "") -> ValueError:
    return ValueError(f"Cannot deserialize value of type `{java_type}` from "
                      f"{jackson_token(value)}{why}")


def jackson_text(value: Any) -> Any:
    """A JSON scalar as Jackson binds it into a `String` field: `1` -> `"1"`, `true` ->
    `"true"`; strings and null as they are. Arrays and objects are returned unchanged (Jackson
    refuses them; the caller says how; `jackson_string_field` refuses them). Jackson keeps a
    number's text as written (`1E5`, `1.50`); a parsed number can only give its shortest
    form (`100000.0`, `1.5`), which is what this returns."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return json.dumps(value)
    return value


def jackson_string_field(value: Any) -> str | None:
    """A JSON value bound into a `String` field: scalars as `jackson_text`, an array or
    object refused with Jackson's words (ValueError)."""
    if isinstance(value, list | dict):
        raise _refused("java.lang.String", value)
    text: str | None = jackson_text(value)
    return text


_RANGES = {"int": INT_RANGE, "long": LONG_RANGE}


def jackson_integer(value: Any, java_type: str = "long") -> int:
    """A JSON value as Jackson binds it into an `int` or `long` field (`java_type`): null and
    the empty string are 0 (a primitive's default), a float is truncated toward zero, a
    string is its trimmed decimal digits with an optional sign; a boolean, array, object,
    any other string or a value out of the type's range is refused with Jackson's words
    (ValueError)."""
    low, high = _RANGES[java_type]
    if value is None:
        return 0
    number: int
    if isinstance(value, bool | list | dict):
        raise _refused(java_type, value)
    if isinstance(value, int):
        number = value
    elif isinstance(value, float):
        if not math.isfinite(value) or not low <= value < high + 1:
            raise ValueError(f"Numeric value ({value!r}) out of range of {java_type} "
                             f"({low} - {high})")
        number = int(value)
    else:
        text = str(value).strip()
        if not text:
            return 0
        if not is_java_integer(text):
            raise _refused(java_type, value, f": not a valid `{java_type}` value")
        number = int(text)
    if not low <= number <= high:
        raise ValueError(f"Numeric value ({number}) out of range of {java_type} ({low} - {high})")
    return number


def jackson_long(value: Any) -> int:
    """`jackson_integer` for a `long` field."""
    return jackson_integer(value, "long")


_JAVA_DECIMAL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[fFdD]?")


def jackson_double(value: Any) -> float:
    """A JSON value as Jackson binds it into a `double` field: null and the empty string are
    0.0, an integer its value, a string its trimmed decimal text (`Double.parseDouble`); a
    boolean, array, object or any other string is refused with Jackson's words (ValueError).
    Unlike Jackson, the text of a non-finite number (`NaN`, `Infinity`) is refused too: the
    documents hold finite numbers only, as the request bodies do."""
    if value is None:
        return 0.0
    if isinstance(value, bool | list | dict):
        raise _refused("double", value)
    if isinstance(value, int | float):
        return float(value)
    text = str(value).strip()
    if not text:
        return 0.0
    if not text.isascii() or not _JAVA_DECIMAL.fullmatch(text):
        raise _refused("double", value, ": not a valid `double` value (as String to convert)")
    return float(text.rstrip("fFdD"))


def jackson_object_refusal(java_class: str, value: Any) -> str:
    """Jackson's words when a JSON value that is not an object is bound into a bean of
    `java_class` (fully qualified): an array cannot be deserialized into it, a scalar finds
    no constructor taking it."""
    if isinstance(value, list):
        return (f"Cannot deserialize value of type `{java_class}` from Array value "
                f"(token `JsonToken.START_ARRAY`)")
    if isinstance(value, str):
        kind, shown = "String", f"String value ('{value}')"
    elif isinstance(value, bool):
        kind, shown = "boolean/Boolean", f"boolean value ({'true' if value else 'false'})"
    elif isinstance(value, int):
        low, high = _RANGES["int"]
        kind = "int/Int" if low <= value <= high else "long/Long"
        shown = f"Number value ({value})"
    elif isinstance(value, float):
        kind, shown = "double/Double", f"Number value ({java_double(value)})"
    else:
        return f"Cannot deserialize value of type `{java_class}` from {jackson_token(value)}"
    return (f"Cannot construct instance of `{java_class}` (although at least one Creator "
            f"exists): no {kind}-argument constructor/factory method to deserialize from "
            f"{shown}")


_BOOLEAN_TEXTS = {"true": True, "True": True, "TRUE": True,
                  "false": False, "False": False, "FALSE": False, "": False}  # fmt: skip


def jackson_bool(value: Any) -> bool:
    """A JSON value as Jackson binds it into a `boolean` field: null and the empty string are
    false, an integer is whether it is not 0, a string `true`, `True`, `TRUE`, `false`,
    `False` or `FALSE` (trimmed); a float, array, object or any other string is refused with
    Jackson's words (ValueError)."""
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value != 0
    if isinstance(value, str):
        found = _BOOLEAN_TEXTS.get(value.strip())
        if found is not None:
            return found
        raise _refused("boolean", value, ': only "true"/"True"/"TRUE" or "false"/"False"/'
                                         '"FALSE" recognized')
    raise _refused("boolean", value)
