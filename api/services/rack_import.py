"""Bulk rack configuration: a whole `BookiesRackConfiguration` applied at once.

The document is validated as a whole with the rules of a single rack write (names, Pulsar's
rack depth rule, a bookie in one group only) before anything is written; then the change is
one compare-and-swap of `/bookies` (the store's update: read, apply, write if the revision is
still the one read, else apply again to the newer document). A concurrent writer therefore
sees the import entirely or not at all, and keeps its own change (merge mode), or loses
exactly the entries the document replaces (prune mode removes every entry not in it).
`dryRun` computes the same diff against the current document and writes nothing.

A prune import is a whole-map overwrite, so it also repairs a `/bookies` that another tool
left unreadable (not JSON): every other write of the map refuses such a document with
Pulsar's "Failed to deserialize payload" 500, this one replaces it (compare-and-swap on the
revision of the bytes it replaces) and reports every entry as added.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from api.errors import PreconditionFailed
from api.naming import require_free_name
from api.services.racks import find_bookie, put_bookie, remove_bookie, sorted_config, validate_rack
from api.settings import Settings
from api.shapes.models import BookieInfo
from metastore import errors as store_errors
from metastore.documents import RackConfig
from metastore.repositories import RackConfiguration
from metastore.store import UNCHANGED, MetadataStore


@dataclass
class RackDiff:
    """What an import changes: entries added, changed (group or info) and removed, each as
    `{"bookie", "group", "rack"?, "hostname"?}` (changed: `before` and `after` of that form)."""

    added: list[dict[str, Any]] = field(default_factory=list)
    changed: list[dict[str, Any]] = field(default_factory=list)
    removed: list[dict[str, Any]] = field(default_factory=list)
    unchanged: int = 0

    @property
    def empty(self) -> bool:
        return not (self.added or self.changed or self.removed)


def _entry(bookie: str, group: str, info: dict[str, Any]) -> dict[str, Any]:
    return {"bookie": bookie, "group": group, **info}


def validate_document(document: dict[str, dict[str, BookieInfo]], settings: Settings) -> None:
    """412 with the first offending entry named; nothing is written when this raises."""
    seen: dict[str, str] = {}
    for group, bookies in document.items():
        require_free_name("Bookie group name", group)
        for bookie, info in bookies.items():
            require_free_name("Bookie id", bookie)
            if bookie in seen:
                raise PreconditionFailed(
                    f"Bookie {bookie} is listed in two groups: {seen[bookie]} and {group}"
                )
            seen[bookie] = group
            try:
                validate_rack(info.rack, settings)
            except PreconditionFailed as exc:
                raise PreconditionFailed(
                    f"{exc.reason} (bookie {bookie}, rack {info.rack!r})"
                ) from None


def apply_document(
    current: RackConfig, document: dict[str, dict[str, BookieInfo]], *, prune: bool
) -> tuple[RackConfig, RackDiff]:
    """The new configuration (built on a copy of `current`) and the diff from `current`."""
    config: RackConfig = {group: dict(bookies) for group, bookies in current.items()}
    diff = RackDiff()
    wanted: set[str] = set()
    for group in sorted(document):
        for bookie in sorted(document[group]):
            info = document[group][bookie]
            wanted.add(bookie)
            after = info.dump()
            before = find_bookie(current, bookie)
            if before is None:
                diff.added.append(_entry(bookie, group, after))
            elif before == (group, after):
                diff.unchanged += 1
                continue
            else:
                diff.changed.append(
                    {
                        "bookie": bookie,
                        "before": _entry(bookie, before[0], before[1]),
                        "after": _entry(bookie, group, after),
                    }
                )
            put_bookie(config, bookie, group, info)
    if prune:
        for group in sorted(current):
            for bookie in sorted(current[group]):
                if bookie not in wanted:
                    diff.removed.append(_entry(bookie, group, current[group][bookie]))
                    remove_bookie(config, bookie)
    return sorted_config(config), diff


class RackImportService:
    def __init__(self, store: MetadataStore, settings: Settings) -> None:
        self.store = store
        self.settings = settings
        self.rack_config = RackConfiguration(store)

    async def apply(
        self, document: dict[str, dict[str, BookieInfo]], *, dry_run: bool, prune: bool
    ) -> tuple[RackDiff, int | None]:
        """The diff and the etcd revision written (None for a dry run or no change)."""
        validate_document(document, self.settings)
        if dry_run:
            found = await self.rack_config.get()
            current = found.value if found is not None else {}
            return apply_document(current, document, prune=prune)[1], None
        outcome: list[RackDiff] = []

        def change(doc: Any) -> Any:
            current = decode_rack_config_doc(doc)
            config, diff = apply_document(current, document, prune=prune)
            outcome[:] = [diff]  # the last attempt's diff is the one written
            return UNCHANGED if diff.empty else config

        try:
            written = await self.rack_config.update(change)
        except store_errors.ContentDeserializationError:
            if not prune:
                raise
            return await self._overwrite_unreadable(document)
        diff = outcome[-1]
        return diff, (written.version if written is not None and not diff.empty else None)

    async def _overwrite_unreadable(
        self, document: dict[str, dict[str, BookieInfo]]
    ) -> tuple[RackDiff, int | None]:
        found = await self.rack_config.get()
        config, diff = apply_document({}, document, prune=True)
        revision = await self.rack_config.put(
            config, expected_version=0 if found is None else found.version)
        return diff, revision


def decode_rack_config_doc(doc: Any) -> RackConfig:
    """The parsed `/bookies` document as a RackConfig (`{}` when absent or not a map)."""
    if not isinstance(doc, dict):
        return {}
    return {
        str(group): {str(b): dict(i) for b, i in bookies.items() if isinstance(i, dict)}
        for group, bookies in doc.items()
        if isinstance(bookies, dict)
    }
