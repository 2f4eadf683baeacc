"""Java's number parsing and printing: `Long.parseLong`, `Integer.parseInt`, `Long.decode`,
`Double.toString`, and a protobuf `uint64` as Java's `long` getter returns it."""

from __future__ import annotations

import re

_DIGITS = re.compile(r"[+-]?[0-9]+")
INT_RANGE = (-(2**31), 2**31 - 1)
LONG_RANGE = (-(2**63), 2**63 - 1)


def is_java_integer(text: str) -> bool:
    """Whether `text` is what `Long.parseLong` reads, range aside: an optional sign and ASCII
    digits."""
    return text.isascii() and _DIGITS.fullmatch(text) is not None


def _parse(text: str, bounds: tuple[int, int]) -> int:
    if not is_java_integer(text):
        raise ValueError(f'For input string: "{text}"')
    value = int(text)
    if not bounds[0] <= value <= bounds[1]:
        raise ValueError(f'For input string: "{text}"')
    return value


def parse_java_long(text: str) -> int:
    """`Long.parseLong(text)`: optional sign, ASCII digits, in range; ValueError with Java's
    NumberFormatException text (`For input string: "x"`) otherwise."""
    return _parse(text, LONG_RANGE)


def parse_java_int(text: str) -> int:
    """`Integer.parseInt(text)`, as `parse_java_long` for a 32-bit int."""
    return _parse(text, INT_RANGE)


def decode_java_long(text: str) -> int:
    """`Long.decode`: decimal, `0x`/`0X`/`#` hex, leading-zero octal, optional sign;
    ValueError otherwise."""
    body = text.strip()
    sign = -1 if body.startswith("-") else 1
    body = body.lstrip("+-")
    if body[:2].lower() == "0x":
        return sign * int(body[2:], 16)
    if body.startswith("#"):
        return sign * int(body[1:], 16)
    if len(body) > 1 and body.startswith("0"):
        return sign * int(body[1:], 8)
    return sign * int(body, 10)


def signed_long(value: int) -> int:
    """An unsigned 64-bit value (a protobuf `uint64`) as Java's `long` holds it."""
    value &= (1 << 64) - 1
    return value - (1 << 64) if value >> 63 else value


def java_double(value: float) -> str:
    """`Double.toString`: plain between 10^-3 and 10^7, computerized scientific otherwise
    (shortest digits that round-trip, as both Python's `repr` and Java 19+ produce)."""
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if str(value).startswith("-") else "0.0"
    from decimal import Decimal  # only doubles need it; pulsar-admin starts without it

    sign, digit_tuple, exponent = Decimal(repr(value)).normalize().as_tuple()
    digits = "".join(map(str, digit_tuple))
    assert isinstance(exponent, int)
    point = len(digits) + exponent  # where the decimal point goes in `digits`
    prefix = "-" if sign else ""
    if 1e-3 <= abs(value) < 1e7:
        if point <= 0:
            return f"{prefix}0.{'0' * -point}{digits}"
        if point >= len(digits):
            return f"{prefix}{digits}{'0' * (point - len(digits))}.0"
        return f"{prefix}{digits[:point]}.{digits[point:]}"
    return f"{prefix}{digits[0]}.{digits[1:] or '0'}E{point - 1}"
