"""Pulsar's JSON documents, defined once, with Pulsar's field names: one model per document.

These are what the API accepts and returns (`api.shapes.models` re-exports them) and exactly
what the repositories (`metastore.repositories`) write to the store:
`dump()` drops null fields, as Pulsar's ObjectMapper (NON_NULL) does. Stored documents that
Pulsar may extend (`Policies`, `LocalPolicies`) keep unknown fields on a round trip, so a
document a real broker wrote is never truncated by us. Unknown input fields are ignored.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Annotated, Any, ClassVar, Literal, TypeVar

import orjson
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    field_validator,
    model_validator,
)
from pydantic.config import JsonDict
from pydantic_core import PydanticCustomError

from javaformats import (
    hash_set_order,
    jackson_bool,
    jackson_double,
    jackson_integer,
    jackson_object_refusal,
    jackson_string_field,
    jackson_token,
    java_double,
)
from metastore.codec import dump_json, load_json
from metastore.errors import ContentDeserializationError
from placement import AffinityGroups, EnsembleRequest

M = TypeVar("M", bound="PulsarModel")

def _bound(convert: Callable[[Any], Any]) -> BeforeValidator:
    """`convert` as a field's first step, its ValueError (Jackson's words) the field's error."""

    def bind(value: Any) -> Any:
        try:
            return convert(value)
        except ValueError as exc:
            raise PydanticCustomError("jackson", str(exc)) from None

    return BeforeValidator(bind)


def _collection_refusal(java_type: str, value: Any) -> ValueError:
    """Jackson's words for a JSON value that cannot fill a collection or map of `java_type`
    (as Jackson names it, with its type parameters): a string finds no constructor taking it,
    anything else cannot be deserialized into it."""
    if isinstance(value, str):
        raw = java_type.split("<", 1)[0]
        return ValueError(f"Cannot construct instance of `{raw}` (although at least one "
                          f"Creator exists): no String-argument constructor/factory method to "
                          f"deserialize from String value ('{value}')")
    return ValueError(f"Cannot deserialize value of type `{java_type}` from "
                      f"{jackson_token(value)}")


def _string_items(java_type: str) -> Callable[[Any], Any]:
    """A JSON value bound into a `Set<String>` or `List<String>` (`java_type`, as Jackson
    names it): each item as `jackson_string_field`, null as null; a scalar or object refused
    as Jackson refuses it (a single value is never taken for an array)."""

    def bind(value: Any) -> Any:
        if value is None:
            return None
        if isinstance(value, list):
            return [jackson_string_field(item) for item in value]
        raise _collection_refusal(java_type, value)

    return bind


def _string_values(value: Any) -> Any:
    """A JSON value bound into a `Map<String, String>` (Jackson fills a `LinkedHashMap`): each
    value as `jackson_string_field`, null as null; anything but an object refused."""
    if value is None:
        return None
    if isinstance(value, dict):
        return {key: jackson_string_field(item) for key, item in value.items()}
    raise _collection_refusal("java.util.LinkedHashMap<java.lang.String,java.lang.String>", value)


def _hash_set_order(value: list[str] | None) -> list[str] | None:
    return None if value is None else hash_set_order(value)


def _linked_set_order(value: list[str] | None) -> list[str] | None:
    return None if value is None else list(dict.fromkeys(value))


# Fields as Jackson binds them into Pulsar's Java types, from a request body or a stored
# document alike (`javaformats.jackson`): scalars coerced (`1` into a String is "1", "3" into an
# int is 3, null into a primitive is its default), anything else refused with Jackson's words.
# A field Pulsar declares `int` is 32-bit, `long` 64-bit.
JavaString = Annotated[str | None, _bound(jackson_string_field)]
JavaInt = Annotated[int, Field(ge=-(2**31), le=2**31 - 1),
                    _bound(lambda v: jackson_integer(v, "int"))]  # fmt: skip
