"""A typed repository of one kind of stored document, and multi-document transactions.

A `Document` knows where its documents live (the path of a key, from `metastore.paths`: no
caller builds one) and how they read and write (one model per document). Reads give the
model with the version a compare-and-swap names; `update` is the store's compare-and-swap
retry loop (group commit) on the model; `Transaction` writes several documents at once, each
guarded by the version it was read at.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Generic, TypeVar

from metastore.errors import ContentDeserializationError
from metastore.store import UNCHANGED, Guard, MetadataStore, Unchanged, Versioned
from metastore.versioned import NotCached

M = TypeVar("M")

Reader = Callable[[str, bytes], M]
Writer = Callable[[M], bytes]


@dataclass(frozen=True)
class Stored(Generic[M]):
    """A document as read: its version (0 never: 0 names "absent") and its model, decoded
    on first use (`ContentDeserializationError` naming the key when it does not read)."""

    version: int
    raw: bytes = field(repr=False)
    path: str = field(repr=False)
    reader: Reader[M] = field(repr=False, compare=False)

    @cached_property
    def value(self) -> M:
        return self.reader(self.path, self.raw)

    def value_or(self, fallback: M | None) -> M | None:
        """The model, or `fallback` when the stored bytes do not read as one."""
        try:
            return self.value
        except (ContentDeserializationError, ValueError):  # ValueError: pydantic's errors
            return fallback


Mutation = Callable[[M | None], "M | Unchanged | None"]


class Document(Generic[M]):
    """The documents of one kind, addressed by their key parts (e.g. tenant, namespace)."""

    kind = "document"  # names the document kind in `READS`

    def __init__(
        self,
        store: MetadataStore,
        path: Callable[..., str],
        reader: Reader[M],
        writer: Writer[M],
        *,
        parent: Callable[..., str] | None = None,
    ) -> None:
        self.store = store
        self._path = path
        self._parent = parent
        self.reader = reader
        self.writer = writer

    def path(self, *key: str) -> str:
        return self._path(*key)

    def stored(self, path: str, found: Versioned) -> Stored[M]:
        return Stored(found.revision, found.value, path, self.reader)

    # -- reads ------------------------------------------------------------------------------

    async def get(self, *key: str) -> Stored[M] | None:
        """The document and its version, read from the store; None when it does not exist."""
        path = self.path(*key)
        READS.count(self.kind, cached=False)
        found = await self.store.get(path)
        return None if found is None else self.stored(path, found)

    async def get_cached(self, *key: str) -> Stored[M] | None:
        """As `get`, from a live watch-fed cache covering the document (it follows every
        writer, normally within milliseconds, and this process's own writes at once); from
        the store while no such cache is live."""
        path = self.path(*key)
        known = self.store.cached(path)
        if isinstance(known, NotCached):
            return await self.get(*key)
        READS.count(self.kind, cached=True)
        return None if known is None else self.stored(path, known)

    async def exists(self, *key: str) -> bool:
        return await self.store.exists(self.path(*key))

    async def names(self, *parent: str) -> list[str]:
        """The names of the documents under `parent` (its direct children), sorted."""
        return await self.store.children(self._parent_path(*parent))

    async def entries(self, *parent: str) -> dict[str, Stored[M]]:
        """The documents directly under `parent`, by name, sorted."""
        root = self._parent_path(*parent)
        prefix = root.rstrip("/") + "/"
        found = await self.store.get_children_values(root)
        children = {
            key.removeprefix(prefix): self.stored(key, held)
            for key, held in found.items()
            if "/" not in key.removeprefix(prefix)
        }
        return {name: children[name] for name in sorted(children)}

    def _parent_path(self, *parent: str) -> str:
        if self._parent is None:
            raise TypeError("this document kind has no parent to list")
        return self._parent(*parent)

    # -- writes -----------------------------------------------------------------------------

    async def create(self, *key: str, value: M) -> int:
        """Create the document; `AlreadyExists` when it exists. The new version."""
        return await self.store.create(self.path(*key), self.writer(value))

    async def put(self, *key: str, value: M, expected_version: int | None = None) -> int:
        """Write the document (with `expected_version`: only if still at it, 0 = absent)."""
        return await self.store.put(self.path(*key), self.writer(value), expected_version)

    async def update(self, *key: str, mutate: Mutation[M]) -> Stored[M] | None:
        """Compare-and-swap: `mutate(current model, None when absent)` returns the new model,
        None to delete, or UNCHANGED; retried on conflict and coalesced with concurrent
        updates of the key in this process (`MetadataStore.update`). An exception from
        `mutate` (including an unreadable current document) fails this caller only."""
        path = self.path(*key)

        def apply(raw: bytes | None) -> bytes | Unchanged | None:
            result = mutate(None if raw is None else self.reader(path, raw))
            if isinstance(result, Unchanged) or result is None:
                return result
            return self.writer(result)

        found = await self.store.update(path, apply)
        return None if found is None else self.stored(path, found)

    async def delete(self, *key: str, expected_version: int | None = None) -> int:
        """Delete the document; `NotFound` when absent, `BadVersion` when it changed."""
        return await self.store.delete(self.path(*key), expected_version)

    # -- parts of a transaction -------------------------------------------------------------

    def at(self, *key: str, version: int) -> Guard:
        """Holds while the document is still at `version` (0: still absent)."""
        return Guard(self.path(*key), version)

    def untouched_below(self, *parent: str, since: int) -> Guard:
        """Holds while no document under `parent` was written after version `since`."""
        return Guard(self._parent_path(*parent), since, tree=True)


class Transaction:
    """Guards and writes over several documents, committed at once: every guard holds and
    everything is written, or nothing is and `BadVersion` is raised."""

    def __init__(self, store: MetadataStore) -> None:
        self.store = store
        self.guards: list[Guard] = []
        self.puts: dict[str, bytes] = {}
        self.trees: list[str] = []

    def require(self, *guards: Guard) -> Transaction:
        self.guards.extend(guards)
        return self

    def put(self, document: Document[M], *key: str, value: M) -> Transaction:
        self.puts[document.path(*key)] = document.writer(value)
        return self

    def put_record(self, path: str, value: bytes) -> Transaction:
        """Write a record whose path another repository named (e.g. a managed ledger's
        `ManagedLedgerName.path`)."""
        self.puts[path] = value
        return self

    def delete_tree(self, document: Document[M], *key: str) -> Transaction:
        """Delete the document and every key under it."""
        self.trees.append(document.path(*key))
        return self

    def delete_trees(self, trees: Sequence[str]) -> Transaction:
        """Delete the trees a repository named (e.g. `NamespaceTopics.trees`)."""
        self.trees.extend(trees)
        return self

    async def commit(self) -> int:
        """Commit; the store passes the written documents (and the roots of deleted trees) to
        its watch-fed caches at once, so this process reads its own writes."""
        return await self.store.commit(self.guards, puts=self.puts, delete_trees=self.trees)


class ReadCounts:
    """Single-document reads (`get`, `get_cached`) of each document kind served by the store
    and by a watch-fed cache, since the process started (exported as metrics by the
    service)."""

    def __init__(self) -> None:
        self.store: dict[str, int] = {}
        self.cache: dict[str, int] = {}

    def count(self, kind: str, *, cached: bool) -> None:
        counts = self.cache if cached else self.store
        counts[kind] = counts.get(kind, 0) + 1


READS = ReadCounts()


def newest_version(entries: Mapping[str, Stored[M]] | Sequence[Stored[M]]) -> int:
    """The highest version among `entries` (0 when there are none)."""
    values = entries.values() if isinstance(entries, Mapping) else entries
    return max((found.version for found in values), default=0)


__all__ = [
    "READS",
    "UNCHANGED",
    "Document",
    "Mutation",
    "ReadCounts",
    "Stored",
    "Transaction",
    "newest_version",
]
