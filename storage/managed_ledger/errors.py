"""Errors of managed ledgers.

    ManagedLedgerError
    ├── ManagedLedgerNotFound     no ManagedLedgerInfo at the topic's key
    ├── ManagedLedgerClosed       the managed ledger was closed or deleted
    ├── ManagedLedgerFenced       its key was deleted or rewritten elsewhere: it stops here
    ├── NamespaceNotWritable      its namespace is gone or marked deleted: no key is created
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


class ManagedLedgerFenced(ManagedLedgerError):
    def __init__(self, name: str) -> None:
        super().__init__(f"Attempted to use a fenced managed ledger: {name}")
        self.name = name


class NamespaceNotWritable(ManagedLedgerError):
    """The namespace's policies are absent or carry Pulsar's `deleted` mark."""

    def __init__(self, name: str, namespace: str, deleted: bool) -> None:
        state = "is being deleted" if deleted else "does not exist"
        super().__init__(f"Namespace {namespace} {state}: managed ledger {name} not created")
        self.name = name
        self.namespace = namespace
        self.deleted = deleted


class InvalidPosition(ManagedLedgerError):
    pass