JavaLong = Annotated[int, Field(ge=-(2**63), le=2**63 - 1), _bound(jackson_integer)]
JavaBoolean = Annotated[bool, _bound(jackson_bool)]
JavaDouble = Annotated[float, _bound(jackson_double)]
JavaBooleanOrNull = Annotated[bool | None, _bound(lambda v: None if v is None else jackson_bool(v))]
JavaStringList = Annotated[
    list[str] | None, _bound(_string_items("java.util.ArrayList<java.lang.String>"))
]
JavaStringMap = Annotated[dict[str, str] | None, _bound(_string_values)]
# A `Set<String>` Jackson fills with `new HashSet<>()` and `add`: written in that set's iteration
# order, duplicates collapsed. A `LinkedHashSet<String>`: insertion order, duplicates collapsed.
JavaHashSet = Annotated[
    list[str],
    _bound(_string_items("java.util.HashSet<java.lang.String>")),
    PlainSerializer(hash_set_order, return_type=list[str]),
]
JavaHashSetOrNull = Annotated[
    list[str] | None,
    _bound(_string_items("java.util.HashSet<java.lang.String>")),
    PlainSerializer(_hash_set_order, return_type=list[str] | None),
]
JavaLinkedHashSetOrNull = Annotated[
    list[str] | None,
    _bound(_string_items("java.util.LinkedHashSet<java.lang.String>")),
    PlainSerializer(_linked_set_order, return_type=list[str] | None),
]


