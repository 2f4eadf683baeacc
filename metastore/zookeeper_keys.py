"""`MetadataStore`'s key operations on the ZooKeeper backend, in the store's own terms.

The store speaks of revisions (etcd `mod_revision`; here the znode's `mzxid`, ordered the
same way across the whole store) while ZooKeeper conditions writes on znode versions. A
condition "still at revision r" becomes "at the version the znode had when its mzxid was
r": the version is known from the last read or write of the key in this process, or read
again; a znode whose mzxid is no longer r has changed, and the write fails with
`BadVersion` as an etcd compare would. Leases are the session: `grant_lease` names the
current ZooKeeper session, ephemeral keys put on it belong to it, and `revoke_lease`
deletes the keys this process put on it.

A write whose call fails after its request may have reached ZooKeeper (`Unanswered`) is
settled as on etcd (`metastore.settling`): by its change record, which a recorded `multi`
creates with the write, or else by the value it leaves and the revision it requires. Reads
answered on the session that sent it see every write it can ever make (ZooKeeper answers a
session's requests in order, and when the session reconnects, drops what its old connection
had not yet handed on): when they find no trace of it, it was not applied (a delete at a
revision without a record: when they find the key still at that revision). A write nothing
can settle so (any other delete without a record, a sequential or ephemeral create, a write
answering with the version before) is `OutcomeUnknown` at once.

A range read walks the znodes under the path (ZooKeeper has no key ranges); parent znodes
that exist only to hold children (empty, as ZooKeeper makes them) are not entries. The
change stream is the backend's persistent recursive watch, opened before a range read so
that the watch which follows it misses nothing.

The change records of a group-commit batch go in one znode (`ChangeLog.batch`), created in
the batch's multi: ZooKeeper's cost grows with the znodes a multi creates, and one per
update bounded the rate of concurrent writes. A single write's record is a znode of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from metastore import paths
from metastore.backend import CREATE, ChangeKind, ChangeStream, Check, Delete, Op, Put, Stat
from metastore.change_history import (
    ChangeLog,
    ChangeRecord,
    KeyChange,
    current_change,
    whole_transactions,
)
from metastore.errors import (
    AlreadyExists,
    BadVersion,
    Compacted,
    NotFound,
    OutcomeUnknown,
    Unanswered,
    Unavailable,
)
from metastore.guards import Guard, GuardKind
from metastore.settling import SETTLED_WRITE_SHARE, Found, Landing, settle
from metastore.versioned import RangeSnapshot, Versioned, WatchEvent
from metastore.zookeeper_backend import ZooKeeperBackend

__all__ = ["ZooKeeperKeys", "ZooKeeperWatch"]

_MEMO_LIMIT = 100_000
_VERSION_UNKNOWN = -2  # a settled write's znode version, when the key has moved on since


@contextlib.contextmanager
def _unsettled(path: str) -> Iterator[None]:
    """A write nothing can settle: `OutcomeUnknown` when its request may have been sent."""
    try:
        yield
    except Unanswered as exc:
        raise OutcomeUnknown(path) from exc


class ZooKeeperWatch:
    """The changes of one key or prefix from the backend's change stream, each re-read
    (ZooKeeper notifications carry no data) unless this process's own write covers it
    (`ZooKeeperBackend.state_after`). A `RESYNC` ends the iteration with
    `Unavailable`: the reader re-reads, as after a broken etcd watch. `since`: a key whose
    state read is older than this revision is left out (its change came before it)."""

    def __init__(
        self, keys: ZooKeeperKeys, stream: ChangeStream, covers: Callable[[str], bool],
        since: int = 0,
    ) -> None:
        self._keys = keys
        self._stream = stream
        self._covers = covers
        self._since = since

    async def __aiter__(self) -> AsyncIterator[WatchEvent]:
        async for change in self._stream:
            if change.kind is ChangeKind.RESYNC:
                raise Unavailable("watch broken: ZooKeeper reconnected")
            if not self._covers(change.path):
                continue
            found = await self._keys.backend.state_after(change)
            if found is None:
                yield WatchEvent(change.path, None, self._keys.backend.last_revision())
            elif found.revision >= self._since:
                self._keys.remember(change.path, found)
                yield WatchEvent(change.path, found.value, found.revision)

    async def cancel(self) -> None:
        self._stream.close()


def _covering(path: str, prefix: bool) -> Callable[[str], bool]:
    """Whether a changed path is the key (`prefix=False`) or under it (`prefix=True`)."""
    if prefix:
        under = path.rstrip("/") + "/"
        return lambda key: key.startswith(under)
    return lambda key: key == path


@dataclass(eq=False)
class _Sent:
    """This process's last group-commit write of a key (`ZooKeeperKeys.swap`): the value
    it writes, the znode version its `setData` expects (None: not a `setData` at a known
    version) and the change record znode it creates; `done`: what it wrote (None: it
    failed). Once it committed, and only then, the key's version is `version + 1` and its
    record exists (a record's key is made once, by this process); so a write guarded by
    both, sent behind it in the same session (which ZooKeeper applies in order), succeeds
    exactly when it did and nothing else wrote the key since."""

    value: bytes | None
    done: asyncio.Future[Stat | None]
    version: int | None = None
    record: str | None = None


def _resolve_sent(future: asyncio.Future[Stat | None], written: Stat | None) -> None:
    """What a chained batch waits for (`_Sent.done`): the write's result, None if it failed."""
    if not future.done():
        future.set_result(written)


class ZooKeeperKeys:
    """See the module docstring."""

    def __init__(self, backend: ZooKeeperBackend, change_log: ChangeLog) -> None:
        self.backend = backend
        self.change_log = change_log
        self._versions: dict[str, tuple[int, int]] = {}  # path: (mzxid, version)
        self._opened: dict[tuple[str, bool], ChangeStream] = {}
        self._lease_keys: dict[int, set[str]] = {}
        self._sent: dict[str, _Sent] = {}  # path: this process's last `swap` of it

    # -- revisions and versions -----------------------------------------------------------

    def remember(self, path: str, stat: Stat) -> None:
        if stat.version == _VERSION_UNKNOWN:
            self._versions.pop(path, None)
            return
        if len(self._versions) >= _MEMO_LIMIT:
            self._versions.clear()
        self._versions[path] = (stat.revision, stat.version)

    async def version_at(self, path: str, revision: int) -> int:
        """The znode version that goes with `revision` (0: absent, `CREATE`), or
        `BadVersion` when the key is no longer at that revision."""
        if revision == 0:
            return CREATE
        known = self._versions.get(path)
        if known is not None and known[0] == revision:
            return known[1]
        found = await self.backend.get(path)
        if found is None or found.revision != revision:
            raise BadVersion(path)
        self.remember(path, found)
        return found.version

    async def _guard_ops(self, guard: Guard) -> list[Op]:
        if guard.kind is GuardKind.REVISION:
            return [Check(guard.path, await self.version_at(guard.path, guard.revision))]
        found = await self.backend.get(guard.path)
        if guard.kind is GuardKind.VALUE:
            if (found.value if found else None) != guard.value:
                raise BadVersion(guard.path)
            return [Check(guard.path, CREATE if found is None else found.version)]
        checks: list[Op] = []  # TREE: nothing under the path written after the revision
        for path, stat in (await self._walk(guard.path)).items():
            if stat.revision > guard.revision:
                raise BadVersion(guard.path)
            checks.append(Check(path, stat.version))
        return checks

    # -- reads ----------------------------------------------------------------------------

    async def get(self, path: str) -> Versioned | None:
        found = await self.backend.get(path)
        if found is None:
            return None
        self.remember(path, found)
        return Versioned(found.value, found.revision)

    async def _walk(self, path: str) -> dict[str, Stat]:
        """Every znode under `path + "/"` (not `path`), by full path."""
        found: dict[str, Stat] = {}
        base = path.rstrip("/")
        names = await self.backend.children(base or "/")
        for name in names:
            child = f"{base}/{name}"
            stat, below = await asyncio.gather(self.backend.get(child), self._walk(child))
            if stat is not None and (stat.value or not below):
                found[child] = stat
            found.update(below)
        return found

    async def read_range(self, path: str, *, prefix: bool, watching: bool = True) -> RangeSnapshot:
        """As `MetadataStore.read_range`; `watching`: a `watch` of the same range follows,
        so the change stream is opened first (see `watch`)."""
        if watching:
            stream = await self.backend.watch()
            stream.accepts = _covering(path, prefix)
            previous = self._opened.pop((path, prefix), None)
            if previous is not None:
                previous.close()
            self._opened[(path, prefix)] = stream
        if prefix:
            stats = await self._walk(path)
        else:
            stat = await self.backend.get(path)
            stats = {} if stat is None else {path: stat}
        for key, stat in stats.items():
            self.remember(key, stat)
        entries = {key: Versioned(stat.value, stat.revision) for key, stat in stats.items()}
        return RangeSnapshot(entries, self.backend.last_revision())

    async def watch(self, path: str, *, prefix: bool, start_revision: int = 0) -> ZooKeeperWatch:
        """Changes of the key or prefix: from the last `read_range` of it when there was
        one (nothing in between is missed), else from now (`start_revision` unused)."""
        stream = self._opened.pop((path, prefix), None)
        if stream is None or stream.closed:
            stream = await self.backend.watch()
        covers = stream.accepts = _covering(path, prefix)
        return ZooKeeperWatch(self, stream, covers)

    async def watch_keys(self, first: str, end: str, *, start_revision: int) -> ZooKeeperWatch:
        """Changes of every key in [`first`, `end`) (as UTF-8 bytes) from now; ZooKeeper
        keeps no history, so a `start_revision` already past is `Compacted`."""
        low, high = first.encode(), end.encode()
        stream = await self.backend.watch()  # before the revision is read: nothing after it missed
        stream.accepts = lambda key: low <= key.encode() < high
        try:
            current = await self.revision()
        except BaseException:
            stream.close()
            raise
        if start_revision <= current:
            stream.close()
            raise Compacted(current + 1)
        return ZooKeeperWatch(self, stream, stream.accepts, since=start_revision)

    async def scan(
        self, start: str, end: str, *, limit: int, keys_only: bool
    ) -> tuple[list[tuple[str, bytes, int]], bool]:
        """As `MetadataStore.scan` (etcd versions: znode version + 1): ZooKeeper has no key
        ranges, so the znodes under the range's common parent are walked in name order,
        skipping subtrees wholly outside [start, end), until `limit` + 1 keys are found.
        (Name order is key order wherever sibling names do not differ only after a prefix
        followed by a byte below "/", as in every layout Pulsar and BookKeeper use.)"""
        low, high = start.encode(), end.encode()
        common = ""
        for a, b in zip(start, end, strict=False):
            if a != b:
                break
            common += a
        base = common[: common.rfind("/")] or "/"
        found: list[tuple[str, bytes, int]] = []

        async def visit(path: str) -> None:
            for name in await self.backend.children(path):
                if len(found) > limit:
                    return
                child = f"{path.rstrip('/')}/{name}"
                key = child.encode()
                below = key + b"0"  # everything under `child` sorts before it
                if key >= high or (below <= low and key < low):
                    continue
                stat = await self.backend.get(child)
                names = await self.backend.children(child)
                if low <= key < high and stat is not None and (stat.value or not names):
                    found.append((child, b"" if keys_only else stat.value, stat.version + 1))
                if names and key + b"/" < high and below > low:
                    await visit(child)

        await visit(base)
        found.sort(key=lambda item: item[0].encode())
        return found[:limit], len(found) > limit

    async def revision(self) -> int:
        await self.backend.get("/")
        return self.backend.last_revision()

    async def compact(self, revision: int) -> None:
        """Nothing: ZooKeeper keeps no history to compact."""

    # -- writes ---------------------------------------------------------------------------

    async def put(self, path: str, value: bytes, expected_revision: int | None) -> int:
        if expected_revision is None:
            [written] = await self._recorded([Put(path, value)], Landing(path, value))
        else:
            try:
                version = await self.version_at(path, expected_revision)
                [written] = await self._recorded(
                    [Put(path, value, version)], Landing(path, value, since=expected_revision))
            except BadVersion:
                if expected_revision == 0:
                    raise AlreadyExists(path) from None
                raise
        assert written is not None
        self.remember(path, written)
        return written.revision

    async def put_if_revision(
        self,
        path: str,
        value: bytes,
        expected_revision: int,
        *,
        lease: int | None = None,
        requires: str | None = None,
    ) -> tuple[bool, Versioned | None]:
        ops: list[Op] = []
        if requires is not None:
            needed = await self.backend.get(requires)
            if needed is None:
                raise NotFound(requires)
            ops.append(Check(requires, needed.version))
        try:
            version = await self.version_at(path, expected_revision)
            if lease is not None:
                if version != CREATE:  # an ephemeral key is made anew on the session
                    ops.append(Delete(path, version))
                stat = await self._ephemeral(path, value, lease, ops)
            else:
                [*_, written] = await self._recorded(
                    [*ops, Put(path, value, version)],
                    Landing(path, value, since=expected_revision))
                assert written is not None
                stat = written
        except BadVersion:
            if requires is not None and await self.backend.get(requires) is None:
                raise NotFound(requires) from None
            return False, await self.get(path)
        self.remember(path, stat)
        return True, Versioned(value, stat.revision)

    async def _ephemeral(self, path: str, value: bytes, lease: int, ops: Sequence[Op]) -> Stat:
        if await self.backend.session_id() != lease:
            raise Unavailable("metadata store unavailable: the ZooKeeper session was lost")
        with _unsettled(path):
            if ops:
                await self.backend.multi(list(ops))
            stat = await self.backend.put(path, value, CREATE, ephemeral=True)
        self._lease_keys.setdefault(lease, set()).add(path)
        return stat

    async def delete(self, path: str, expected_revision: int | None) -> int:
        version = None
        if expected_revision is not None:
            try:
                version = await self.version_at(path, expected_revision)
            except BadVersion:
                if await self.backend.get(path) is None:
                    raise NotFound(path) from None
                raise
        if await self.backend.get(path) is None:
            raise NotFound(path)
        unchanged = None if expected_revision is None else Landing(path, since=expected_revision)
        await self._recorded([Delete(path, version)], unchanged)
        self._versions.pop(path, None)
        return self.backend.last_revision()

    async def _tree_deletes(self, path: str, *, with_root: bool) -> list[Op]:
        """Deletes of every znode under `path` (and of `path`), the deepest first."""
        below = sorted(await self._all_znodes(path), key=lambda p: p.count("/"), reverse=True)
        ops: list[Op] = [Delete(p) for p in below]
        if with_root and await self.backend.get(path) is not None:
            ops.append(Delete(path))
        return ops

    async def _all_znodes(self, path: str) -> list[str]:
        base = path.rstrip("/")
        found: list[str] = []
        for name in await self.backend.children(base or "/"):
            child = f"{base}/{name}"
            found.append(child)
            found.extend(await self._all_znodes(child))
        return found

    async def _settled(self, ops: list[Op], landing: Landing | None) -> list[Stat | None]:
        """`multi(ops)`. When its call fails after it may have been sent, the write is
        settled by `landing` within the store timeout (the call has `SETTLED_WRITE_SHARE`
        of it, finding out as much): applied, it answers as the multi did (each put's
        revision that of the multi); without `landing`, `OutcomeUnknown` at once."""
        budget = self.backend.timeout * SETTLED_WRITE_SHARE
        try:
            return await self.backend.multi(ops, timeout=None if landing is None else budget)
        except Unanswered as exc:
            if landing is None:
                raise OutcomeUnknown(next(op.path for op in ops if not isinstance(op, Check))) \
                    from exc
            revision, now = await self._settle(landing, exc, budget)
        landed: list[Stat | None] = []
        for op in ops:
            if not isinstance(op, Put):
                landed.append(None)
            elif now is not None and op.path == landing.path and now.revision == revision:
                landed.append(Stat(op.value, now.version, revision, now.owner))
            else:
                landed.append(Stat(op.value, _VERSION_UNKNOWN, revision))
        return landed

    async def _settle(
        self, landing: Landing, failure: Unanswered, budget: float
    ) -> tuple[int, Stat | None]:
        """The revision at which the write `landing` describes was applied, found within
        `budget` seconds (`settling.settle`), with the state of its path last read."""
        seen: list[Stat | None] = []

        async def read() -> Found:
            current = await self.backend.get(landing.path)
            record = None if landing.record is None else await self.backend.get(landing.record)
            seen.append(current)
            return Found(
                None if record is None else record.revision,
                None if current is None else Versioned(current.value, current.revision),
                complete=self.backend.on_session(failure.session),
            )

        revision = await settle(landing, read, budget, failure)
        return revision, seen[-1] if seen else None

    async def _recorded(self, ops: list[Op], landing: Landing | None = None) -> list[Stat | None]:
        """`multi(ops)`, with the change record of the current change context (if any) in
        the same multi: the values before are read, and checked unchanged in it. A failed
        call is settled by the record; without one, by `landing` (`_settled`)."""
        context = current_change()
        written = [op for op in ops if not isinstance(op, Check)
                   and paths.in_change_history(op.path)]
        if context is None or not written:
            return await self._settled(ops, landing)
        changes: list[KeyChange] = []
        guards: list[Op] = []
        deleted = [op.path for op in written if isinstance(op, Delete)]
        since: dict[str, int] = {}
        for op in written:
            before = await self.backend.get(op.path)
            since[op.path] = 0 if before is None else before.revision
            guards.append(Check(op.path, CREATE if before is None else before.version))
            after = op.value if isinstance(op, Put) else None
            value = None if before is None else before.value
            if not value and after is None and any(p.startswith(f"{op.path}/") for p in deleted):
                value = None  # a parent that only held the deleted children: not an entry
            changes.append(KeyChange(op.path, value, after))
        key, record = self.change_log.record(context, changes)
        checked = {op.path for op in ops if isinstance(op, Check)}
        guards = [guard for guard in guards if guard.path not in checked]
        path = next((p for p, revision in since.items() if revision), written[0].path)
        by_record = Landing(path, record=key, since=since[path])
        results = await self._settled([*guards, *ops, Put(key, record, CREATE)], by_record)
        return results[len(guards) : len(guards) + len(ops)]

    async def read_changes(self, since: int, limit: int, prefix: str) -> list[ChangeRecord]:
        """As `MetadataStore.read_changes`: a record's revision is its znode's czxid (a
        record is never rewritten, so its mzxid)."""
        records: list[ChangeRecord] = []
        for name in await self.backend.children(paths.CHANGE_HISTORY):
            key = f"{paths.CHANGE_HISTORY}/{name}"
            found = await self.backend.get(key)
            if found is None or found.revision <= since:
                continue
            for record in self.change_log.decode(key, found.value, found.revision):
                if not prefix or record.touches(prefix):
                    records.append(record)
        records.sort(key=lambda r: (r.revision, r.sequence))
        return whole_transactions(records, limit)

    async def prune_changes(self, max_records: int, max_age_seconds: float) -> int:
        """As `MetadataStore.prune_changes`, counting the records each znode holds
        (`ChangeLog.records_in`): a batch's znode goes whole, so when the limit falls within
        one, its records are all kept (at most one batch over the limit)."""
        names = sorted(await self.backend.children(paths.CHANGE_HISTORY))
        doomed: list[str] = []
        if max_age_seconds > 0:
            cutoff = self.change_log.age_cutoff_key(max_age_seconds).rsplit("/", 1)[-1]
            doomed = [name for name in names if name < cutoff]
        kept = names[len(doomed):]
        held = [self.change_log.records_in(name) for name in kept]
        if max_records > 0:  # a batch's znode is kept whole when the limit falls within it
            excess, oldest = sum(held) - max_records, 0
            while oldest < len(held) and held[oldest] <= excess:
                excess -= held[oldest]
                oldest += 1
            doomed += kept[:oldest]
        for name in doomed:
            with contextlib.suppress(NotFound):
                await self.backend.delete(f"{paths.CHANGE_HISTORY}/{name}")
        return sum(self.change_log.records_in(name) for name in doomed)

    async def commit(
        self,
        guards: Sequence[Guard],
        puts: Mapping[str, bytes],
        delete_trees: Sequence[str],
        deletes: Sequence[str],
    ) -> int:
        ops: list[Op] = []
        for guard in guards:
            ops.extend(await self._guard_ops(guard))
        ops.extend(Put(path, value) for path, value in puts.items())
        for path in deletes:
            if await self.backend.get(path) is not None:
                ops.append(Delete(path))
        for path in delete_trees:
            ops.extend(await self._tree_deletes(path, with_root=True))
        if not ops:
            return 0
        landing: Landing | None = None
        if len(puts) == 1 and not deletes and not delete_trees:
            [(path, value)] = puts.items()
            since = [g.revision for g in guards if g.kind is GuardKind.REVISION and g.path == path]
            landing = Landing(path, value, since=since[0] if since else 0)
        results = await self._recorded(ops, landing)
        revision = 0
        for op, stat in zip(ops, results, strict=True):
            if stat is not None:
                self.remember(op.path, stat)
                revision = max(revision, stat.revision)
            elif isinstance(op, Delete):
                self._versions.pop(op.path, None)
        return revision or self.backend.last_revision()

    async def delete_children(self, path: str) -> int:
        ops = await self._tree_deletes(path, with_root=False)
        if ops:
            await self._recorded(ops)
        return self.backend.last_revision()

    async def swap(
        self,
        path: str,
        guard: Guard,
        value: bytes | None,
        records: Sequence[tuple[str, bytes]] = (),
    ) -> int:
        """As `MetadataStore.swap`. A batch chained behind this process's write of the same
        key still in flight (a `VALUE` guard on the value that write sends) is sent at once,
        guarded by what holds exactly when that write committed and nothing wrote the key
        since: the key at the version that write leaves, and that write's change record
        present (see `_Sent`)."""
        previous = self._sent.get(path)
        sent = _Sent(value, asyncio.get_running_loop().create_future())
        if len(self._sent) >= _MEMO_LIMIT:
            self._sent.clear()
        self._sent[path] = sent
        try:
            written = await self._swap(path, guard, value, records, previous, sent)
        except BaseException:
            _resolve_sent(sent.done, None)
            raise
        _resolve_sent(sent.done, written)
        if written is None:
            self._versions.pop(path, None)
            return self.backend.last_revision()
        self.remember(path, written)
        return written.revision

    async def _swap(
        self,
        path: str,
        guard: Guard,
        value: bytes | None,
        records: Sequence[tuple[str, bytes]],
        previous: _Sent | None,
        sent: _Sent,
    ) -> Stat | None:
        chained = (guard.kind is GuardKind.VALUE and guard.path == path and value is not None
                   and previous is not None and previous.value is not None
                   and (previous.value is guard.value or previous.value == guard.value))
        if chained:
            assert previous is not None and value is not None
            if previous.version is not None and previous.record is not None \
                    and not previous.done.done():  # fmt: skip
                sent.version = previous.version + 1
                ops: list[Op] = [Check(previous.record, 0), Put(path, value, sent.version)]
            else:  # nothing to check it by: wait for it
                before = await asyncio.shield(previous.done)
                if before is None:  # it failed: its value was never the key's
                    raise BadVersion(path)
                sent.version = before.version
                ops = [Put(path, value, before.version)]
        elif guard.kind is GuardKind.REVISION and guard.path == path:
            version = await self.version_at(path, guard.revision)  # the write's own condition
            if value is None:
                ops = [Delete(path, None if version == CREATE else version)]
                if version == CREATE:
                    ops = [Check(path, CREATE)]
            else:
                sent.version = version
                ops = [Put(path, value, version)]
        else:
            ops = await self._guard_ops(guard)
            ops.append(Delete(path) if value is None else Put(path, value))
        # A batch's records go in one znode: ZooKeeper's cost is per znode created.
        stored = [self.change_log.batch(records)] if len(records) > 1 else records
        ops.extend(Put(key, record, CREATE) for key, record in stored)
        if stored and sent.version is not None:
            sent.record = stored[0][0]
        # A failed call is settled by the record (the batch's znode), else by the value.
        own = guard.kind is GuardKind.REVISION and guard.path == path
        landing: Landing | None = Landing(
            path, value, stored[0][0] if stored else None, guard.revision if own else 0
        )
        if value is None and not stored:
            landing = None  # a delete leaves no value to find
        results = await self._settled(ops, landing)
        return results[len(ops) - len(stored) - 1]

    # -- etcd versions (`MetadataStore.get_with_version`: 1 after creation): znode + 1 ------

    async def get_with_version(self, path: str) -> tuple[bytes, int] | None:
        found = await self.backend.get(path)
        return None if found is None else (found.value, found.version + 1)

    async def put_at_version(
        self, path: str, value: bytes, version: int, *, lease: int | None = None
    ) -> tuple[bool, bool]:
        expected = CREATE if version == 0 else version - 1
        try:
            if lease is not None:
                ops: list[Op] = [] if expected == CREATE else [Delete(path, expected)]
                await self._ephemeral(path, value, lease, ops)
            else:
                budget = self.backend.timeout * SETTLED_WRITE_SHARE
                try:
                    await self.backend.put(path, value, expected, timeout=budget)
                except Unanswered as exc:  # found by the value it leaves, as on etcd
                    await self._settle(Landing(path, value), exc, budget)
        except BadVersion:  # AlreadyExists included
            return False, await self.backend.get(path) is not None
        return True, False

    async def put_returning_version(self, path: str, value: bytes) -> int:
        with _unsettled(path):
            return (await self.backend.put(path, value)).version

    async def delete_at_version(self, path: str, version: int | None) -> tuple[bool, bool]:
        try:
            with _unsettled(path):
                await self.backend.delete(path, None if version is None else version - 1)
        except NotFound:
            return False, False
        except BadVersion:
            return False, True
        return True, False

    # -- leases (the session) -------------------------------------------------------------

    async def grant_lease(self, ttl: int) -> int:
        """The session (`ttl` unused: the session timeout governs)."""
        return await self.backend.session_id()

    async def refresh_lease(self, lease: int) -> bool:
        """False once the session is known to have ended; a disconnection alone does not
        end it (ZooKeeper keeps it for the session timeout)."""
        if self.backend.session_lost(lease):
            return False
        try:
            return await self.backend.session_id() == lease
        except Unavailable:
            return not self.backend.session_lost(lease)

    async def put_ephemeral(self, path: str, value: bytes, lease: int) -> None:
        found = await self.backend.get(path)
        ops: list[Op] = [] if found is None else [Delete(path, found.version)]
        with contextlib.suppress(AlreadyExists):
            await self._ephemeral(path, value, lease, ops)
            return
        raise BadVersion(path)

    async def create_sequential(self, prefix: str, value: bytes, lease: int | None) -> str:
        if lease is not None and await self.backend.session_id() != lease:
            raise Unavailable("metadata store unavailable: the ZooKeeper session was lost")
        with _unsettled(prefix):
            created = await self.backend.create_sequential(
                prefix, value, ephemeral=lease is not None)
        if lease is not None:
            self._lease_keys.setdefault(lease, set()).add(created)
        return created

    async def take_sequential_number(self, parent: str, name: str, lease: int) -> int:
        """As BookKeeper's `ZkLedgerIdGenerator`: create the ephemeral-sequential znode
        `parent/<name><n>` (ten digits) and delete it; `n`."""
        created = await self.create_sequential(f"{parent}/{name}", b"", lease)
        await self.delete_at_version(created, None)  # already gone (the session ended)
        return int(created.rsplit(name, 1)[1])

    async def lease_of(self, path: str) -> int | None:
        """The session that owns the ephemeral key (None: absent or persistent); noted, so
        that `revoke_lease` of another process's session deletes the key."""
        found = await self.backend.get(path)
        if found is None or not found.owner:
            return None
        if len(self._lease_keys) >= _MEMO_LIMIT:
            self._lease_keys.clear()
        self._lease_keys.setdefault(found.owner, set()).add(path)
        return found.owner

    async def revoke_lease(self, lease: int) -> None:
        """Delete the keys put on `lease` by this process, and those `lease_of` found on it
        (another process's session, which only ZooKeeper can end: its keys go now)."""
        for path in sorted(self._lease_keys.pop(lease, set())):
            found = await self.backend.get(path)
            if found is not None and found.owner == lease:
                with contextlib.suppress(NotFound, BadVersion):
                    await self.backend.delete(path, found.version)
