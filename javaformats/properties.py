"""Java properties files as `java.util.Properties.load` reads them: `key=value`, `key: value`
or `key value`; `#` and `!` comment lines; a line ending in an odd number of backslashes
continues on the next (whose leading whitespace is dropped); `\\t`, `\\n`, `\\r`, `\\f`,
`\\uXXXX` and `\\<char>` escapes in keys and values.

`parse_broker_conf` reads a `broker.conf`-style file as Pulsar's configuration loader does
(the properties, each value trimmed), refusing a line that is a bare key with its file and line
number. Reading the file is the caller's: this package does no I/O.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_WHITESPACE = " \t\f"


class PropertyLine(NamedTuple):
    number: int  # the line the entry starts on, from 1
    text: str  # the logical line (continuations joined)
    key: str
    value: str
    separated: bool  # False for a bare key (no `=`, `:` or whitespace after it)


def _logical_lines(text: str) -> Iterator[tuple[int, str]]:
    """Continuation lines joined; comments and blank lines dropped."""
    pending = ""
    start = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.lstrip()
        if not pending and (not line or line[0] in "#!"):
            continue
        if not pending:
            start = number
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            pending += line[:-1]
            continue
        yield start, pending + line
        pending = ""
    if pending:
        yield start, pending


def _unescape(text: str) -> str:
    out: list[str] = []
    chars = iter(range(len(text)))
    for i in chars:
        ch = text[i]
        if ch != "\\" or i + 1 >= len(text):
            out.append(ch)
            continue
        nxt = text[i + 1]
        next(chars, None)
        if nxt == "u" and i + 5 < len(text):
            out.append(chr(int(text[i + 2 : i + 6], 16)))
            for _ in range(4):
                next(chars, None)
        else:
            out.append(_ESCAPES.get(nxt, nxt))
    return "".join(out)


def property_lines(text: str) -> Iterator[PropertyLine]:
    """Each entry of a properties text, in file order (a repeated key appears each time)."""
    for number, line in _logical_lines(text):
        index, escaped = 0, False
        while index < len(line):
            ch = line[index]
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch in "=:" or ch in _WHITESPACE:
                break
            index += 1
        key, rest = line[:index], line[index:].lstrip(_WHITESPACE)
        if line[index : index + 1] in ("=", ":"):
            rest = line[index + 1 :].lstrip(_WHITESPACE)
        elif rest[:1] in ("=", ":"):
            rest = rest[1:].lstrip(_WHITESPACE)
        yield PropertyLine(number, line, _unescape(key), _unescape(rest), index < len(line))


def parse_properties(text: str) -> dict[str, str]:
    """`java.util.Properties.load`: the last value of each key."""
    return {entry.key: entry.value for entry in property_lines(text)}


def parse_broker_conf(text: str, source: str = "broker.conf") -> dict[str, str]:
    """A `broker.conf`-style text: the properties with keys and values trimmed; ValueError
    naming `source` and the line for a bare key."""
    values: dict[str, str] = {}
    for entry in property_lines(text):
        if not entry.separated:
            raise ValueError(f"{source}:{entry.number}: expected key=value, got {entry.text!r}")
        values[entry.key.strip()] = entry.value.strip()
    return values
