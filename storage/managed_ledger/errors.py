"""Errors of managed ledgers.

    ManagedLedgerError
    ├── ManagedLedgerNotFound     no ManagedLedgerInfo at the topic's key
    ├── ManagedLedgerClosed       the managed ledger was closed or deleted
    └── InvalidPosition           a ledger:entry that is not part of this managed ledger
"""

from __future__ import annotations


class ManagedLedgerError(Exception):
    pass


class ManagedLedgerNotFound(ManagedLedgerError):
    def __init__(self, name: str) -> None:
        super().__init__(f"Managed ledger not found: {name}")
        self.name = name


class ManagedLedgerClosed(ManagedLedgerError):
    def __init__(self, name: str) -> None:
        super().__init__(f"ManagedLedger {name} has already been closed")
        self.name = name


class InvalidPosition(ManagedLedgerError):
    pass
