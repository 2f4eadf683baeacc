"""The broker-side BookKeeper ledger client: placement-driven create, quorum adds with
in-order acknowledgement and piggy-backed LAC, close by compare-and-swap, verified reads."""

from storage.ledger.bookies import BookieConnection, BookiePool
from storage.ledger.client import LedgerClient, LedgerSpec, MetadataBackend, VersionConflict
from storage.ledger.errors import (
    AddFailed,
    LedgerClosed,
    LedgerError,
    LedgerFenced,
    MetadataConflict,
    NoSuchEntry,
    NoSuchLedger,
    ReadFailed,
)
from storage.ledger.handle import Entry, ReadableLedger, WriteHandle, master_key
from storage.ledger.metadata import LedgerMetadata, LedgerState

__all__ = [
    "AddFailed",
    "BookieConnection",
    "BookiePool",
    "Entry",
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
    "VersionConflict",
    "WriteHandle",
    "master_key",
]
