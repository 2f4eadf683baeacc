"""The broker-side BookKeeper ledger client: placement-driven create, quorum adds with
in-order acknowledgement and piggy-backed LAC, ensemble change under the ledger's recorded
policy, close by compare-and-swap, fencing and recovery, verified reads."""

from storage.ledger.bookies import BookieConnection, BookiePool
from storage.ledger.client import LedgerClient, LedgerSpec, MetadataBackend, VersionConflict
from storage.ledger.errors import (
    AddFailed,
    ClientClosed,
    EnsembleChangeFailed,
    EntryTooLarge,
    LedgerClosed,
    LedgerError,
    LedgerFenced,
    MetadataConflict,
    NoSuchEntry,
    NoSuchLedger,
    ReadFailed,
    RecoveryFailed,
)
from storage.ledger.handle import Entry, ReadableLedger, WriteHandle, master_key
from storage.ledger.metadata import MANAGED_LEDGER_NAME, LedgerMetadata, LedgerState

__all__ = [
    "MANAGED_LEDGER_NAME",
    "AddFailed",
    "BookieConnection",
    "BookiePool",
    "ClientClosed",
    "EnsembleChangeFailed",
    "Entry",
    "EntryTooLarge",
    "LedgerClient",
    "LedgerClosed",
    "LedgerError",
    "LedgerFenced",
    "LedgerMetadata",
    "LedgerSpec",
    "LedgerState",
    "MetadataBackend",
    "MetadataConflict",
    "NoSuchEntry",
    "NoSuchLedger",
    "ReadFailed",
    "ReadableLedger",
    "RecoveryFailed",
    "VersionConflict",
    "WriteHandle",
    "master_key",
]
