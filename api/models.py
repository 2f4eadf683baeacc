"""Pulsar's JSON shapes, defined once, with Pulsar's field names.

These are what the API accepts and returns and exactly what `metastore/` writes to etcd:
`dump()` drops null fields, as Pulsar's ObjectMapper (NON_NULL) does. Stored documents that
Pulsar may extend (`Policies`, `LocalPolicies`) keep unknown fields on a round trip, so a
document a real broker wrote is never truncated by us. Unknown input fields are ignored.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, field_validator

from metastore.codec import dump_json
from metastore.errors import ContentDeserializationError

M = TypeVar("M", bound="PulsarModel")

# Numbers as Java holds them: a field Pulsar declares `int` is 32-bit, `long` 64-bit.
JavaInt = Annotated[int, Field(ge=-(2**31), le=2**31 - 1)]
JavaLong = Annotated[int, Field(ge=-(2**63), le=2**63 - 1)]


def _unknown_enum_as_null(allowed: tuple[str, ...]) -> Any:
    """Pulsar reads an unknown enum value as null (READ_UNKNOWN_ENUM_VALUES_AS_NULL)."""

    def read(value: Any) -> Any:
        return value if value is None or value in allowed else None

    return read


def _java_string(value: Any) -> Any:
    """Jackson coerces a JSON scalar into a String field: 1 -> "1", true -> "true"."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return json.dumps(value)
    return value


def _java_strings(value: Any) -> Any:
    if isinstance(value, list):
        return [_java_string(item) for item in value]
    if isinstance(value, dict):
        return {key: _java_string(item) for key, item in value.items()}
    return value


class PulsarModel(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="ignore")

    def dump(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)

    def to_bytes(self) -> bytes:
        return dump_json(self.dump())

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
    rack: str | None = Field(default=None, description="Rack path, e.g. /rack1 or /region1/rack1")
    hostname: str | None = Field(default=None, description="Bookie hostname (optional)")


class RawBookieInfo(PulsarModel):
    bookieId: str = Field(description="Bookie id in host:port form")


class BookiesClusterInfo(PulsarModel):
    bookies: list[RawBookieInfo]


# `/bookies`: {group: {bookieId: BookieInfo}}, both levels sorted by key (a Java TreeMap).
BookiesRackConfiguration = dict[str, dict[str, BookieInfo]]


# -- clusters and failure domains -------------------------------------------------------------


class ClusterData(PulsarModel):
    serviceUrl: str | None = None
    serviceUrlTls: str | None = None
    brokerServiceUrl: str | None = None
    brokerServiceUrlTls: str | None = None
    proxyServiceUrl: str | None = None
    authenticationPlugin: str | None = None
    authenticationParameters: str | None = None
    proxyProtocol: Literal["SNI"] | None = None
    peerClusterNames: list[str] | None = None
    brokerClientTlsEnabled: bool = False
    tlsAllowInsecureConnection: bool = False
    brokerClientTlsEnabledWithKeyStore: bool = False
    brokerClientTlsTrustStoreType: str | None = "JKS"
    brokerClientTlsTrustStore: str | None = None
    brokerClientTlsTrustStorePassword: str | None = None
    brokerClientTlsKeyStoreType: str | None = "JKS"
    brokerClientTlsKeyStore: str | None = None
    brokerClientTlsKeyStorePassword: str | None = None
    brokerClientTrustCertsFilePath: str | None = None
    brokerClientKeyFilePath: str | None = None
    brokerClientCertificateFilePath: str | None = None
    brokerClientSslFactoryPlugin: str | None = None
    brokerClientSslFactoryPluginParams: str | None = None
    listenerName: str | None = None

    _proxy_protocol = field_validator("proxyProtocol", mode="before")(
        _unknown_enum_as_null(("SNI",))
    )


class FailureDomain(PulsarModel):
    brokers: list[str] | None = Field(default=None, description="Broker ids, host:webServicePort")


# -- tenants and namespaces -------------------------------------------------------------------


