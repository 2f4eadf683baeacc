"""The one condition type of a guarded etcd transaction (`MetadataStore.commit`)."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class GuardKind(enum.Enum):
    REVISION = "revision"  # the key is still at mod_revision `revision` (0: still absent)
    TREE = "tree"  # no key under `path + "/"` was written after `revision`
    VALUE = "value"  # the key holds exactly `value` (None: is absent)


@dataclass(frozen=True)
class Guard:
    """A condition of `MetadataStore.commit`: by default the key `path` is still at
    mod_revision `revision` (0: still absent); with `tree=True`, no key under `path + "/"`
    was written after `revision` (keys deleted since do not fail it). `Guard.holds(path,
    value)` compares the value itself instead (group commit's chained batches)."""

    path: str
    revision: int = 0
    tree: bool = False
    value: bytes | None = None
    by_value: bool = False

    @classmethod
    def holds(cls, path: str, value: bytes | None) -> Guard:
        return cls(path, value=value, by_value=True)

    @property
    def kind(self) -> GuardKind:
        if self.by_value:
            return GuardKind.VALUE
        return GuardKind.TREE if self.tree else GuardKind.REVISION
