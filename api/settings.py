"""Service settings under Pulsar's `broker.conf` key names.

Layers, lowest first: defaults, a `broker.conf`-style file (`key=value`, `#` comments),
environment variables `PULSAR_<key>` (e.g. `PULSAR_clusterName`; the upper-case form
`PULSAR_CLUSTERNAME` is accepted too), command-line flags. Unknown keys in the file are kept
(Pulsar's broker.conf has hundreds) but ignored.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from javaformats import parse_broker_conf
from storage.autorecovery import AutoRecoveryConfig, AutoRecoveryConfigError

TOKEN_PROVIDER = "org.apache.pulsar.broker.authentication.AuthenticationProviderToken"
TLS_PROVIDER = "org.apache.pulsar.broker.authentication.AuthenticationProviderTls"
# Pulsar's Commands.MESSAGE_SIZE_FRAME_PADDING: room for a frame's own headers beyond a message
MESSAGE_SIZE_FRAME_PADDING = 10 * 1024


@dataclass(frozen=True)
class ConnectionLimits:
    """Bounds on the admin port's connections (api.http.connection_limits applies them)."""

    max_connections: int = 2048  # maxHttpServerConnections; <= 0: no limit
    idle_timeout: float = 30.0  # httpServerIdleTimeoutSeconds
    header_timeout: float = 30.0  # httpServerHeaderTimeoutSeconds
    body_timeout: float = 60.0  # httpServerBodyTimeoutSeconds


class SettingsError(ValueError):
    """A setting has a value of the wrong type or a combination is unsafe."""