class TenantInfo(PulsarModel):
    adminRoles: list[str] = Field(default_factory=list)
    allowedClusters: list[str] = Field(default_factory=list)


class PersistencePolicies(PulsarModel):
    bookkeeperEnsemble: JavaInt = 2
    bookkeeperWriteQuorum: JavaInt = 2
    bookkeeperAckQuorum: JavaInt = 2
    managedLedgerMaxMarkDeleteRate: float = 0.0
    managedLedgerStorageClassName: str | None = None


class BookieAffinityGroupData(PulsarModel):
    bookkeeperAffinityGroupPrimary: str | None = Field(
        default=None, description="Comma-separated primary bookie groups"
    )
    bookkeeperAffinityGroupSecondary: str | None = Field(
        default=None, description="Comma-separated secondary (fallback) bookie groups"
    )
    bookkeeperAffinityGroupStrict: bool | None = Field(
        default=None,
        strict=True,
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
    boundaries: list[str] | None = None
    numBundles: JavaInt = 0


class AuthPolicies(OpenPulsarModel):
    namespace_auth: dict[str, list[str]] = Field(default_factory=dict)
    destination_auth: dict[str, dict[str, list[str]]] = Field(default_factory=dict)
    subscription_auth_roles: dict[str, list[str]] = Field(default_factory=dict)


class Policies(OpenPulsarModel):
    """The namespace's global policies (the subset we interpret; the rest is kept as is)."""

    auth_policies: AuthPolicies = Field(default_factory=AuthPolicies)
    replication_clusters: list[str] = Field(default_factory=list)
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
    deleted: bool = False
    encryption_required: bool = False
    subscription_auth_mode: str = "None"
    offload_threshold: JavaLong = -1
    offload_threshold_in_seconds: JavaLong = -1
    schema_auto_update_compatibility_strategy: str = "Full"
    schema_compatibility_strategy: str = "UNDEFINED"
    is_allow_auto_update_schema: bool = True
    schema_validation_enforced: bool = False
    subscription_types_enabled: list[str] = Field(default_factory=list)
    properties: dict[str, str] = Field(default_factory=dict)


class LocalPolicies(OpenPulsarModel):
    """Per-cluster namespace policies at `/admin/local-policies/{tenant}/{ns}`."""

    bundles: BundlesData | None = None
    bookieAffinityGroup: BookieAffinityGroupData | None = None
    namespaceAntiAffinityGroup: str | None = None

    def dump(self) -> dict[str, Any]:
        data = super().dump()
        if self.bookieAffinityGroup is not None:
            data["bookieAffinityGroup"] = self.bookieAffinityGroup.dump()
        return data


# -- namespace isolation policies -------------------------------------------------------------


class AutoFailoverPolicyData(PulsarModel):
    policy_type: str | None = Field(default=None, description="Only min_available exists")
    parameters: dict[str, str] | None = Field(
        default=None, description="min_limit and usage_threshold, as strings of integers"
    )

    _parameters = field_validator("parameters", mode="before")(_java_strings)


class NamespaceIsolationData(PulsarModel):
    namespaces: list[str] | None = Field(default=None, description="Regexes of tenant/namespace")
    primary: list[str] | None = Field(default=None, description="Regexes of primary brokers")
    secondary: list[str] | None = Field(default=None, description="Regexes of secondary brokers")
    auto_failover_policy: AutoFailoverPolicyData | None = None
    unload_scope: Literal["all_matching", "none", "changed"] | None = None

    _strings = field_validator("namespaces", "primary", "secondary", mode="before")(_java_strings)
    _unload_scope = field_validator("unload_scope", mode="before")(
        _unknown_enum_as_null(("all_matching", "none", "changed"))
    )


class BrokerNamespaceIsolationData(PulsarModel):
    brokerName: str
    policyName: str | None = None
    primary: bool = Field(default=False, alias="primary")
    namespaceRegex: list[str] = Field(default_factory=list)