def _java_numbers(value: Any) -> Any:
    """Doubles as Jackson writes them (`Double.toString`: 1.5E10, 1.0E-5, 100.0); integers
    beyond 64 bits (only in fields kept as another tool stored them) as their digits."""
    if isinstance(value, float):
        return orjson.Fragment(java_double(value))
    if isinstance(value, int) and not -(2**63) <= value < 2**64:
        return orjson.Fragment(str(value))
    if isinstance(value, dict):
        return {key: _java_numbers(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_java_numbers(item) for item in value]
    return value


def _unknown_enum_as_null(allowed: tuple[str, ...]) -> Any:
    """Pulsar reads an unknown enum value as null (READ_UNKNOWN_ENUM_VALUES_AS_NULL)."""

    def read(value: Any) -> Any:
        return value if value is None or value in allowed else None

    return read


# -- examples in the OpenAPI document (the JSON Pulsar writes for each shape) -------------------

EXAMPLE_BOOKIES: JsonDict = {
    "bookies": [{"bookieId": "127.0.0.1:3181"}, {"bookieId": "127.0.0.2:3181"}]
}
EXAMPLE_CLUSTER: JsonDict = {
    "serviceUrl": "http://pulsar.example.com:8080",
    "brokerServiceUrl": "pulsar://pulsar.example.com:6650",
    "brokerClientTlsEnabled": False,
    "tlsAllowInsecureConnection": False,
    "brokerClientTlsEnabledWithKeyStore": False,
    "brokerClientTlsTrustStoreType": "JKS",
    "brokerClientTlsKeyStoreType": "JKS",
}
EXAMPLE_PERSISTENCE: JsonDict = {
    "bookkeeperEnsemble": 3,
    "bookkeeperWriteQuorum": 2,
    "bookkeeperAckQuorum": 2,
    "managedLedgerMaxMarkDeleteRate": 0.0,
}
EXAMPLE_AFFINITY: JsonDict = {
    "bookkeeperAffinityGroupPrimary": "group-ssd",
    "bookkeeperAffinityGroupSecondary": "default",
    "bookkeeperAffinityGroupStrict": True,
}
EXAMPLE_POLICIES: JsonDict = {
    "replication_clusters": ["standalone"],
    "bundles": {
        "boundaries": ["0x00000000", "0x40000000", "0x80000000", "0xc0000000", "0xffffffff"],
        "numBundles": 4,
    },
    "persistence": EXAMPLE_PERSISTENCE,
}
EXAMPLE_FAILOVER: JsonDict = {
    "parameters": {"min_limit": "1", "usage_threshold": "80"},
    "policy_type": "min_available",
}
EXAMPLE_ISOLATION: JsonDict = {
    "namespaces": ["public/ssd-.*"],
    "primary": ["broker-[12].example.com:8080"],
    "secondary": ["broker-3.example.com:8080"],
    "auto_failover_policy": EXAMPLE_FAILOVER,
}
EXAMPLE_BROKER_ISOLATION: JsonDict = {
    "brokerName": "broker-1.example.com:8080",
    "policyName": "policy-ssd",
    "primary": True,
    "namespaceRegex": ["public/ssd-.*"],
}


_PERSISTENCE_COUNTS = ("bookkeeperEnsemble", "bookkeeperWriteQuorum", "bookkeeperAckQuorum")


def stored_object(path: str, raw: bytes) -> dict[str, Any]:
    """The JSON object stored at `path`; `ContentDeserializationError` when it is not one."""
    try:
        document = load_json(raw)
    except ValueError as exc:
        raise ContentDeserializationError(path) from exc
    if not isinstance(document, dict):
        raise ContentDeserializationError(path)
    return document


class PulsarModel(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="ignore")

    # The Java class Jackson binds this document into, fully qualified: a JSON value that is
    # not an object is refused in Jackson's words naming it (None: pydantic's words).
    java_class: ClassVar[str | None] = None

    @model_validator(mode="before")
    @classmethod
    def _an_object(cls, data: Any) -> Any:
        if cls.java_class is not None and not isinstance(data, dict | BaseModel) \
                and data is not None:
            raise PydanticCustomError("jackson", jackson_object_refusal(cls.java_class, data))
        return data

    def dump(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)

    def to_bytes(self) -> bytes:
        return dump_json(_java_numbers(self.dump()))

    @classmethod
    def from_bytes(cls: type[M], raw: bytes) -> M:
        return cls.model_validate_json(raw)

    @classmethod
    def from_stored(cls: type[M], path: str, raw: bytes | Any) -> M:
        """The document stored at `path` (bytes, or an already parsed part of one);
        `ContentDeserializationError` naming the key when it is not JSON of this shape
        (Pulsar answers 500 "Failed to deserialize payload for key '...'")."""
        try:
            if isinstance(raw, bytes | bytearray):
                return cls.model_validate_json(raw)
            return cls.model_validate(raw)
        except ValueError as exc:  # pydantic's ValidationError is a ValueError
            raise ContentDeserializationError(path) from exc


class OpenPulsarModel(PulsarModel):
    """A stored document whose unknown fields survive a read-modify-write."""

    model_config = ConfigDict(populate_by_name=True, extra="allow")


# -- bookies ----------------------------------------------------------------------------------


class BookieInfo(PulsarModel):
    java_class = "org.apache.pulsar.common.policies.data.impl.BookieInfoImpl"
    model_config = ConfigDict(
        json_schema_extra={"examples": [{"rack": "/rack1", "hostname": "bk-1.example.com"}]}
    )

    rack: JavaString = Field(
        default=None, description="Rack path, e.g. /rack1 or /region1/rack1"
    )
    hostname: JavaString = Field(default=None, description="Bookie hostname (optional)")


class RawBookieInfo(PulsarModel):
    model_config = ConfigDict(json_schema_extra={"examples": [{"bookieId": "127.0.0.1:3181"}]})

    bookieId: str = Field(description="Bookie id in host:port form")


class BookiesClusterInfo(PulsarModel):
    model_config = ConfigDict(json_schema_extra={"examples": [EXAMPLE_BOOKIES]})

    bookies: list[RawBookieInfo]


# `/bookies`: {group: {bookieId: BookieInfo}}: groups sorted by key (a Java TreeMap), each
# group's bookies in stored order (Jackson reads a group as a LinkedHashMap).
BookiesRackConfiguration = dict[str, dict[str, BookieInfo]]


# -- clusters and failure domains -------------------------------------------------------------


class ClusterData(PulsarModel):
    java_class = "org.apache.pulsar.common.policies.data.ClusterDataImpl"
    model_config = ConfigDict(json_schema_extra={"examples": [EXAMPLE_CLUSTER]})

    # In the order Jackson writes ClusterDataImpl's properties.
    serviceUrl: JavaString = Field(
        default=None, description="HTTP admin URL of the cluster (scheme http)"
    )
    serviceUrlTls: JavaString = Field(default=None, description="HTTPS admin URL (scheme https)")
    brokerServiceUrl: JavaString = Field(
        default=None, description="Binary protocol URL (scheme pulsar)"
    )
    brokerServiceUrlTls: JavaString = Field(
        default=None, description="Binary protocol URL over TLS (scheme pulsar+ssl)"
    )
    proxyServiceUrl: JavaString = Field(
        default=None, description="URL of a proxy in front of the cluster (pulsar or pulsar+ssl)"
    )
    proxyProtocol: Literal["SNI"] | None = Field(
        default=None, description="How to reach brokers through the proxy: only SNI"
    )
    peerClusterNames: JavaLinkedHashSetOrNull = Field(
        default=None,
        description="Clusters lookups are redirected to for namespaces not replicated here",
    )
    authenticationPlugin: JavaString = Field(
        default=None, description="Client auth plugin class brokers use towards this cluster"
    )
    authenticationParameters: JavaString = Field(
        default=None, description="Parameters of the authentication plugin"
    )
    brokerClientTlsEnabled: JavaBoolean = Field(
        default=False, description="Brokers use TLS towards this cluster"
    )
    tlsAllowInsecureConnection: JavaBoolean = Field(
        default=False, description="Accept untrusted TLS certificates from this cluster"
    )
    brokerClientTlsEnabledWithKeyStore: JavaBoolean = Field(
        default=False, description="TLS with key stores instead of PEM files"
    )
    brokerClientTlsTrustStoreType: JavaString = Field(
        default=None, description="Trust store type (JKS or PKCS12; JKS when unset)"
    )
    brokerClientTlsTrustStore: JavaString = Field(default=None, description="Trust store path")
    brokerClientTlsTrustStorePassword: JavaString = Field(
        default=None, description="Trust store password"
    )
    brokerClientTrustCertsFilePath: JavaString = Field(
        default=None, description="Trusted CA certificates (PEM) path"
    )
    brokerClientCertificateFilePath: JavaString = Field(
        default=None, description="Client certificate (PEM) path"
    )
    brokerClientKeyFilePath: JavaString = Field(
        default=None, description="Client private key (PEM) path"
    )
    brokerClientTlsKeyStoreType: JavaString = Field(
        default=None, description="Key store type (JKS or PKCS12; JKS when unset)"
    )
    brokerClientTlsKeyStorePassword: JavaString = Field(
        default=None, description="Key store password"
    )
    brokerClientTlsKeyStore: JavaString = Field(default=None, description="Key store path")
    brokerClientSslFactoryPlugin: JavaString = Field(
        default=None, description="SSL factory plugin class (Pulsar 3.x/4.x)"
    )
    brokerClientSslFactoryPluginParams: JavaString = Field(
        default=None, description="Parameters of the SSL factory plugin"
    )
    listenerName: JavaString = Field(
        default=None, description="Advertised listener to use when connecting to this cluster"
    )

    _proxy_protocol = field_validator("proxyProtocol", mode="before")(
        _unknown_enum_as_null(("SNI",))
    )

    @classmethod
    def built(cls, **fields: Any) -> ClusterData:
        """`ClusterData.builder()...build()`: the builder's defaults (JKS stores, Pulsar's
        default SSL factory) under `fields`. A document read from JSON (the REST body, the
        store) has no such defaults: Jackson starts from the no-argument constructor."""
        return cls(**{**BUILDER_DEFAULTS, **fields})


BUILDER_DEFAULTS: dict[str, Any] = {
    "brokerClientTlsTrustStoreType": "JKS",
    "brokerClientTlsKeyStoreType": "JKS",
    "brokerClientSslFactoryPlugin": "org.apache.pulsar.common.util.DefaultPulsarSslFactory",
}


class PartitionedTopicMetadata(OpenPulsarModel):
    """`/admin/partitioned-topics/{tenant}/{ns}/persistent/{topic}`: how many partitions the
    topic has (each partition `{topic}-partition-{i}` a topic of its own)."""

    java_class = "org.apache.pulsar.common.partition.PartitionedTopicMetadata"
    model_config = ConfigDict(
        populate_by_name=True, extra="allow",
        json_schema_extra={"examples": [{"partitions": 3, "deleted": False}]},
    )

    partitions: JavaInt = 0
    deleted: JavaBoolean = False
    properties: JavaStringMap = None

    @classmethod
    def count_in(cls, raw: bytes) -> int:
        """The partition count a stored document holds, read leniently (0 when the bytes are
        not such a document), for the checks that only ask whether a topic is partitioned."""
        try:
            return cls.from_bytes(raw).partitions
        except ValueError:
            return 0


class FailureDomain(PulsarModel):
    java_class = "org.apache.pulsar.common.policies.data.FailureDomainImpl"
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [{"brokers": ["broker-1.example.com:8080", "broker-2.example.com:8080"]}]
        }
    )

    brokers: JavaHashSetOrNull = Field(
        default=None, description="Broker ids, host:webServicePort"
    )

    @classmethod
    def read(cls, raw: bytes | None) -> FailureDomain:
        """The reading side for lookup's placement: bytes that are not a JSON object read as
        a domain of no brokers, and broker ids that are not strings are skipped."""
        try:
            data = load_json(raw) if raw else {}
        except ValueError:
            data = {}
        members = data.get("brokers") if isinstance(data, dict) else None
        if not isinstance(members, list):
            members = []
        return cls(brokers=[b for b in members if isinstance(b, str)])


