"""How the Java `pulsar-admin` renders values it did not print as JSON.

`CliCommand.print(Map)` writes `key + "    " + value.toString()`, so map output shows Java's
`toString` of the client-side classes (Lombok `@Data`/`@ToString`), e.g.
`BookieInfoImpl(rack=/rack1, hostname=null)`. This module holds the small table of those
classes (their names and fields in declaration order, with the JSON name each field comes
from) and the Java rules the output depends on:

* `AbstractCollection.toString`: `[a, b]`; `AbstractMap.toString`: `{k=v, k2=v2}`;
* `HashSet` iteration order, because Jackson reads a JSON array into a `HashSet` for every
  `Set<String>` field (failure-domain brokers, tenant roles and clusters, replication clusters)
  and prints it back in hash order;
* `Double.toString`, because `double` fields print as `0.0`, not `0`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

# -- Java collections and numbers -------------------------------------------------------------


def java_string_hash(text: str) -> int:
    """`String.hashCode()`: 31-based over UTF-16 code units, as a signed 32-bit int."""
    h = 0
    encoded = text.encode("utf-16-be")
    for i in range(0, len(encoded), 2):
        h = (31 * h + int.from_bytes(encoded[i : i + 2], "big")) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def _spread(h: int) -> int:
    """`HashMap.hash()`: the high half folded into the low half."""
    unsigned = h & 0xFFFFFFFF
    return unsigned ^ (unsigned >> 16)


def _table_size_for(capacity: int) -> int:
    size = 1
    while size < capacity:
        size <<= 1
    return size


def hash_set_order(items: Iterable[str], *, copied: bool = False) -> list[str]:
    """The iteration order of a `java.util.HashSet<String>` holding `items`.

    `copied=False` is a set filled by `add` from an empty `new HashSet<>()` (what Jackson
    does when it reads a JSON array); `copied=True` is `new HashSet<>(collection)` (what the
    Java CLI builds from a comma-separated option). Buckets iterate in index order and a
    bucket keeps insertion order; a resize splits buckets without reordering them, so the
    final order only depends on the final table size.
    """
    unique = list(dict.fromkeys(items))
    if copied:
        table = _table_size_for(max(int(len(unique) / 0.75) + 1, 16))
    else:
        table = 16
        while len(unique) > table * 0.75:
            table <<= 1
    position = {item: index for index, item in enumerate(unique)}
    return sorted(unique, key=lambda s: (_spread(java_string_hash(s)) & (table - 1), position[s]))


def java_double(value: float) -> str:
    """`Double.toString`: plain between 10^-3 and 10^7, computerized scientific otherwise
    (shortest digits that round-trip, as both Python's `repr` and Java 19+ produce)."""
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if str(value).startswith("-") else "0.0"
    from decimal import Decimal  # only doubles need it

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


def java_to_string(value: Any) -> str:
    """`String.valueOf` of a value Jackson read from JSON (lists, maps, boxed scalars)."""
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


# -- the client-side classes whose toString pulsar-admin prints --------------------------------


class JavaField(NamedTuple):
    java_name: str
    json_name: str
    kind: JavaClass | str = "value"  # "value", "set" (a HashSet<String>) or a nested class


class JavaClass(NamedTuple):
    """A Lombok `toString`: `Name(field=value, other=value)`, fields in declaration order."""

    name: str
    fields: tuple[JavaField, ...]

    def to_string(self, data: Mapping[str, Any] | None) -> str:
        if data is None:
            return "null"
        parts = []
        for field in self.fields:
            value = data.get(field.json_name)
            if isinstance(field.kind, JavaClass):
                rendered = field.kind.to_string(value)
            elif field.kind == "set" and value is not None:
                rendered = java_to_string(hash_set_order(value))
            else:
                rendered = java_to_string(value)
            parts.append(f"{field.java_name}={rendered}")
        return f"{self.name}({', '.join(parts)})"


class JavaMapOf(NamedTuple):
    """A `Map<String, V>` value (Jackson's LinkedHashMap): `{k=V.toString(), ...}`."""

    value_class: JavaClass

    def to_string(self, data: Mapping[str, Any] | None) -> str:
        if data is None:
            return "null"
        entries = (f"{k}={self.value_class.to_string(v)}" for k, v in data.items())
        return "{" + ", ".join(entries) + "}"


JavaType = JavaClass | JavaMapOf

BOOKIE_INFO = JavaClass(
    "BookieInfoImpl", (JavaField("rack", "rack"), JavaField("hostname", "hostname"))
)
BOOKIE_GROUP = JavaMapOf(BOOKIE_INFO)
FAILURE_DOMAIN = JavaClass("FailureDomainImpl", (JavaField("brokers", "brokers", "set"),))
AUTO_FAILOVER_POLICY = JavaClass(
    "AutoFailoverPolicyDataImpl",
    (JavaField("policyType", "policy_type"), JavaField("parameters", "parameters")),
)
NAMESPACE_ISOLATION_DATA = JavaClass(
    "NamespaceIsolationDataImpl",
    (
        JavaField("namespaces", "namespaces"),
        JavaField("primary", "primary"),
        JavaField("secondary", "secondary"),
        JavaField("autoFailoverPolicy", "auto_failover_policy", AUTO_FAILOVER_POLICY),
        JavaField("unloadScope", "unload_scope"),
    ),
)

__all__ = [
    "AUTO_FAILOVER_POLICY",
    "BOOKIE_GROUP",
    "BOOKIE_INFO",
    "FAILURE_DOMAIN",
    "NAMESPACE_ISOLATION_DATA",
    "JavaClass",
    "JavaField",
    "JavaMapOf",
    "JavaType",
    "hash_set_order",
    "java_double",
    "java_string_hash",
    "java_to_string",
]
