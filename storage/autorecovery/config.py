"""Auto-recovery settings under BookKeeper's configuration names, with its defaults
(`ServerConfiguration`; storage-and-perf.md 5.6). Read from the service's configuration
(the same `key=value` map as broker.conf keys), so a test or an operator sets them there.

Units as upstream: the check intervals and `lostBookieRecoveryDelay` in seconds, the grace
periods and back-off in milliseconds, `replicationRateByBytes` in bytes per second (-1 off).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields


class AutoRecoveryConfigError(ValueError):
    pass


@dataclass(frozen=True)
class AutoRecoveryConfig:
    autoRecoveryDaemonEnabled: bool = False
    lostBookieRecoveryDelay: int = 0
    auditorPeriodicCheckInterval: int = 604800
    auditorPeriodicBookieCheckInterval: int = 86400
    auditorPeriodicPlacementPolicyCheckInterval: int = 0
    auditorReplicasCheckInterval: int = 0
    openLedgerRereplicationGracePeriod: int = 30000
    lockReleaseOfFailedLedgerGracePeriod: int = 300000
    repairedPlacementPolicyNotAdheringBookieEnable: bool = False
    # Pulsar ships 100 in its conf/bookkeeper.conf (BookKeeper's own default is 10)
    rereplicationEntryBatchSize: int = 100
    replicationRateByBytes: int = -1
    rwRereplicateBackoffMs: int = 5000
    # the periodic data checks (storage.autorecovery.checker): ledgers checked at a time
    # (upstream's name and default) and bookie reads per second (ours; 0 = no limit)
    auditorMaxNumberOfConcurrentOpenLedgerOperations: int = 500
    auditorLedgerVerificationPercentage: int = 0  # % of each stripe read besides its ends
    auditorCheckReadsPerSecond: int = 2000
    # how long the auditor's election key and a worker's ledger locks outlive a dead process:
    # the metadata session timeout of the service (Pulsar's metadataStoreSessionTimeoutMillis)
    metadataStoreSessionTimeoutMillis: int = 30000

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, int) and not isinstance(value, bool) and value < -1:
                raise AutoRecoveryConfigError(f"{f.name} must not be negative: {value}")
        if not 0 <= self.auditorLedgerVerificationPercentage <= 100:
            raise AutoRecoveryConfigError(
                "auditorLedgerVerificationPercentage must be between 0 and 100")
        if self.rereplicationEntryBatchSize < 1:
            raise AutoRecoveryConfigError("rereplicationEntryBatchSize must be at least 1")
        if self.metadataStoreSessionTimeoutMillis < 1000:
            raise AutoRecoveryConfigError("metadataStoreSessionTimeoutMillis must be >= 1000")

    @property
    def session_ttl(self) -> int:
        """The etcd lease TTL in whole seconds."""
        return max(1, self.metadataStoreSessionTimeoutMillis // 1000)

    @classmethod
    def from_conf(cls, values: Mapping[str, str]) -> AutoRecoveryConfig:
        """The keys this class knows, parsed from configuration text; others are ignored."""
        parsed: dict[str, object] = {}
        for f in fields(cls):
            raw = values.get(f.name)
            if raw is None:
                continue
            text = str(raw).strip()
            if f.type == "bool":
                if text.lower() not in ("true", "false"):
                    raise AutoRecoveryConfigError(f"invalid value for {f.name}: {raw!r}")
                parsed[f.name] = text.lower() == "true"
            else:
                try:
                    parsed[f.name] = int(text)
                except ValueError as exc:
                    raise AutoRecoveryConfigError(
                        f"invalid value for {f.name}: {raw!r}") from exc
        return cls(**parsed)  # type: ignore[arg-type]
