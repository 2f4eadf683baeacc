"""Auto-recovery: the auditor (one per cluster, elected through etcd) marks ledgers that
lost a replica or break their recorded placement policy; replication workers copy the lost
fragments to bookies that policy accepts. Keys and formats as BookKeeper's and Pulsar's."""

from metastore.repositories.underreplication import AUDITOR_LEADER, Mark, UnderReplication
from storage.autorecovery.auditor import Auditor, AuditorStats, ledger_adheres, segment_adheres
from storage.autorecovery.checker import CheckProgress
from storage.autorecovery.config import AutoRecoveryConfig, AutoRecoveryConfigError
from storage.autorecovery.decommission import Decommissions, DecommissionState
from storage.autorecovery.plan_repair import PlannedMove, RepairProgress, apply_plan
from storage.autorecovery.registry import registered_bookies
from storage.autorecovery.service import AutoRecovery
from storage.autorecovery.worker import Deferred, ReplicationWorker, Stale, Waiting

__all__ = [
    "AUDITOR_LEADER",
    "Auditor",
    "AuditorStats",
    "AutoRecovery",
    "AutoRecoveryConfig",
    "AutoRecoveryConfigError",
    "CheckProgress",
    "DecommissionState",
    "Decommissions",
    "Deferred",
    "Mark",
    "PlannedMove",
    "RepairProgress",
    "ReplicationWorker",
    "Stale",
    "UnderReplication",
    "Waiting",
    "apply_plan",
    "ledger_adheres",
    "registered_bookies",
    "segment_adheres",
]
