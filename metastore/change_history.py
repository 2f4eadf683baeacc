"""The change history: who changed which stored document, from what to what, at which revision.

A write made on behalf of an admin request carries a `ChangeContext` (role, client address,
method, path). `api/` sets it for the request (`recording`); this package never imports
`api/`. `MetadataStore` reads it when it builds a write transaction and adds one record per
request to that same transaction, so a change and its record commit or fail together. Group
commit captures the context of each queued update when it is queued (its writer task runs in
another task's context) and records each update of a batch with its own before and after.

A record is one etcd key under `paths.CHANGE_HISTORY`:

    /pulsar-isolation/change-history/<time ms, 13 digits>-<process token>-<sequence, 12 digits>

whose value is the JSON `{"time", "role", "clientAddress", "method", "path", "changes": [{"key",
"before", "after"}]}` (documents as stored, parsed when they are JSON; null before a create and
after a delete). When the two documents of a change are together over `FULL_DOCUMENTS_UP_TO`
bytes and both JSON objects, the change is `"partial": true` and holds only the parts that
differ (`changed_parts`): a record stays small when one bookie of a large rack map moves.
A store may keep the records of one transaction in one key instead (`ChangeLog.batch`: the
first record's key with `-<count>` appended, holding `[[key, record], ...]`; ZooKeeper does,
one znode per group-commit batch); readers take both shapes through `ChangeLog.decode`.
The record's revision is the transaction's: a value cannot hold the revision
of the transaction that writes it, so it is read back as the key's `create_revision`. Records of
one transaction share it and keep their order through the sequence number. The time prefix lets
retention by age delete one key range.
"""

from __future__ import annotations

import contextlib
import contextvars
import itertools
import os
import secrets
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import compress
from operator import ne
from typing import Any

from metastore import paths
from metastore.codec import dump_json, load_json

__all__ = [
    "FULL_DOCUMENTS_UP_TO",
    "ChangeContext",
    "ChangeLog",
    "ChangeRecord",
    "KeyChange",
    "apply_changed_parts",
    "changed_parts",
    "current_change",
    "current_change_context",
    "recording",
    "whole_transactions",
]


@dataclass(frozen=True)
class ChangeContext:
    """Who asks for a write: the authenticated role (None when authentication is off), the
    client's address, the request's method and path. Never a credential."""

    role: str | None
    address: str | None
    method: str
    path: str


@dataclass(frozen=True)
class KeyChange:
    """One key's stored value before and after (None: absent). `parts`: the parts that
    changed (`changed_parts`), when the writer found them itself (a large document, see
    `FULL_DOCUMENTS_UP_TO`); `documents`: both documents parsed, when the writer holds them
    so; `before` and `after` are then not used."""

    key: str
    before: bytes | None
    after: bytes | None
    parts: tuple[dict[str, Any], dict[str, Any]] | None = None
    documents: tuple[Any, Any] | None = None  # parsed before and after, instead of the bytes


# Set for a request's task (`recording`, or `.set` where the rest of the task is the request).
current_change_context: contextvars.ContextVar[ChangeContext | None] = contextvars.ContextVar(
    "change_context", default=None
)


def current_change() -> ChangeContext | None:
    """The context writes made now are recorded under (None: not recorded)."""
    return current_change_context.get()


@contextlib.contextmanager
def recording(context: ChangeContext | None) -> Iterator[None]:
    """Record the writes made inside the block (and in tasks it starts) under `context`."""
    token = current_change_context.set(context)
    try:
        yield
    finally:
        current_change_context.reset(token)


# A change whose documents together are larger than this is recorded as the parts that changed
# (`"partial": true`): a rack write to a 1,000-bookie map would otherwise store 110 KB.
FULL_DOCUMENTS_UP_TO = 16 * 1024


_ABSENT: Any = object()


def _document(raw: bytes | None) -> Any:
    if raw is None:
        return None
    try:
        return load_json(raw)
    except ValueError:
        return raw.decode("utf-8", "replace")


def changed_parts(before: dict[str, Any], after: dict[str, Any]) -> tuple[Any, Any]:
    """The parts of two JSON objects that differ: a key whose values differ is kept on both
    sides (objects on both sides recursively, anything else whole), a removed key only in
    `before`, an added key only in `after`; a key in neither is unchanged."""
    removed: dict[str, Any] = {}
    added: dict[str, Any] = {}
    same_keys = len(before) == len(after) and list(before) == list(after)
    for key in _candidate_keys(before, after, same_keys):
        old = before[key]
        if key not in after:
            removed[key] = old
            continue
        new = after[key]
        if old is new or old == new:  # compared in C: most values of a large map are equal
            continue
        if isinstance(old, dict) and isinstance(new, dict):
            parts = changed_parts(old, new)
            if parts[0] or parts[1]:
                removed[key], added[key] = parts
        elif old != new:
            removed[key], added[key] = old, new
    if not same_keys:
        for key in after.keys() - before.keys():
            added[key] = after[key]
    return removed, added


SMALL_OBJECT = 32  # keys: compared key by key; larger objects (a rack group) in C first


def _candidate_keys(before: dict[str, Any], after: dict[str, Any], same_keys: bool) -> list[str]:
    """The keys of `before` that may differ in `after`. This runs over every bookie of a
    large rack map on each recorded write, so in a large object with the same keys in the
    same order (a value replaced in place) the values are compared pairwise in C, without a
    Python loop, and only those that differ are looked at."""
    if len(before) <= SMALL_OBJECT:
        return list(before)
    keys = list(before)
    if same_keys:
        return list(compress(keys, map(ne, before.values(), after.values())))
    return [key for key in keys if after.get(key, _ABSENT) != before[key]]


