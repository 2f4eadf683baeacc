"""Java semantics the output depends on: String.hashCode, HashSet order, Double.toString."""

from __future__ import annotations

import pytest

from cli.javafmt import hash_set_order, java_double, java_string_hash, java_to_string


def test_string_hash_matches_java() -> None:
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == -2147483648  # the classic MIN_VALUE hash


def test_hash_set_order_matches_java_examples() -> None:
    # new HashSet<>(Arrays.asList("one", "two", "three", "four", "five")) prints this order
    assert hash_set_order(["one", "two", "three", "four", "five"], copied=True) == [
        "four", "one", "two", "three", "five"]  # fmt: skip
    assert hash_set_order(["c", "b", "a"]) == ["a", "b", "c"]
    assert hash_set_order(["a", "a", "b"]) == ["a", "b"]


def test_table_size_depends_on_how_the_set_was_built() -> None:
    twelve = [f"k{i}" for i in range(12)]  # add(): 16 buckets; copy constructor: 32
    assert sorted(hash_set_order(twelve)) == sorted(hash_set_order(twelve, copied=True))


@pytest.mark.parametrize(
    ("value", "text"),
    [(0.0, "0.0"), (1.0, "1.0"), (0.5, "0.5"), (100.0, "100.0"), (1e7, "1.0E7"),
     (12345678.9, "1.23456789E7"), (0.001, "0.001"), (0.0001, "1.0E-4"), (-2.5, "-2.5"),
     (1.2345e-5, "1.2345E-5"), (9999999.0, "9999999.0")],
)  # fmt: skip
def test_double_to_string(value: float, text: str) -> None:
    assert java_double(value) == text


def test_java_to_string_of_collections() -> None:
    assert java_to_string(["a", "b"]) == "[a, b]"
    assert java_to_string({"k": "v", "n": None}) == "{k=v, n=null}"
    assert java_to_string(True) == "true"
