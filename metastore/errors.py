"""Errors of the metadata store.

MetastoreError
├── NotFound            the key does not exist (or vanished during an update)
├── BadVersion          a compare-and-swap lost: the key changed since it was read
│   └── AlreadyExists   a create found the key already there
├── Unavailable         the store did not answer in time or refused the connection
│   ├── OutcomeUnknown  a write's call failed and whether it was applied cannot be known
│   └── Unanswered      a write's call failed after it may have been sent (to be settled)
├── ContentDeserializationError  a stored value an update must parse is not JSON
├── MetadataFormatError  a stored binary/text record (ledger metadata, ...) cannot be decoded
├── InvalidValue        an update's new value cannot be encoded (fails that update only)
└── ValueTooLarge       etcd refused a request over its size limit (--max-request-bytes)
"""

from __future__ import annotations


class MetastoreError(Exception):
    """Base of every error raised by `metastore`."""


class NotFound(MetastoreError):
    def __init__(self, path: str) -> None:
        super().__init__(f"key not found: {path}")
        self.path = path


class BadVersion(MetastoreError):
    def __init__(self, path: str) -> None:
        super().__init__(f"concurrent modification of {path}")
        self.path = path


class AlreadyExists(BadVersion):
    pass


class Unavailable(MetastoreError):
    """The store could not be reached; nothing was written (a write that may have been is
    `OutcomeUnknown`)."""


class OutcomeUnknown(Unavailable):
    """A write's call failed after the request may have reached the store, and within the
    time allowed for finding out it could not be known whether it was applied: it may have
    been, or may still be. Readers re-read (watch-fed caches follow the store)."""

    def __init__(self, path: str) -> None:
        super().__init__(
            f"metadata store unavailable: the outcome of the write of {path} is unknown "
            "(it may have been applied); read it again before retrying"
        )
        self.path = path


class Unanswered(Unavailable):
    """A write's call failed after its request may have reached the store: it may have been
    applied. The store settles it (`metastore.settling`) into the applied write's answer,
    `Unavailable` or `OutcomeUnknown`; `session`: the ZooKeeper session that sent it."""

    def __init__(self, message: str, session: int | None) -> None:
        super().__init__(message)
        self.session = session


class ContentDeserializationError(MetastoreError):
    """The stored value is not the JSON an update expects (written by another tool); the
    update writes nothing rather than replacing a document it cannot read."""

    def __init__(self, path: str) -> None:
        super().__init__(f"Failed to deserialize payload for key '{path}'")  # Pulsar's text
        self.path = path


class MetadataFormatError(MetastoreError, ValueError):
    """A stored value is not in the binary or text format its key holds (ledger metadata,
    ManagedLedgerInfo, a bookie registration): written by something else, truncated, or in a
    variant this project does not read (a compressed ManagedLedgerInfo)."""

    def __init__(self, what: str, problem: str) -> None:
        super().__init__(f"invalid {what}: {problem}")
        self.what = what
        self.problem = problem


class InvalidValue(MetastoreError):
    """A new value cannot be written (e.g. text with a lone UTF-16 surrogate cannot be encoded
    as UTF-8); only the update that produced it fails."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"Cannot encode the new value of '{path}': {reason}")
        self.path = path
        self.reason = reason


# etcd's default `--max-request-bytes` (1.5 MiB); one request holds a whole document.
ETCD_DEFAULT_MAX_REQUEST_BYTES = 1536 * 1024


class ValueTooLarge(MetastoreError):
    """etcd refused the write as larger than its request limit; nothing was written."""

    def __init__(self, path: str | None = None) -> None:
        where = f" for key '{path}'" if path else ""
        super().__init__(
            f"The metadata store refused the write{where}: the document is larger than etcd's "
            f"request limit (--max-request-bytes, default {ETCD_DEFAULT_MAX_REQUEST_BYTES} "
            "bytes = 1.5 MiB)"
        )
        self.path = path


class Compacted(MetastoreError):
    """A watch asked for changes from a revision etcd has already compacted away: the history
    before `compact_revision` is gone, the reader must re-read the current state."""

    def __init__(self, compact_revision: int) -> None:
        super().__init__(f"revision compacted: history before {compact_revision} is gone")
        self.compact_revision = compact_revision