def apply_changed_parts(document: dict[str, Any], removed: dict[str, Any],
                        added: dict[str, Any]) -> None:  # fmt: skip
    """Apply the result of `changed_parts(document, new)` to `document`, in place, so that it
    equals `new` (values are copied from `added`, never shared)."""
    for key in removed.keys() - added.keys():
        del document[key]
    for key, new in added.items():
        old = removed.get(key)
        current = document.get(key)
        if isinstance(old, dict) and isinstance(new, dict) and isinstance(current, dict):
            apply_changed_parts(current, old, new)
        else:
            document[key] = load_json(dump_json(new))


def _change_json(change: KeyChange) -> dict[str, Any]:
    if change.parts is not None:
        removed, added = change.parts
        return {"key": change.key, "partial": True, "before": removed, "after": added}
    if change.documents is not None:
        return {"key": change.key, "before": change.documents[0], "after": change.documents[1]}
    before, after = _document(change.before), _document(change.after)
    size = len(change.before or b"") + len(change.after or b"")
    if size > FULL_DOCUMENTS_UP_TO and isinstance(before, dict) and isinstance(after, dict):
        removed, added = changed_parts(before, after)
        return {"key": change.key, "partial": True, "before": removed, "after": added}
    return {"key": change.key, "before": before, "after": after}


@dataclass(frozen=True)
class ChangeRecord:
    """A record read back: its key, the revision of the transaction that wrote it, and the
    stored JSON."""

    key: str
    revision: int
    body: dict[str, Any]

    @property
    def sequence(self) -> int:
        """Order among the records of one transaction."""
        tail = self.key.rsplit("-", 1)[-1]
        return int(tail) if tail.isdigit() else 0

    def touches(self, prefix: str) -> bool:
        """The request path or a changed key starts with `prefix`."""
        if str(self.body.get("path", "")).startswith(prefix):
            return True
        return any(str(c.get("key", "")).startswith(prefix) for c in self.body.get("changes", []))

    def to_json(self) -> dict[str, Any]:
        return {"revision": self.revision, **self.body}


def whole_transactions(records: list[ChangeRecord], limit: int) -> list[ChangeRecord]:
    """The first `limit` records (in revision order), less the last transaction's when the
    cut would split it (kept when it is the only one): one transaction's records are never
    split across pages."""
    if len(records) <= limit:
        return records
    cut = records[:limit]
    last = cut[-1].revision
    if records[limit].revision == last:
        whole = [r for r in cut if r.revision != last]
        return whole or [r for r in records if r.revision == last]
    return cut


class ChangeLog:
    """Builds record keys and values for this process: a random token tells processes apart,
    a counter orders the records of one transaction."""

    def __init__(self) -> None:
        self.token = f"{os.getpid():x}{secrets.token_hex(4)}"
        self._sequence = itertools.count()

    def record(self, context: ChangeContext, changes: Sequence[KeyChange]) -> tuple[str, bytes]:
        """The key and value of one record of `changes` made for `context`."""
        now_ms = int(time.time() * 1000)
        key = f"{paths.CHANGE_HISTORY}/{now_ms:013d}-{self.token}-{next(self._sequence):012d}"
        body = {
            "time": now_ms,
            "role": context.role,
            "clientAddress": context.address,
            "method": context.method,
            "path": context.path,
            # A key the write left as it was (e.g. deleting an absent one) is not listed.
            "changes": [
                _change_json(c)
                for c in changes
                if c.parts is not None or c.documents is not None or c.before != c.after
            ],
        }
        return key, dump_json(body)

    @staticmethod
    def batch(records: Sequence[tuple[str, bytes]]) -> tuple[str, bytes]:
        """One stored key holding the records (key, value) of one transaction, in order: the
        first record's key with `-<count>` appended, and the JSON array of `[key, record]`
        pairs. Each record is as `record` made it; `decode` gives them back."""
        first = records[0][0]
        pairs = b",".join(b"[" + dump_json(key) + b"," + value + b"]" for key, value in records)
        return f"{first}-{len(records)}", b"[" + pairs + b"]"

    @staticmethod
    def records_in(key: str) -> int:
        """How many records a stored key holds (`batch`: its count; else 1)."""
        parts = key.rsplit("/", 1)[-1].split("-")
        return int(parts[3]) if len(parts) == 4 and parts[3].isdigit() else 1

    @staticmethod
    def decode(key: str, value: bytes, create_revision: int) -> list[ChangeRecord]:
        """The records a stored key holds: one record, or the records of a `batch`."""
        body = load_json(value)
        if isinstance(body, list):
            return [ChangeRecord(str(pair[0]), create_revision, pair[1]) for pair in body
                    if isinstance(pair, list) and len(pair) == 2 and isinstance(pair[1], dict)]
        return [ChangeRecord(key, create_revision, body if isinstance(body, dict) else {})]

    @staticmethod
    def age_cutoff_key(max_age_seconds: float, now: float | None = None) -> str:
        """Records with keys below this one are older than `max_age_seconds`."""
        cutoff_ms = int(((time.time() if now is None else now) - max_age_seconds) * 1000)
        return f"{paths.CHANGE_HISTORY}/{max(cutoff_ms, 0):013d}"
