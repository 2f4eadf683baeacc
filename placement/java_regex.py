"""User regexes in Java's dialect, matched in linear time by RE2 (`google-re2`).

Namespace isolation policies hold regexes that Pulsar compiles with `java.util.regex` and
matches with `String.matches` (the whole text). Evaluated by a backtracking engine, a pattern
such as `(b+)+c` takes exponential time; here every pattern runs on RE2, whose matching time
is linear in the text, so no pattern can hold a request or the event loop.

`compile_java` accepts a pattern only when Java accepts it AND RE2 runs it with Java's
meaning. Refused (`JavaRegexError`), with the reason:
- Python-only syntax Java rejects: `(?P<name>...)`, `(?P=name)`;
- Java features RE2 cannot run in linear time: lookahead/lookbehind `(?=`, `(?!`, `(?<=`,
  `(?<!`, atomic groups `(?>`, possessive quantifiers (`a*+`), backreferences (`\\1`,
  `\\k<name>`);
- Java features RE2 would read differently: character-class intersection (`[a-z&&[^b]]`) and
  nested classes, inline flags other than `i`, `m`, `s` (Java's `U`, `x`, `d`, `u`), and the
  escapes `\\Z`, `\\G`, `\\R`, `\\X`, `\\h`, `\\H`, `\\v`, `\\V`, `\\e`, `\\c`;
- anything RE2 itself refuses (an invalid pattern, or a program larger than `MAX_PROGRAM_MEMORY`).
Named groups `(?<name>...)`, `\\Q...\\E`, classes, `\\p{L}`-style properties, lazy quantifiers
and bounded repetition are accepted.
"""

from __future__ import annotations

import functools
import re
from typing import Any

import re2

MAX_PATTERN_LENGTH = 4096
MAX_PROGRAM_MEMORY = 8 << 20  # RE2's default; larger programs are refused at compile time
_SUPPORTED_FLAGS = frozenset("ims-")
_REFUSED_ESCAPES = {
    "Z": "\\Z", "G": "\\G", "R": "\\R", "X": "\\X", "h": "\\h", "H": "\\H", "v": "\\v",
    "V": "\\V", "e": "\\e", "c": "\\c", "k": "backreferences",
}  # fmt: skip
_REPETITION = re.compile(r"\{[0-9]+(,[0-9]*)?\}")


class JavaRegexError(ValueError):
    """The pattern is not one this service accepts; the message says why."""


def _options() -> Any:
    options = re2.Options()
    options.max_mem = MAX_PROGRAM_MEMORY
    options.never_capture = True
    options.log_errors = False
    return options


def check_java_syntax(pattern: str) -> None:
    """Refuse what Java rejects or RE2 would run differently (module docstring)."""
    if len(pattern) > MAX_PATTERN_LENGTH:
        raise JavaRegexError(f"pattern longer than {MAX_PATTERN_LENGTH} characters")
    i, n = 0, len(pattern)
    in_class = False
    after_quantifier = False  # the previous token was a quantifier
    while i < n:
        c = pattern[i]
        if c == "\\":
            i = _skip_escape(pattern, i, in_class)
            after_quantifier = False
            continue
        if in_class:
            if c == "[":
                raise JavaRegexError("nested character classes are not supported")
            if pattern.startswith("&&", i):
                raise JavaRegexError("character class intersection (&&) is not supported")
            in_class = c != "]"
            i += 1
            continue
        if c == "[":
            in_class = True
            i += 1
            if pattern.startswith("^", i):
                i += 1
            if pattern.startswith("]", i):  # a leading ] is literal in Java too
                i += 1
            after_quantifier = False
            continue
        if c == "(" and pattern.startswith("(?", i):
            _check_group(pattern, i + 2)
            i += 2
            after_quantifier = False
            continue
        repetition = _REPETITION.match(pattern, i) if c == "{" else None
        if c in "*+?" or repetition is not None:
            if after_quantifier and c == "+":
                raise JavaRegexError("possessive quantifiers are not supported")
            lazy_mark = after_quantifier and c == "?"
            after_quantifier = not lazy_mark
            i = repetition.end() if repetition is not None else i + 1
            continue
        after_quantifier = False
        i += 1


def _skip_escape(pattern: str, i: int, in_class: bool) -> int:
    """The index after the escape at `i`, refusing the ones RE2 cannot run as Java does."""
    if i + 1 >= len(pattern):
        raise JavaRegexError("trailing backslash")
    e = pattern[i + 1]
    if e == "Q":  # quoted until \E (or the end)
        end = pattern.find("\\E", i + 2)
        return len(pattern) if end < 0 else end + 2
    if e.isdigit() and e != "0" and not in_class:
        raise JavaRegexError("backreferences are not supported (linear-time engine)")
    if e in _REFUSED_ESCAPES:
        raise JavaRegexError(f"{_REFUSED_ESCAPES[e]} is not supported")
    if e in "pP" and pattern.startswith("{", i + 2):
        end = pattern.find("}", i + 3)
        if end < 0:
            raise JavaRegexError("unclosed character property")
        return end + 1
    return i + 2


def _check_group(pattern: str, at: int) -> None:
    rest = pattern[at:]
    if rest.startswith("P"):
        raise JavaRegexError("(?P...) is Python syntax; Java names a group (?<name>...)")
    for lookaround in ("=", "!", "<=", "<!", ">"):
        if rest.startswith(lookaround):
            raise JavaRegexError("lookaround and atomic groups are not supported")
    if rest.startswith("<") or rest.startswith(":"):
        return
    flags = ""
    for ch in rest:
        if ch in (")", ":"):
            break
        flags += ch
    if not flags or any(f not in _SUPPORTED_FLAGS for f in flags):
        raise JavaRegexError(f"inline flags (?{flags}) are not supported (only i, m, s)")


@functools.lru_cache(maxsize=4096)
def compile_java(pattern: str) -> Any:
    """The RE2 program of a Java pattern; `JavaRegexError` when refused."""
    check_java_syntax(pattern)
    try:
        return re2.compile(pattern, _options())
    except re2.error as exc:
        message = exc.args[0] if exc.args else "invalid pattern"
        if isinstance(message, bytes):
            message = message.decode("utf-8", "replace")
        raise JavaRegexError(str(message)) from exc


def java_matches(pattern: str, text: str) -> bool:
    """Java's `text.matches(pattern)`; a refused pattern matches nothing."""
    try:
        program = compile_java(pattern)
    except JavaRegexError:
        return False
    return program.fullmatch(text) is not None


def is_valid_java_regex(pattern: str) -> bool:
    try:
        compile_java(pattern)
    except JavaRegexError:
        return False
    return True
