"""Long.parseLong, Integer.parseInt, Long.decode, Double.toString and uint64 as a Java long."""

from __future__ import annotations

import pytest

from javaformats import decode_java_long, java_double, parse_java_int, parse_java_long, signed_long


def test_parse_java_long() -> None:
    assert parse_java_long("-9223372036854775808") == -(2**63)
    assert parse_java_long("+42") == 42
    assert parse_java_long("007") == 7


@pytest.mark.parametrize("text", ["", " 1", "1 ", "0x10", "9223372036854775808", "١٢", "1_0", "+"])
def test_parse_java_long_refuses_with_javas_message(text: str) -> None:
    with pytest.raises(ValueError) as refused:
        parse_java_long(text)
    assert str(refused.value) == f'For input string: "{text}"'  # NumberFormatException's text


def test_parse_java_int_bounds() -> None:
    assert parse_java_int("2147483647") == 2**31 - 1
    with pytest.raises(ValueError):
        parse_java_int("2147483648")
    with pytest.raises(ValueError):
        parse_java_int("5\n")


def test_decode_java_long() -> None:
    assert decode_java_long("0x10") == 16
    assert decode_java_long("#ff") == 255
    assert decode_java_long("010") == 8
    assert decode_java_long("-0X10") == -16
    assert decode_java_long("0") == 0
    with pytest.raises(ValueError):
        decode_java_long("0xg")


def test_signed_long() -> None:
    assert signed_long(2**64 - 1) == -1
    assert signed_long(2**63) == -(2**63)
    assert signed_long(5) == 5


@pytest.mark.parametrize(
    ("value", "text"),
    [(0.0, "0.0"), (1.0, "1.0"), (0.5, "0.5"), (100.0, "100.0"), (1e7, "1.0E7"),
     (12345678.9, "1.23456789E7"), (0.001, "0.001"), (0.0001, "1.0E-4"), (-2.5, "-2.5"),
     (1.2345e-5, "1.2345E-5"), (9999999.0, "9999999.0"), (-0.0, "-0.0"),
     (float("nan"), "NaN"), (float("-inf"), "-Infinity")],
)  # fmt: skip
def test_double_to_string(value: float, text: str) -> None:
    assert java_double(value) == text
