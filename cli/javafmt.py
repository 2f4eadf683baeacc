"""How the Java `pulsar-admin` renders values it did not print as JSON.

`CliCommand.print(Map)` writes `key + "    " + value.toString()`, so map output shows Java's
`toString` of the client-side classes (Lombok `@Data`/`@ToString`), e.g.
`BookieInfoImpl(rack=/rack1, hostname=null)`. This module holds the small table of those
classes (their names and fields in declaration order, with the JSON name each field comes
from). The Java rules the output depends on are `javaformats`': `toString` of collections
and maps, `HashSet` iteration order (Jackson reads a JSON array into a `HashSet` for every
`Set<String>` field: failure-domain brokers, tenant roles and clusters, replication clusters,
and prints it back in hash order) and `Double.toString` (`0.0`, not `0`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from javaformats import hash_set_order, java_to_string

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
]
