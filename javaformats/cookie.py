"""BookKeeper's bookie cookie (`org.apache.bookkeeper.bookie.Cookie`, layout version 5): the text a
bookie stores at `{ledgersRoot}/cookies/{bookieId}` and in `current/VERSION` of each of its
journal and ledger directories, so that it never comes up with a directory missing or swapped.

The text is the layout version on a line of its own, then the `CookieFormat` protobuf message in
protobuf's text format, fields in number order:

    5
    bookieHost: "127.0.0.1:3181"
    journalDir: "/data/journal"
    ledgerDirs: "1\\t/data/ledgers"
    instanceId: "6bbd2c8e-..."

`journalDir` is the journal directories joined with `,`; `ledgerDirs` (and `indexDirs`, when
index directories are configured) the count of directories, then each behind a tab.
`verify` is `Cookie.verify`: the same comparisons and the same messages.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

COOKIE_LAYOUT_VERSION = 5
_SEPARATOR = "\t"
_FIELDS = ("bookieHost", "journalDir", "ledgerDirs", "instanceId", "indexDirs")
_SHORT_ESCAPES = {7: "\\a", 8: "\\b", 12: "\\f", 10: "\\n", 13: "\\r", 9: "\\t", 11: "\\v",
                  92: "\\\\", 39: "\\'", 34: '\\"'}
_UNESCAPES = {"a": 7, "b": 8, "f": 12, "n": 10, "r": 13, "t": 9, "v": 11, "\\": 92, "'": 39,
              '"': 34, "?": 63}


class InvalidCookie(ValueError):
    """`BookieException.InvalidCookieException`: the message is upstream's reason."""


def _java(value: str | None) -> str:
    return "null" if value is None else value  # Java's string concatenation of a null


def encode_dir_paths(dirs: Sequence[str]) -> str:
    """`Cookie.encodeDirPaths`: `2\\t/a\\t/b`."""
    return _SEPARATOR.join([str(len(dirs)), *dirs])


def _escape(value: str) -> str:
    """protobuf's `TextFormat.escapeBytes` of the UTF-8 bytes: printable ASCII as is, C escapes,
    every other byte as three octal digits."""
    out = []
    for byte in value.encode("utf-8"):
        if byte in _SHORT_ESCAPES:
            out.append(_SHORT_ESCAPES[byte])
        elif 0x20 <= byte < 0x7F:
            out.append(chr(byte))
        else:
            out.append(f"\\{byte:03o}")
    return "".join(out)


def _unescape(text: str) -> str:
    out = bytearray()
    index = 0
    while index < len(text):
        char = text[index]
        if char != "\\":
            out += char.encode("utf-8")
            index += 1
            continue
        if index + 1 >= len(text):
            raise ValueError("Invalid escape sequence: '\\' at end of string.")
        escaped = text[index + 1]
        if escaped in _UNESCAPES:
            out.append(_UNESCAPES[escaped])
            index += 2
        elif escaped in "01234567":
            end = index + 1
            while end < min(index + 4, len(text)) and text[end] in "01234567":
                end += 1
            out.append(int(text[index + 1:end], 8) & 0xFF)
            index = end
        elif escaped == "x":
            end = index + 2
            while end < min(index + 4, len(text)) and text[end] in "0123456789abcdefABCDEF":
                end += 1
            if end == index + 2:
                raise ValueError("Invalid escape sequence: '\\x' with no digits")
            out.append(int(text[index + 2:end], 16))
            index = end
        else:
            raise ValueError(f"Invalid escape sequence: '\\{escaped}'")
    return out.decode("utf-8")


@dataclass(frozen=True)
class Cookie:
    bookie_id: str
    journal_dirs: str  # the directories joined with ","
    ledger_dirs: str  # encode_dir_paths
    instance_id: str | None = None
    index_dirs: str | None = None  # encode_dir_paths, when index directories are configured
    layout_version: int = COOKIE_LAYOUT_VERSION

    @classmethod
    def generate(cls, bookie_id: str, journal_dirs: Sequence[str], ledger_dirs: Sequence[str],
                 instance_id: str | None) -> Cookie:
        """`Cookie.generateCookie` of a bookie's settings (and the cluster's instance id)."""
        return cls(bookie_id, ",".join(journal_dirs), encode_dir_paths(ledger_dirs), instance_id)

    def encode(self) -> str:
        """`Cookie.toString`: what goes into the metadata store and the VERSION files."""
        if self.layout_version <= 3:  # upstream writes its current version on this form too
            return (f"{COOKIE_LAYOUT_VERSION}\n{self.bookie_id}\n{self.journal_dirs}\n"
                    f"{self.ledger_dirs}\n")
        values = (self.bookie_id, self.journal_dirs, self.ledger_dirs, self.instance_id,
                  self.index_dirs)
        body = "".join(f'{name}: "{_escape(value)}"\n'
                       for name, value in zip(_FIELDS, values, strict=True) if value is not None)
        return f"{COOKIE_LAYOUT_VERSION}\n{body}"

    @classmethod
    def parse(cls, text: str) -> Cookie:
        """`Cookie.parse`; a ValueError with upstream's message when the text is not a cookie."""
        lines = text.split("\n")
        if not text:
            raise ValueError("Exception in parsing cookie")
        try:
            version = int(lines[0].strip())
        except ValueError:
            raise ValueError(f"Invalid string '{lines[0].strip()}', cannot parse cookie.") from None
        if version == 3:
            if len(lines) < 4:
                raise ValueError("Exception in parsing cookie")
            return cls(lines[1], lines[2], lines[3], layout_version=3)
        if version < 3:
            return cls("", "", "", layout_version=version)
        found: dict[str, str] = {}
        for line in lines[1:]:
            line = line.strip()
            if not line:
                continue
            name, sep, rest = line.partition(":")
            rest = rest.strip()
            if (not sep or name.strip() not in _FIELDS or len(rest) < 2 or rest[0] != '"'
                    or rest[-1] != '"'):
                raise ValueError(f"Invalid cookie line: {line!r}")
            found[name.strip()] = _unescape(rest[1:-1])
        for required in _FIELDS[:3]:
            if required not in found:
                raise ValueError(f"Message missing required fields: {required}")
        return cls(found["bookieHost"], found["journalDir"], found["ledgerDirs"],
                   found.get("instanceId") or None, found.get("indexDirs"), version)

    def verify(self, other: Cookie) -> None:
        """`Cookie.verify`: `self` is the cookie made from the bookie's settings, `other` one that
        was stored; raises InvalidCookie with upstream's message when they differ."""
        if other.layout_version < 3 and other.layout_version != self.layout_version:
            raise InvalidCookie(f"Cookie is of too old version {other.layout_version}")
        if not (other.layout_version >= 3 and other.bookie_id == self.bookie_id
                and other.journal_dirs == self.journal_dirs
                and other.ledger_dirs == self.ledger_dirs
                and other.index_dirs == self.index_dirs):
            raise InvalidCookie(f"Cookie [{self.encode()}] is not matching with "
                                f"[{other.encode()}]")
        if self.instance_id != other.instance_id:
            raise InvalidCookie(f"instanceId {_java(self.instance_id)} is not matching with "
                                f"{_java(other.instance_id)}")
