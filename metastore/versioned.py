"""What the store knows of a key: a value at a revision, or that a cache does not hold it;
a range read at a revision, and a key's change as a watch reports it (on either backend)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Versioned:
    """A value and the etcd `mod_revision` it was read at."""

    value: bytes
    revision: int


class NotCached:
    """A cache's answer for a key it does not hold (watch not live, or not its range)."""


NOT_CACHED = NotCached()


@dataclass(frozen=True)
class RangeSnapshot:
    """Every key of a range (by full path) and the store revision the read was made at."""

    entries: dict[str, Versioned]
    revision: int


@dataclass(frozen=True)
class WatchEvent:
    """A change of one key: its new value (None: deleted) at `revision`."""

    path: str
    value: bytes | None
    revision: int

    @property
    def deleted(self) -> bool:
        return self.value is None