# -- tenants and namespaces -------------------------------------------------------------------


class TenantInfo(PulsarModel):
    java_class = "org.apache.pulsar.common.policies.data.TenantInfoImpl"
    model_config = ConfigDict(
        json_schema_extra={"examples": [{"adminRoles": ["ops"], "allowedClusters": ["standalone"]}]}
    )

    adminRoles: JavaHashSet = Field(
        default_factory=list, description="Roles that administer the tenant's namespaces"
    )
    allowedClusters: JavaHashSet = Field(
        default_factory=list, description="Clusters the tenant's namespaces may use"
    )

    @model_validator(mode="before")
    @classmethod
    def _nulls_as_unset(cls, data: Any) -> Any:
        """TenantInfoImpl's sets are null until given: null reads as unset."""
        if isinstance(data, dict):
            return {key: value for key, value in data.items() if value is not None}
        return data

    def dump(self) -> dict[str, Any]:
        """A set never given (absent or null where it was read) is omitted, as Jackson omits
        TenantInfoImpl's null sets."""
        data = super().dump()
        for name in ("adminRoles", "allowedClusters"):
            if name not in self.model_fields_set:
                data.pop(name, None)
        return data


class PersistencePolicies(PulsarModel):
    java_class = "org.apache.pulsar.common.policies.data.PersistencePolicies"
    bookkeeperEnsemble: JavaInt = 2
    bookkeeperWriteQuorum: JavaInt = 2
    bookkeeperAckQuorum: JavaInt = 2
    managedLedgerMaxMarkDeleteRate: JavaDouble = 0.0
    managedLedgerStorageClassName: JavaString = None

    model_config = ConfigDict(json_schema_extra={"examples": [EXAMPLE_PERSISTENCE]})


