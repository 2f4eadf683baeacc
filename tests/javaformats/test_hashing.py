"""String.hashCode, HashMap/HashSet iteration order and toString, against Java's own values."""

from __future__ import annotations

from javaformats import hash_map_order, hash_set_order, java_string_hash, java_to_string


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


def test_java_to_string_of_collections() -> None:
    assert java_to_string(["a", "b"]) == "[a, b]"
    assert java_to_string({"k": "v", "n": None}) == "{k=v, n=null}"
    assert java_to_string(True) == "true"


def test_string_hash_counts_utf16_code_units() -> None:
    assert java_string_hash("\U0001f600") == 1772899  # two UTF-16 units: 0xD83D, 0xDE00
    assert java_string_hash("\ud83d") == 0xD83D  # a lone surrogate, as Java holds it


def test_hash_map_order() -> None:
    # "Aa" and "BB" share a hash, so a bucket: insertion order within it
    assert list(hash_map_order([("BB", 1), ("Aa", 2)])) == ["BB", "Aa"]
    assert list(hash_map_order([("b", 1), ("a", 2)])) == ["a", "b"]  # buckets 1 and 2
    # 13 keys resize the table to 32 buckets: "q" (113) is in bucket 17 (with 16: 1), last
    keys = [chr(c) for c in range(ord("q"), ord("q") - 13, -1)]
    assert list(hash_map_order((k, None) for k in keys))[-1] == "q"


def test_hash_map_put_again_keeps_the_first_place_and_the_last_value() -> None:
    assert hash_map_order([("b", 1), ("a", 2), ("b", 3)]) == {"a": 2, "b": 3}
    assert list(hash_map_order([("BB", 1), ("Aa", 2), ("BB", 3)])) == ["BB", "Aa"]


def test_java_to_string_of_a_list_of_names() -> None:
    # how Pulsar's messages print a Set or List: "peer-clusters [c2, c3] can't be part of ..."
    assert java_to_string(["c2", "c3"]) == "[c2, c3]"
    assert java_to_string([]) == "[]"
