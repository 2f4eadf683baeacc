"""A managed ledger's settings, under the broker.conf keys Pulsar reads them from."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from placement import AffinityGroups


@dataclass(frozen=True)
class RolloverPolicy:
    """When the current ledger is closed and a new one started (ManagedLedgerConfig).

    Full = entries >= `max_entries` or bytes >= `max_size_mb` MiB, or older than
    `max_rollover_minutes`; a full ledger rolls over only once it is older than
    `min_rollover_minutes` (0: at once), as `ManagedLedgerImpl.currentLedgerIsFull`.
    """

    max_entries: int = 50_000  # managedLedgerMaxEntriesPerLedger
    max_size_mb: int = 2048  # managedLedgerMaxSizePerLedgerMbytes
    min_rollover_minutes: float = 10  # managedLedgerMinLedgerRolloverTimeMinutes
    max_rollover_minutes: float = 240  # managedLedgerMaxLedgerRolloverTimeMinutes

    @classmethod
    def from_broker_conf(cls, conf: Mapping[str, Any]) -> RolloverPolicy:
        def get(key: str, default: float) -> Any:
            value = conf.get(key)
            return default if value in (None, "") else value

        return cls(
            max_entries=int(get("managedLedgerMaxEntriesPerLedger", 50_000)),
            max_size_mb=int(get("managedLedgerMaxSizePerLedgerMbytes", 2048)),
            min_rollover_minutes=float(get("managedLedgerMinLedgerRolloverTimeMinutes", 10)),
            max_rollover_minutes=float(get("managedLedgerMaxLedgerRolloverTimeMinutes", 240)),
        )

    def is_full(self, entries: int, size: int, age_ms: float) -> bool:
        space = entries >= self.max_entries or size >= self.max_size_mb * 1024 * 1024
        too_old = age_ms >= self.max_rollover_minutes * 60_000
        if not (space or too_old):
            return False
        min_ms = self.min_rollover_minutes * 60_000
        return age_ms > min_ms if min_ms > 0 else True


@dataclass(frozen=True)
class ManagedLedgerConfig:
    """E/Qw/Qa of new ledgers, the namespace's isolation groups, and the rollover policy."""

    ensemble_size: int = 2
    write_quorum: int = 2
    ack_quorum: int = 2
    # the namespace's own groups (None: the broker-wide ones apply, inside placement)
    affinity: AffinityGroups | None = None
    # what each ledger records as EnsemblePlacementPolicyConfig (None: nothing, as Pulsar
    # without a namespace group and without strictBookieAffinityEnabled)
    recorded_affinity: AffinityGroups | None = None
    rollover: RolloverPolicy = RolloverPolicy()