class BookieAffinityGroupData(PulsarModel):
    java_class = "org.apache.pulsar.common.policies.data.impl.BookieAffinityGroupDataImpl"
    model_config = ConfigDict(json_schema_extra={"examples": [EXAMPLE_AFFINITY]})

    bookkeeperAffinityGroupPrimary: JavaString = Field(
        default=None, description="Comma-separated primary bookie groups"
    )
    bookkeeperAffinityGroupSecondary: JavaString = Field(
        default=None, description="Comma-separated secondary (fallback) bookie groups"
    )
    # Upstream's BookieAffinityGroupData has no such field and ignores it; ours binds it as
    # Jackson binds a `Boolean` (true, "true", "True", 1, ...; "yes" or 2.5 refused).
    bookkeeperAffinityGroupStrict: JavaBooleanOrNull = Field(
        default=None,
        description=(
            "Extension: never place on bookies without rack info or of other groups. "
            "Omitted when false, so upstream Pulsar ignores it."
        ),
    )

    def dump(self) -> dict[str, Any]:
        data = super().dump()
        if not data.get("bookkeeperAffinityGroupStrict"):
            data.pop("bookkeeperAffinityGroupStrict", None)
        return data

    @property
    def strict(self) -> bool:
        return bool(self.bookkeeperAffinityGroupStrict)


