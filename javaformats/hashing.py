"""Java's `String.hashCode`, `HashMap`/`HashSet` iteration order and `toString` of the values
Jackson reads from JSON.

A `HashMap<String, ?>` iterates by bucket (the key's spread hash masked by the table size), and
within a bucket in insertion order; a resize splits buckets without reordering them, so the order
depends only on the final table size. A map filled by `put` from `new HashMap<>()` starts at 16
buckets and doubles past 3/4 full; `new HashSet<>(collection)` sizes its table for the collection
up front.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

from javaformats.numbers import java_double

V = TypeVar("V")


def java_string_hash(text: str) -> int:
    """`String.hashCode()`: 31-based over UTF-16 code units, as a signed 32-bit int."""
    h = 0
    encoded = text.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(encoded), 2):
        h = (31 * h + int.from_bytes(encoded[i : i + 2], "big")) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def _bucket(key: str, table: int) -> int:
    """`HashMap.hash()` (the high half folded into the low half), masked by the table size."""
    unsigned = java_string_hash(key) & 0xFFFFFFFF
    return (unsigned ^ (unsigned >> 16)) & (table - 1)


def _table_size(count: int, *, copied: bool) -> int:
    if copied:  # HashSet(Collection): max(size / .75 + 1, 16), rounded up to a power of two
        capacity = max(int(count / 0.75) + 1, 16)
        size = 1
        while size < capacity:
            size <<= 1
        return size
    size = 16
    while count > size * 0.75:
        size <<= 1
    return size


def _hash_order(keys: list[str], *, copied: bool) -> list[str]:
    table = _table_size(len(keys), copied=copied)
    position = {key: index for index, key in enumerate(keys)}
    return sorted(keys, key=lambda k: (_bucket(k, table), position[k]))


def hash_set_order(items: Iterable[str], *, copied: bool = False) -> list[str]:
    """The iteration order of a `java.util.HashSet<String>` holding `items`.

    `copied=False` is a set filled by `add` from an empty `new HashSet<>()` (what Jackson does
    when it reads a JSON array); `copied=True` is `new HashSet<>(collection)` (what the Java
    CLI builds from a comma-separated option)."""
    return _hash_order(list(dict.fromkeys(items)), copied=copied)


def hash_map_order(entries: Iterable[tuple[str, V]]) -> dict[str, V]:
    """The entries in the order a `java.util.HashMap<String, V>` filled by `put` in this order
    iterates them (a repeated key keeps its first place and its last value)."""
    values = dict(entries)
    return {key: values[key] for key in _hash_order(list(values), copied=False)}


def java_to_string(value: Any) -> str:
    """`String.valueOf` of a value Jackson read from JSON (lists, maps, boxed scalars):
    `AbstractCollection.toString` `[a, b]`, `AbstractMap.toString` `{k=v, k2=v2}`."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return java_double(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(java_to_string(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{k}={java_to_string(v)}" for k, v in value.items()) + "}"
    return str(value)
