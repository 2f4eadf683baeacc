"""Auto-recovery: the auditor (one per cluster, elected through etcd) marks ledgers that
lost a replica or break their recorded placement policy; replication workers copy the lost
fragments to bookies that policy accepts. Keys and formats as BookKeeper's and Pulsar's."""

from storage.autorecovery.auditor import Auditor, AuditorStats, ledger_adheres, segment_adheres
from storage.autorecovery.config import AutoRecoveryConfig, AutoRecoveryConfigError
from storage.autorecovery.marks import AUDITOR_LEADER, Mark, UnderReplication
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
    "Deferred",
    "Mark",
    "ReplicationWorker",
    "Stale",
    "UnderReplication",
    "Waiting",
    "ledger_adheres",
    "registered_bookies",
    "segment_adheres",
]