class BundlesData(OpenPulsarModel):
    boundaries: JavaStringList = None
    numBundles: JavaInt = 0


class AuthPolicies(OpenPulsarModel):
    namespace_auth: dict[str, list[str]] = Field(default_factory=dict)
    destination_auth: dict[str, dict[str, list[str]]] = Field(default_factory=dict)
    subscription_auth_roles: dict[str, list[str]] = Field(default_factory=dict)


class Policies(OpenPulsarModel):
    """The namespace's global policies (the subset we interpret; the rest is kept as is)."""
    java_class = "org.apache.pulsar.common.policies.data.Policies"

    model_config = ConfigDict(json_schema_extra={"examples": [EXAMPLE_POLICIES]})

    auth_policies: AuthPolicies = Field(default_factory=AuthPolicies)
    replication_clusters: JavaHashSet = Field(default_factory=list)
    allowed_clusters: JavaHashSet = Field(default_factory=list)
    bundles: BundlesData | None = None
    backlog_quota_map: dict[str, Any] = Field(default_factory=dict)
    clusterDispatchRate: dict[str, Any] = Field(default_factory=dict)
    topicDispatchRate: dict[str, Any] = Field(default_factory=dict)
    subscriptionDispatchRate: dict[str, Any] = Field(default_factory=dict)
    replicatorDispatchRate: dict[str, Any] = Field(default_factory=dict)
    clusterSubscribeRate: dict[str, Any] = Field(default_factory=dict)
    persistence: PersistencePolicies | None = None
    retention_policies: dict[str, Any] | None = None
    publishMaxMessageRate: dict[str, Any] = Field(default_factory=dict)
    latency_stats_sample_rate: dict[str, Any] = Field(default_factory=dict)
    deleted: JavaBoolean = False
    encryption_required: JavaBoolean = False
    subscription_auth_mode: str = "None"
    offload_threshold: JavaLong = -1
    offload_threshold_in_seconds: JavaLong = -1
    schema_auto_update_compatibility_strategy: JavaString = None
    schema_compatibility_strategy: str = "UNDEFINED"
    is_allow_auto_update_schema: JavaBooleanOrNull = None
    schema_validation_enforced: JavaBoolean = False
    subscription_types_enabled: JavaHashSet = Field(default_factory=list)
    properties: Annotated[dict[str, str], _bound(_string_values)] = Field(
        default_factory=dict
    )
    migrated: JavaBoolean = False

    def cluster_that_can_delete(self) -> str | None:
        """`Policies.getClusterThatCanDeleteNamespace()` (Pulsar 4.0): the one replication
        cluster, unless there are several or more than one allowed cluster."""
        if len(self.replication_clusters) != 1 or len(self.allowed_clusters) > 1:
            return None
        return self.replication_clusters[0]

    @property
    def persistence_request(self) -> EnsembleRequest | None:
        """The persistence sizes placement uses (None: unset, the broker defaults apply)."""
        found = self.persistence
        if found is None:
            return None
        return EnsembleRequest(
            found.bookkeeperEnsemble, found.bookkeeperWriteQuorum, found.bookkeeperAckQuorum
        )

    @classmethod
    def read(cls, path: str, raw: bytes) -> Policies:
        """The reading side for placement and the audit: a `persistence` that is not an
        object reads as unset, its counts Pulsar omits (or writes null) take Pulsar's defaults
        (2/2/2); a count that is not an integer, or a document that is not this shape, is
        `ContentDeserializationError` (a namespace's own unreadable policies are an error,
        never "no policy")."""
        data = stored_object(path, raw)
        persistence = data.get("persistence")
        if not isinstance(persistence, Mapping):
            data.pop("persistence", None)
        else:
            sizes = {}
            for key, value in persistence.items():
                if key in _PERSISTENCE_COUNTS:
                    if value is None:
                        continue
                    if isinstance(value, bool) or not isinstance(value, int):
                        raise ContentDeserializationError(path)
                sizes[key] = value
            data["persistence"] = sizes
        return cls.from_stored(path, data)

    def dump(self) -> dict[str, Any]:
        """As Jackson writes Pulsar 4.0's Policies: its fields in their declared order (those
        kept without being interpreted here included), fields Pulsar does not know after them,
        the derived `clusterThatCanDeleteNamespace` last (recomputed, never kept from the
        stored document), omitted when null."""
        data = super().dump()
        data.pop("clusterThatCanDeleteNamespace", None)
        data = {
            **{key: data.pop(key) for key in POLICIES_FIELDS if key in data},
            **data,
        }
        deleter = self.cluster_that_can_delete()
        if deleter is not None:
            data["clusterThatCanDeleteNamespace"] = deleter
        return data