@dataclass(frozen=True)
class Settings:
    clusterName: str = "standalone"
    metadataStoreUrl: str = ""
    metadataStoreOperationTimeoutSeconds: int = 5
    webServicePort: int = 8080
    bindAddress: str = "0.0.0.0"
    advertisedAddress: str = "localhost"
    brokerServicePort: int = 6650
    dataDir: str = "data"
    # Ours (Pulsar has no such keys): see README "Configuration".
    initializeClusterMetadata: bool = True
    accessLogEnabled: bool = True
    embeddedEtcdClientPort: int = 2379
    embeddedEtcdPeerPort: int = 2380

    authenticationEnabled: bool = False
    authorizationEnabled: bool = False
    superUserRoles: tuple[str, ...] = ()
    authenticationProviders: tuple[str, ...] = ()
    tokenSecretKey: str = ""
    tokenPublicKey: str = ""
    tokenPublicAlg: str = "RS256"
    tokenAuthClaim: str = ""
    tokenAudienceClaim: str = ""
    tokenAudience: str = ""
    # 0 (Pulsar: empty): no TLS listener.
    webServicePortTls: int = 0
    tlsCertificateFilePath: str = ""
    tlsKeyFilePath: str = ""
    tlsTrustCertsFilePath: str = ""
    tlsRequireTrustedClientCertOnConnect: bool = False
    # /metrics needs authentication (any role) when authentication is on; Pulsar's default
    authenticateMetricsEndpoint: bool = False

    bookkeeperClientRackawarePolicyEnabled: bool = True
    bookkeeperClientRegionawarePolicyEnabled: bool = False
    bookkeeperClientMinNumRacksPerWriteQuorum: int = 2
    bookkeeperClientEnforceMinNumRacksPerWriteQuorum: bool = False
    bookkeeperDiskWeightBasedPlacementEnabled: bool = False
    bookkeeperClientIsolationGroups: str = ""
    bookkeeperClientSecondaryIsolationGroups: str = ""
    strictBookieAffinityEnabled: bool = False
    failureDomainsEnabled: bool = False

    managedLedgerDefaultEnsembleSize: int = 2
    managedLedgerDefaultWriteQuorum: int = 2
    managedLedgerDefaultAckQuorum: int = 2
    managedLedgerMaxEnsembleSize: int = 5
    managedLedgerMaxWriteQuorum: int = 5
    managedLedgerMaxAckQuorum: int = 5
    managedLedgerDefaultMarkDeleteRateLimit: float = 1.0
    managedLedgerMaxEntriesPerLedger: int = 50000
    managedLedgerMaxSizePerLedgerMbytes: int = 2048
    managedLedgerMinLedgerRolloverTimeMinutes: int = 10
    managedLedgerMaxLedgerRolloverTimeMinutes: int = 240
    # A message's size is its metadata plus payload (as Pulsar's client counts it); the
    # bookie client's frame limit is maxMessageSize + 10 KiB (Pulsar's
    # Commands.MESSAGE_SIZE_FRAME_PADDING, its nettyMaxFrameSizeBytes), so whatever is
    # accepted fits a frame.
    maxMessageSize: int = 5 * 1024 * 1024
    # Pulsar's: bytes of messages being stored at once, over all producers; a produce request
    # waits for room (README "Producing over REST").
    maxMessagePublishBufferSizeInMB: int = 128
    # Ours: messages in one REST produce request (400 above it).
    maxMessagesPerProduceRequest: int = 10000
    allowAutoTopicCreation: bool = True
    # Pulsar's: partitions a partitioned topic may have (0: no limit).
    maxNumPartitionsPerPartitionedTopic: int = 0
    defaultNumberOfNamespaceBundles: int = 4
    # Pulsar's: what GET of a namespace's policies answers for an unset
    # `is_allow_auto_update_schema` (the field was a boolean before 2.8).
    isAllowAutoUpdateSchemaEnabled: bool = True
    maxTenants: int = 0
    maxNamespacesPerTenant: int = 0
    forceDeleteTenantAllowed: bool = False
    forceDeleteNamespaceAllowed: bool = False
    # Largest request body accepted (413 above it); <= 0: no limit, as Pulsar's -1. The
    # default admits a 10,000-bookie rack map (~1 MB) and stays near etcd's 1.5 MiB limit.
    httpMaxRequestSize: int = 2 * 1024 * 1024
    # Connections of the admin port (README "Request limits"): Pulsar's
    # maxHttpServerConnections (<= 0: no limit) and httpServerAcceptQueueSize; ours (Pulsar's
    # Jetty has a fixed 30 s idle timeout): a connection that sends nothing, or does not
    # complete its request's headers or body, within these is closed (<= 0: never).
    # Pulsar's: take the client's address from X-Forwarded-For (from any peer) only when true;
    # otherwise the header is ignored (change history, the per-client rate limit).
    webServiceTrustXForwardedFor: bool = False
    maxHttpServerConnections: int = 2048
    httpServerAcceptQueueSize: int = 8192
    httpServerIdleTimeoutSeconds: float = 30.0
    httpServerHeaderTimeoutSeconds: float = 30.0
    httpServerBodyTimeoutSeconds: float = 60.0
    # Ours: an SSE watcher (README "Watch") is dropped after a write blocked this long, and
    # told to resync when the changes waiting for it hold more than this many bytes.
    watchSendTimeoutSeconds: float = 60.0
    watchMaxQueuedBytes: int = 8 * 1024 * 1024
    # Ours: the change history of admin writes (README "Change history"). Records beyond
    # changeHistoryMaxRecords (<= 0: no limit) or older than changeHistoryMaxAgeSeconds
    # (<= 0: no limit) are pruned every changeHistoryPruneIntervalSeconds, in the background.
    changeHistoryEnabled: bool = True
    changeHistoryMaxRecords: int = 10000
    changeHistoryMaxAgeSeconds: int = 0
    changeHistoryPruneIntervalSeconds: float = 10.0
    # Ours: a per-client limit of write requests (PUT, POST, DELETE, PATCH), by role when
    # authenticated, else by address; 429 with Retry-After above it. Pulsar's
    # httpRequestsLimitEnabled / httpRequestsMaxPerSecond limit all requests of all clients
    # together; see README "Write rate limit per client".
    httpWriteRequestsPerClientLimitEnabled: bool = False
    httpWriteRequestsPerClientMaxPerSecond: float = 100.0

    extra: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.clusterName:
            raise SettingsError("clusterName must not be empty")
        if self.managedLedgerDefaultEnsembleSize < self.managedLedgerDefaultWriteQuorum:
            raise SettingsError(
                "managedLedgerDefaultEnsembleSize must be >= managedLedgerDefaultWriteQuorum"
            )
        if self.managedLedgerDefaultWriteQuorum < self.managedLedgerDefaultAckQuorum:
            raise SettingsError(
                "managedLedgerDefaultWriteQuorum must be >= managedLedgerDefaultAckQuorum"
            )

        if self.authenticationEnabled:
            unknown = set(self.authenticationProviders) - {TOKEN_PROVIDER, TLS_PROVIDER}
            if unknown or not self.authenticationProviders:
                raise SettingsError(
                    f"authenticationEnabled needs authenticationProviders={TOKEN_PROVIDER} "
                    f"and/or {TLS_PROVIDER} (the providers this service has)"
                )
            if TOKEN_PROVIDER in self.authenticationProviders and not (
                self.tokenSecretKey or self.tokenPublicKey
            ):
                raise SettingsError("the token provider needs tokenSecretKey or tokenPublicKey")
            if TLS_PROVIDER in self.authenticationProviders and not (
                self.webServicePortTls and self.tlsTrustCertsFilePath
            ):
                raise SettingsError(
                    "the TLS provider needs webServicePortTls and tlsTrustCertsFilePath (the CA "
                    "that client certificates are checked against)"
                )
        if self.httpWriteRequestsPerClientMaxPerSecond <= 0:
            raise SettingsError("httpWriteRequestsPerClientMaxPerSecond must be positive")
        if self.changeHistoryPruneIntervalSeconds <= 0:
            raise SettingsError("changeHistoryPruneIntervalSeconds must be positive")
        for name in ("maxMessageSize", "maxMessagePublishBufferSizeInMB",
                     "maxMessagesPerProduceRequest"):
            if getattr(self, name) <= 0:
                raise SettingsError(f"{name} must be positive")
        if self.webServicePortTls and not (self.tlsCertificateFilePath and self.tlsKeyFilePath):
            raise SettingsError("webServicePortTls needs tlsCertificateFilePath and tlsKeyFilePath")

    @property
    def connection_limits(self) -> ConnectionLimits:
        return ConnectionLimits(
            max_connections=self.maxHttpServerConnections,
            idle_timeout=self.httpServerIdleTimeoutSeconds,
            header_timeout=self.httpServerHeaderTimeoutSeconds,
            body_timeout=self.httpServerBodyTimeoutSeconds,
        )

    @property
    def bookie_frame_limit(self) -> int:
        """The bookie client's `nettyMaxFrameSizeBytes`: maxMessageSize plus Pulsar's frame
        padding, so that every message the service accepts fits one add frame."""
        return self.maxMessageSize + MESSAGE_SIZE_FRAME_PADDING

    @property
    def broker_id(self) -> str:
        """This service's id as a broker's: `advertisedAddress:webServicePort`."""
        return f"{self.advertisedAddress}:{self.webServicePort}"

    @property
    def autorecovery(self) -> AutoRecoveryConfig:
        """BookKeeper's auto-recovery keys (`autoRecoveryDaemonEnabled`,
        `lostBookieRecoveryDelay`, `auditorPeriodic*`, ...) from this configuration; their one
        definition, with upstream's defaults, is `storage.autorecovery.AutoRecoveryConfig`."""
        return AutoRecoveryConfig.from_conf(self.extra)

    def runtime_configuration(self) -> dict[str, str]:
        """Every key as a string (secrets included: `api.auth.secrets.masked_config` is what the
        runtime-configuration endpoint answers), the auto-recovery keys with their values."""
        autorecovery = self.autorecovery
        values = {f.name: _to_text(getattr(autorecovery, f.name)) for f in fields(autorecovery)}
        values.update(self.extra)
        for f in fields(self):
            if f.name != "extra":
                values[f.name] = _to_text(getattr(self, f.name))
        return values

    def with_overrides(self, **overrides: Any) -> Settings:
        return dataclasses.replace(self, **overrides)


