"""Errors of the broker-side ledger client.

    LedgerError                      a ledger operation that cannot be done
    ├── NoSuchLedger                 no metadata at the ledger's key
    ├── LedgerClosed                 the ledger is closed (or the handle was closed): no more adds
    ├── LedgerFenced                 a bookie fenced the ledger (someone is recovering it)
    ├── EntryTooLarge                an entry longer than the bookie frame limit; refused alone,
    │                                before it is sent (the handle goes on)
    ├── AddFailed                    an add could not reach its ack quorum; the handle is broken
    │   └── EnsembleChangeFailed     a failed bookie could not be replaced under the ledger's
    │                                recorded policy (`constraint` names what was not met)
    ├── RecoveryFailed               recovery could not fence enough bookies or read an entry
    ├── NoSuchEntry                  the entry id is outside the ledger's readable range, or
    │                                enough replicas of its write set say it does not exist
    ├── ReadFailed                   every replica of the entry's write set failed to serve it
    ├── MetadataConflict             the metadata changed under a close in a way that forbids it
    └── ClientClosed                 the client was closed: its handles add nothing more, and
                                     the connections it closed are no bookie's failure

A failed bookie is replaced by an ensemble change (`storage.ledger.ensemble`); only when no
bookie the ledger's recorded policy allows is left does the add fail (`EnsembleChangeFailed`),
and so does every add after it.
"""

from __future__ import annotations


class LedgerError(Exception):
    """Base of every error raised by `storage.ledger`."""


class NoSuchLedger(LedgerError):
    def __init__(self, ledger_id: int) -> None:
        super().__init__(f"No such ledger exists on Metadata Server: {ledger_id}")
        self.ledger_id = ledger_id


class LedgerClosed(LedgerError):
    def __init__(self, ledger_id: int) -> None:
        super().__init__(f"Attempt to write to a closed ledger: {ledger_id}")
        self.ledger_id = ledger_id


class LedgerFenced(LedgerError):
    def __init__(self, ledger_id: int, bookie: str) -> None:
        super().__init__(f"Ledger {ledger_id} was fenced by bookie {bookie}")
        self.ledger_id = ledger_id
        self.bookie = bookie


class EntryTooLarge(LedgerError):
    """An entry whose add frame would exceed nettyMaxFrameSizeBytes: nothing was sent."""

    def __init__(self, ledger_id: int, size: int, limit: int) -> None:
        super().__init__(f"Entry of {size} bytes for ledger {ledger_id} exceeds the largest "
                         f"entry a bookie frame holds ({limit} bytes, nettyMaxFrameSizeBytes)")
        self.ledger_id = ledger_id
        self.size = size
        self.limit = limit


class AddFailed(LedgerError):
    """`failures` maps each failed bookie id to what went wrong."""

    def __init__(self, ledger_id: int, entry_id: int, failures: dict[str, str]) -> None:
        detail = "; ".join(f"{b}: {why}" for b, why in failures.items())
        super().__init__(f"Add of entry {entry_id} to ledger {ledger_id} failed: {detail}")
        self.ledger_id = ledger_id
        self.entry_id = entry_id
        self.failures = failures


class EnsembleChangeFailed(AddFailed):
    """No replacement for a failed bookie under the ledger's recorded placement policy."""

    def __init__(self, ledger_id: int, entry_id: int, failures: dict[str, str],
                 why: str, constraint: str = "") -> None:
        super().__init__(ledger_id, entry_id, failures)
        self.args = (f"{self.args[0]}; no replacement bookie: {why}",)
        self.why = why
        self.constraint = constraint


class RecoveryFailed(LedgerError):
    def __init__(self, ledger_id: int, why: str) -> None:
        super().__init__(f"Recovery of ledger {ledger_id} failed: {why}")
        self.ledger_id = ledger_id
        self.why = why


class NoSuchEntry(LedgerError):
    def __init__(self, ledger_id: int, entry_id: int, why: str = "") -> None:
        super().__init__(
            f"No such entry {entry_id} in ledger {ledger_id}" + (f": {why}" if why else "")
        )
        self.ledger_id = ledger_id
        self.entry_id = entry_id


class ReadFailed(LedgerError):
    def __init__(self, ledger_id: int, entry_id: int, failures: dict[str, str]) -> None:
        detail = "; ".join(f"{b}: {why}" for b, why in failures.items())
        super().__init__(f"Read of entry {entry_id} of ledger {ledger_id} failed: {detail}")
        self.ledger_id = ledger_id
        self.entry_id = entry_id
        self.failures = failures


class MetadataConflict(LedgerError):
    pass


class ClientClosed(LedgerError):
    """The ledger client (its bookie connections) was closed (upstream's
    `BKClientClosedException`): a handle's copies still unanswered then are not a bookie's
    failure, so no ensemble change follows; the handle's pending adds fail with this."""

    def __init__(self) -> None:
        super().__init__("BookKeeper client is closed")