# Pulsar 4.0's Policies fields in the order Jackson writes them.
POLICIES_FIELDS = (
    "auth_policies", "replication_clusters", "allowed_clusters", "bundles", "backlog_quota_map",
    "clusterDispatchRate", "topicDispatchRate", "subscriptionDispatchRate",
    "replicatorDispatchRate", "clusterSubscribeRate", "persistence", "deduplicationEnabled",
    "autoTopicCreationOverride", "autoSubscriptionCreationOverride", "publishMaxMessageRate",
    "latency_stats_sample_rate", "message_ttl_in_seconds",
    "subscription_expiration_time_minutes", "retention_policies", "deleted",
    "encryption_required", "delayed_delivery_policies", "inactive_topic_policies",
    "subscription_auth_mode", "max_producers_per_topic", "max_consumers_per_topic",
    "max_consumers_per_subscription", "max_unacked_messages_per_consumer",
    "max_unacked_messages_per_subscription", "max_subscriptions_per_topic",
    "compaction_threshold", "offload_threshold", "offload_threshold_in_seconds",
    "offload_deletion_lag_ms", "max_topics_per_namespace",
    "schema_auto_update_compatibility_strategy", "schema_compatibility_strategy",
    "is_allow_auto_update_schema", "schema_validation_enforced", "offload_policies",
    "deduplicationSnapshotIntervalSeconds", "subscription_types_enabled", "properties",
    "resource_group_name", "migrated", "dispatcherPauseOnAckStatePersistentEnabled",
    "entryFilters",
)  # fmt: skip


def _one_bundle() -> BundlesData:
    """`Policies.defaultBundle()`: one bundle over the whole hash range."""
    return BundlesData(boundaries=["0x00000000", "0xffffffff"], numBundles=1)