KNOWN_KEYS = {f.name: f for f in fields(Settings) if f.name != "extra"}


def _to_text(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, tuple):
        return ",".join(value)
    return str(value)


def _parse(key: str, raw: str) -> Any:
    kind = KNOWN_KEYS[key].type
    text = raw.strip()
    try:
        if kind == "bool":
            if text.lower() not in ("true", "false"):
                raise ValueError(text)
            return text.lower() == "true"
        if kind == "int":
            return int(text) if text else KNOWN_KEYS[key].default  # Pulsar's `key=`
        if kind == "float":
            return float(text)
        if kind == "tuple[str, ...]":
            return tuple(item.strip() for item in text.split(",") if item.strip())
    except ValueError as exc:
        raise SettingsError(f"invalid value for {key} ({kind}): {raw!r}") from exc
    return text


def read_conf_file(path: Path) -> dict[str, str]:
    try:
        return parse_broker_conf(path.read_text(), str(path))
    except ValueError as exc:
        raise SettingsError(str(exc)) from exc


def env_overrides(environ: Mapping[str, str]) -> dict[str, str]:
    by_upper = {key.upper(): key for key in KNOWN_KEYS}
    values: dict[str, str] = {}
    for name, value in environ.items():
        if not name.startswith("PULSAR_"):
            continue
        key = name.removeprefix("PULSAR_")
        if key in KNOWN_KEYS:
            values[key] = value
        elif key in by_upper:
            values[by_upper[key]] = value
    return values


def load_settings(
    conf_file: Path | None = None,
    environ: Mapping[str, str] | None = None,
    flags: Mapping[str, str] | None = None,
) -> Settings:
    """Merge file < environment < flags (all as text, parsed once at the end)."""
    raw: dict[str, str] = {}
    if conf_file is not None:
        raw.update(read_conf_file(conf_file))
    raw.update(env_overrides(os.environ if environ is None else environ))
    raw.update(flags or {})
    known = {key: _parse(key, value) for key, value in raw.items() if key in KNOWN_KEYS}
    extra = {key: value for key, value in raw.items() if key not in KNOWN_KEYS}
    settings = Settings(**known, extra=extra)
    try:
        settings.autorecovery  # noqa: B018 - a bad auto-recovery value fails at start
    except AutoRecoveryConfigError as exc:
        raise SettingsError(str(exc)) from exc
    return settings
