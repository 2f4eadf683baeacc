"""Gson: JSON as `new Gson().toJson(...)` writes it (compact, HTML-safe escaping)."""

from __future__ import annotations

from collections.abc import Mapping

from javaformats.hashing import hash_map_order

_ESCAPES = {'"': '\\"', "\\": "\\\\", "\t": "\\t", "\b": "\\b", "\n": "\\n", "\r": "\\r",
            "\f": "\\f"}  # fmt: skip
_HTML = "<>&='\u2028\u2029"


def gson_string(text: str) -> str:
    """A string as Gson's default (HTML-safe) `JsonWriter` writes it: `<>&='` and the line
    and paragraph separators as lower-case `\\u00XX`, control characters likewise."""
    out = ['"']
    for char in text:
        if char in _ESCAPES:
            out.append(_ESCAPES[char])
        elif char < " " or char in _HTML:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


def gson_hash_map(entries: Mapping[str, str]) -> str:
    """`new Gson().toJson(map)` of a `HashMap<String, String>` holding `entries` (so in
    HashMap order): `{"k":"v","k2":"v2"}`."""
    ordered = hash_map_order(entries.items())
    return "{" + ",".join(f"{gson_string(k)}:{gson_string(v)}" for k, v in ordered.items()) + "}"