class LocalPolicies(OpenPulsarModel):
    """Per-cluster namespace policies at `/admin/local-policies/{tenant}/{ns}`. As Pulsar's
    LocalPolicies, a document without `bundles` holds one bundle over the whole range, and
    `migrated` is false unless given."""

    bundles: BundlesData | None = Field(default_factory=_one_bundle)
    bookieAffinityGroup: BookieAffinityGroupData | None = None
    namespaceAntiAffinityGroup: JavaString = None
    migrated: JavaBoolean = False

    @property
    def bookie_affinity(self) -> AffinityGroups | None:
        """The namespace's own bookie affinity groups; None when it names no group (the
        broker-wide groups apply then)."""
        data = self.bookieAffinityGroup
        if data is None:
            return None
        groups = AffinityGroups.from_json(data.model_dump(exclude_none=True))
        if not groups.primary and not groups.secondary:
            return None
        return groups

    @property
    def anti_affinity_group(self) -> str | None:
        return self.namespaceAntiAffinityGroup

    @property
    def bundle_boundaries(self) -> tuple[str, ...] | None:
        """The bundle boundaries after a split; None: the bundles of `Policies` apply."""
        found = self.bundles
        return tuple(found.boundaries) if found is not None and found.boundaries else None

    @classmethod
    def read(cls, path: str, raw: bytes) -> LocalPolicies:
        """The reading side for placement, lookup and the audit, tolerant of what another
        tool wrote inside the document: an affinity group that is not an object reads as no
        groups (its group lists that are not strings as absent), an anti-affinity group that
        is not a string as none, bundle boundaries that are not strings are skipped, bundles
        that are not an object as none (absent: Pulsar's one bundle). A
        document that is not a JSON object is `ContentDeserializationError`."""
        data = stored_object(path, raw)
        affinity = data.get("bookieAffinityGroup")
        data["bookieAffinityGroup"] = (
            {
                key: bool(value) if key.endswith("Strict") else value
                for key, value in affinity.items()
                if isinstance(value, str) or key.endswith("Strict")
            }
            if isinstance(affinity, Mapping)
            else None
        )
        if not isinstance(data.get("namespaceAntiAffinityGroup"), str):
            data["namespaceAntiAffinityGroup"] = None
        bundles = data.get("bundles", _one_bundle().dump())
        if isinstance(bundles, Mapping):
            boundaries = bundles.get("boundaries")
            count = bundles.get("numBundles")
            data["bundles"] = {
                "boundaries": (
                    [b for b in boundaries if isinstance(b, str)]
                    if isinstance(boundaries, list)
                    else None
                ),
                **(
                    {"numBundles": count}
                    if isinstance(count, int) and not isinstance(count, bool)
                    else {}
                ),
            }
        else:
            data["bundles"] = None
        return cls.from_stored(path, data)

    def dump(self) -> dict[str, Any]:
        data = super().dump()
        if self.bookieAffinityGroup is not None:
            data["bookieAffinityGroup"] = self.bookieAffinityGroup.dump()
        return data


# -- namespace isolation policies -------------------------------------------------------------


class AutoFailoverPolicyData(PulsarModel):
    model_config = ConfigDict(json_schema_extra={"examples": [EXAMPLE_FAILOVER]})

    # Jackson writes AutoFailoverPolicyDataImpl's `parameters` before `policy_type`
    parameters: JavaStringMap = Field(
        default=None, description="min_limit and usage_threshold, as strings of integers"
    )
    policy_type: JavaString = Field(default=None, description="Only min_available exists")



class NamespaceIsolationData(PulsarModel):
    java_class = "org.apache.pulsar.common.policies.data.NamespaceIsolationDataImpl"
    model_config = ConfigDict(json_schema_extra={"examples": [EXAMPLE_ISOLATION]})

    namespaces: JavaStringList = Field(default=None, description="Regexes of tenant/namespace")
    primary: JavaStringList = Field(default=None, description="Regexes of primary brokers")
    secondary: JavaStringList = Field(default=None, description="Regexes of secondary brokers")
    auto_failover_policy: AutoFailoverPolicyData | None = Field(
        default=None, description="When to fall back to the secondary brokers"
    )
    unload_scope: Literal["all_matching", "none", "changed"] | None = Field(
        default=None, description="Which namespaces a policy change unloads (Pulsar 3.x)"
    )

    _unload_scope = field_validator("unload_scope", mode="before")(
        _unknown_enum_as_null(("all_matching", "none", "changed"))
    )


class BrokerNamespaceIsolationData(PulsarModel):
    model_config = ConfigDict(json_schema_extra={"examples": [EXAMPLE_BROKER_ISOLATION]})

    brokerName: str = Field(description="Broker id, host:webServicePort")
    policyName: JavaString = Field(default=None, description="The isolation policy naming it")
    primary: JavaBoolean = Field(
        default=False, alias="primary", description="Primary (else secondary)"
    )
    namespaceRegex: list[str] = Field(
        default_factory=list, description="Namespaces the policy pins to the broker"
    )
