"""What the store knows of a key: a value at a revision, or that a cache does not hold it."""

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
