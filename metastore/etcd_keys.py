"""`MetadataStore`'s key operations on etcd (`etcd_backend.EtcdBackend`'s connection).

A path is the identical UTF-8 key and a revision is etcd's `mod_revision`. Every
read-modify-write is one transaction that compares the key's `mod_revision` (or its value,
or the newest `mod_revision` under a prefix) and writes only when the compare holds. When a
change context is current, the change record goes into the same transaction, guarded by the
values it says were replaced. Leases are etcd leases; a sequential key under `prefix` is
numbered by an unconditional put of `prefix` itself (its version before is the number).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

import aetcd
from aetcd import rpc, transactions

from metastore import layer_times, paths
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
    Unavailable,
)
from metastore.etcd_backend import EtcdBackend, at_most
from metastore.guards import Guard, GuardKind
from metastore.retry import MAX_CAS_ATTEMPTS, conflict_backoff
from metastore.settling import SETTLED_WRITE_SHARE, Found, Landing, settle
from metastore.versioned import RangeSnapshot, Versioned, WatchEvent

__all__ = ["EtcdKeys", "EtcdWatch", "child_range", "to_key"]

PRUNE_BATCH = 100  # deletes per transaction (etcd's --max-txn-ops defaults to 128)

T = TypeVar("T")


def to_key(path: str) -> bytes:
    return path.encode()


def _first_key(success: Sequence[Any]) -> str:
    key = getattr(success[0], "key", b"")
    return key.decode(errors="replace") if isinstance(key, bytes) else str(key)


def child_range(path: str) -> tuple[bytes, bytes]:
    """The etcd key range of everything under `path + "/"`."""
    prefix = (path.rstrip("/") + "/").encode()
    return prefix, prefix[:-1] + bytes([prefix[-1] + 1])


def _never_sent(exc: BaseException) -> bool:
    """The call failed before its request left: gRPC found no connection to send it on."""
    cause = exc.__cause__
    return isinstance(cause, aetcd.ConnectionFailedError) and "failed to connect" in str(cause)


def _landed_responses(success: Sequence[Any], revision: int) -> list[Any]:
    """The responses of a transaction found applied at `revision` (only the revision is
    known: what a caller reads of a write's response)."""
    header = rpc.ResponseHeader(revision=revision)
    return [
        rpc.ResponseOp(response_delete_range=rpc.DeleteRangeResponse(header=header))
        if isinstance(op, transactions.Delete)
        else rpc.ResponseOp(response_put=rpc.PutResponse(header=header))
        for op in success
    ]


class EtcdWatch:
    """An established etcd watch as `WatchEvent`s (hides the client's event types), in
    revision order, the events of one revision together. The iteration raises `Compacted`
    when etcd compacted the revisions still to be sent, `Unavailable` when the connection
    broke. `cancel` gives up after `timeout` seconds (`etcd_backend.at_most`)."""

    def __init__(self, watch: Any, timeout: float) -> None:
        self._watch = watch
        self._timeout = timeout

    async def __aiter__(self) -> AsyncIterator[WatchEvent]:
        try:
            async for event in self._watch:
                kv = event.kv
                deleted = event.kind == aetcd.EventKind.DELETE
                revision = kv.mod_revision
                yield WatchEvent(kv.key.decode(), None if deleted else kv.value, revision)
        except aetcd.RevisionCompactedError as exc:
            raise Compacted(int(exc.compacted_revision)) from None
        except aetcd.ClientError as exc:
            raise Unavailable(f"watch broken: {type(exc).__name__}") from exc

    async def cancel(self) -> None:
        await at_most(self._watch.cancel(), self._timeout)


class EtcdKeys:
    """See the module docstring."""

    def __init__(self, backend: EtcdBackend, change_log: ChangeLog) -> None:
        self.backend = backend
        self.change_log = change_log

    # -- transactions ---------------------------------------------------------------------

    def _tx(self) -> Any:
        return self.backend.client().transactions

    async def _call(self, make: Callable[[aetcd.Client], Awaitable[T]]) -> T:
        return await self.backend.call(make)

    async def _write(self, path: str, make: Callable[[aetcd.Client], Awaitable[T]]) -> T:
        """A write outside a transaction, whose outcome nothing can settle: a call that
        failed after its request may have been sent is `OutcomeUnknown`."""
        try:
            return await self.backend.call(make)
        except OutcomeUnknown:
            raise
        except Unavailable as exc:
            if _never_sent(exc):
                raise
            raise OutcomeUnknown(path) from exc

    async def _transaction(
        self,
        compare: list[Any],
        success: list[Any],
        failure: list[Any] | None = None,
        *,
        landing: Landing | None = None,
    ) -> tuple[bool, list[Any]]:
        """One transaction. When a write's call fails after its request may have been sent,
        `landing` says how to find out whether it was applied (`_settle`): if it was, the
        call succeeds (responses carrying only its revision); if it cannot be known in
        time, `OutcomeUnknown`; without `landing`, `OutcomeUnknown` at once. With `landing`,
        the call and the finding out each have `SETTLED_WRITE_SHARE` of the store timeout."""
        share = None if landing is None else self.backend.timeout * SETTLED_WRITE_SHARE
        try:
            return await self.backend.transaction(compare, success, failure, timeout=share)
        except OutcomeUnknown:
            raise
        except Unavailable as exc:
            writes = [op for op in success if not isinstance(op, transactions.Get)]
            if not writes or _never_sent(exc):
                raise
            if landing is None:
                raise OutcomeUnknown(_first_key(writes)) from exc
            revision = await self._settle(landing, exc)
            return True, _landed_responses(success, revision)

    async def _settle(self, landing: Landing, failure: Unavailable) -> int:
        """The revision at which the write `landing` describes was applied, found within
        `SETTLED_WRITE_SHARE` of the store timeout (`settling.settle`)."""
        tx = self._tx()
        reads = [tx.get(to_key(landing.path))]
        if landing.record is not None:
            reads.append(tx.get(to_key(landing.record)))

        async def read() -> Found:
            _, found = await self.backend.transaction([], reads)
            current = found[0][0] if found[0] else None
            record = found[1][0][1].mod_revision if landing.record is not None and found[1] \
                else None
            return Found(
                None if record is None else int(record),
                None if current is None else Versioned(current[0], int(current[1].mod_revision)),
            )

        return await settle(landing, read, self.backend.timeout * SETTLED_WRITE_SHARE, failure)

    async def _recorded_transaction(
        self,
        compare: list[Any],
        success: list[Any],
        failure: list[Any] | None = None,
        *,
        writes: Mapping[str, bytes | None],
        trees: Sequence[str] = (),
        landing: Landing | None = None,
    ) -> tuple[bool, list[Any]]:
        """`_transaction` that, when a change context is current, adds the change record to
        the same transaction. `writes`: the keys the transaction puts (their new value) or
        deletes (None); `trees`: roots it deletes with everything under them. The values
        before are read first and guarded, so the record holds exactly what the transaction
        replaced; when only that guard fails (a concurrent writer), it reads and tries again,
        when the caller's own conditions fail, it answers as `_transaction` does. A failed
        call is settled by its record; without one, by `landing`."""
        context = current_change()
        writes = {path: v for path, v in writes.items() if paths.in_change_history(path)}
        trees = [path for path in trees if paths.in_change_history(path + "/")]
        if context is None or not (writes or trees):
            return await self._transaction(compare, success, failure, landing=landing)
        for attempt in range(MAX_CAS_ATTEMPTS):
            changes, guards, revisions = await self._before(writes, trees)
            key, value = self.change_log.record(context, changes)
            tx = self._tx()
            path = next((p for p in writes if revisions[p]), next(iter([*writes, *trees])))
            by_record = Landing(path, record=key, since=revisions.get(path, 0))
            ok, responses = await self._transaction(
                compare + guards, [*success, tx.put(to_key(key), value)], failure,
                landing=by_record,
            )
            if ok:
                return ok, responses
            ok, responses = await self._transaction(compare, [], failure)
            if not ok:
                return ok, responses
            await conflict_backoff(attempt)
        raise BadVersion(", ".join([*writes, *trees]))

    async def _before(
        self, writes: Mapping[str, bytes | None], trees: Sequence[str]
    ) -> tuple[list[KeyChange], list[Any], dict[str, int]]:
        """The changes `writes` and `trees` make to what etcd holds now, the compares that
        hold while it still holds that, and the `mod_revision` of each of `writes` (0:
        absent)."""
        tx = self._tx()
        reads = [tx.get(to_key(path)) for path in writes]
        for path in trees:
            start, end = child_range(path)
            reads.append(tx.get(start, range_end=end))
        _, responses = await self._transaction([], reads)
        changes: list[KeyChange] = []
        guards: list[Any] = []
        revisions: dict[str, int] = {}
        for (path, after), found in zip(writes.items(), responses, strict=False):
            revision = revisions[path] = int(found[0][1].mod_revision) if found else 0
            guards.append(tx.mod(to_key(path)) == revision)
            changes.append(KeyChange(path, found[0][0] if found else None, after))
        for path, children in zip(trees, responses[len(writes) :], strict=True):
            top = 0  # every child is at most this old; a key written since is newer
            for value, meta in children:
                changes.append(KeyChange(meta.key.decode(), value, None))
                top = max(top, int(meta.mod_revision))
            start, end = child_range(path)
            guards.append(tx.mod(start, range_end=end) < top + 1)
        return changes, guards, revisions

    def _compare(self, guard: Guard) -> Any:
        tx = self._tx()
        key = to_key(guard.path)
        if guard.kind is GuardKind.TREE:
            start, end = child_range(guard.path)
            return tx.mod(start, range_end=end) < guard.revision + 1
        if guard.kind is GuardKind.VALUE:
            return tx.version(key) == 0 if guard.value is None else tx.value(key) == guard.value
        return tx.mod(key) == guard.revision

    # -- reads ----------------------------------------------------------------------------

    async def get(self, path: str) -> Versioned | None:
        result = await self._call(lambda c: c.get(to_key(path)))
        if result is None:
            return None
        return Versioned(result.value, result.mod_revision)

    async def read_range(self, path: str, *, prefix: bool, watching: bool = True) -> RangeSnapshot:
        """As `MetadataStore.read_range` (`watching` makes no difference on etcd: a watch
        starts from any revision still kept)."""
        if prefix:
            start, _ = child_range(path)
            result = await self._call(lambda c: c.get_prefix(start))
            entries = {kv.key.decode(): Versioned(kv.value, kv.mod_revision) for kv in result}
        else:
            key = to_key(path)
            result = await self._call(lambda c: c.get_prefix(key))
            entries = {
                kv.key.decode(): Versioned(kv.value, kv.mod_revision)
                for kv in result
                if kv.key == key
            }
        return RangeSnapshot(entries, int(result.header.revision))

    async def lease_of(self, path: str) -> int | None:
        result = await self._call(lambda c: c.get(to_key(path)))
        return int(result.lease) if result is not None and result.lease else None

    async def watch(self, path: str, *, prefix: bool, start_revision: int) -> EtcdWatch:
        if prefix:
            key, range_end = child_range(path)
        else:
            key, range_end = to_key(path), None
        return await self._watch(key, range_end, start_revision)

    async def watch_keys(self, first: str, end: str, *, start_revision: int) -> EtcdWatch:
        return await self._watch(to_key(first), to_key(end), start_revision)

    async def _watch(self, key: bytes, range_end: bytes | None, start_revision: int) -> EtcdWatch:
        try:
            watch = await self._call(
                lambda c: c.watch(key, range_end=range_end, start_revision=start_revision)
            )
        except aetcd.RevisionCompactedError as exc:
            raise Compacted(int(exc.compacted_revision)) from None
        except aetcd.WatchTimeoutError as exc:
            raise Unavailable("metadata store unavailable: the watch was not created") from exc
        return EtcdWatch(watch, self.backend.timeout)

    async def revision(self) -> int:
        result = await self._call(lambda c: c.get_prefix(b"\0", keys_only=True))
        return int(result.header.revision)

    async def compact(self, revision: int) -> None:
        await self._call(lambda c: c.compact(revision, physical=True))

    # -- writes ---------------------------------------------------------------------------

    async def put(self, path: str, value: bytes, expected_revision: int | None) -> int:
        if expected_revision is None:
            tx = self._tx()
            _, responses = await self._recorded_transaction(
                [], [tx.put(to_key(path), value)], writes={path: value},
                landing=Landing(path, value),
            )
            return int(responses[0].response_put.header.revision)
        try:
            return await self.commit([Guard(path, expected_revision)], {path: value}, (), ())
        except BadVersion:
            raise AlreadyExists(path) if expected_revision == 0 else BadVersion(path) from None

    async def put_if_revision(
        self,
        path: str,
        value: bytes,
        expected_revision: int,
        *,
        lease: int | None = None,
        requires: str | None = None,
    ) -> tuple[bool, Versioned | None]:
        tx = self._tx()
        key = to_key(path)
        compare = [tx.mod(key) == expected_revision]
        failure = [tx.get(key)]
        if requires is not None:
            compare.append(tx.version(to_key(requires)) > 0)
            failure.append(tx.get(to_key(requires)))
        ok, responses = await self._recorded_transaction(
            compare, [tx.put(key, value, lease=lease)], failure, writes={path: value},
            landing=Landing(path, value, since=expected_revision),
        )
        if ok:
            return True, Versioned(value, int(responses[0].response_put.header.revision))
        if requires is not None and not responses[1]:
            raise NotFound(requires)
        found = responses[0]  # a range response: [(value, metadata)] for the key, if present
        if not found:
            return False, None
        current, meta = found[0]
        return False, Versioned(current, int(meta.mod_revision))

    async def delete(self, path: str, expected_revision: int | None) -> int:
        key = to_key(path)
        tx = self._tx()
        compare = [tx.version(key) > 0]
        if expected_revision is not None:
            compare.append(tx.mod(key) == expected_revision)
        ok, responses = await self._recorded_transaction(
            compare, [tx.delete(key)], writes={path: None}
        )
        if not ok:
            if expected_revision is not None and await self.get(path) is not None:
                raise BadVersion(path)
            raise NotFound(path)
        return int(responses[0].response_delete_range.header.revision)

    async def delete_children(self, path: str) -> int:
        start, end = child_range(path)
        tx = self._tx()
        _, responses = await self._recorded_transaction(
            [], [tx.delete(start, range_end=end)], writes={}, trees=[path]
        )
        return int(responses[0].response_delete_range.header.revision)

    async def commit(
        self,
        guards: Sequence[Guard],
        puts: Mapping[str, bytes],
        delete_trees: Sequence[str],
        deletes: Sequence[str],
    ) -> int:
        tx = self._tx()
        compare = [self._compare(guard) for guard in guards]
        success = [tx.put(to_key(path), value) for path, value in puts.items()]
        success += [tx.delete(to_key(path)) for path in deletes]
        for path in delete_trees:
            start, end = child_range(path)
            success += [tx.delete(to_key(path)), tx.delete(start, range_end=end)]
        writes: dict[str, bytes | None] = dict(puts)
        writes.update((path, None) for path in [*deletes, *delete_trees])
        landing: Landing | None = None
        if len(puts) == 1 and not deletes and not delete_trees:
            [(path, value)] = puts.items()
            since = [g.revision for g in guards if g.kind is GuardKind.REVISION and g.path == path]
            landing = Landing(path, value, since=since[0] if since else 0)
        ok, responses = await self._recorded_transaction(
            compare, success, writes=writes, trees=delete_trees, landing=landing
        )
        if not ok:
            raise BadVersion(", ".join(guard.path for guard in guards))
        if not responses:
            return 0
        first = responses[0]
        kind = first.WhichOneof("response")
        return int(getattr(first, kind).header.revision)

    async def swap(
        self,
        path: str,
        guard: Guard,
        value: bytes | None,
        records: Sequence[tuple[str, bytes]] = (),
    ) -> int:
        tx = self._tx()
        key = to_key(path)
        success = [tx.delete(key) if value is None else tx.put(key, value)]
        success += [tx.put(to_key(record_key), record) for record_key, record in records]
        own = guard.kind is GuardKind.REVISION and guard.path == path
        landing: Landing | None = Landing(
            path, value, records[0][0] if records else None, guard.revision if own else 0
        )
        if value is None and not records:
            landing = None  # a delete leaves no value to find
        started = layer_times.wall_start()
        ok, responses = await self._transaction([self._compare(guard)], success, landing=landing)
        layer_times.wall_stop("etcd round trip (wall)", started)
        if not ok:
            raise BadVersion(path)
        first = responses[0]
        return int(getattr(first, first.WhichOneof("response")).header.revision)

    async def put_ephemeral(self, path: str, value: bytes, lease: int) -> None:
        tx = self._tx()
        await self._transaction(
            [], [tx.put(to_key(path), value, lease=lease)], landing=Landing(path, value)
        )

    async def create_sequential(self, prefix: str, value: bytes, lease: int | None) -> str:
        previous = await self._write(prefix, lambda c: c.put(to_key(prefix), b"", prev_kv=True))
        n = 0 if previous.prev_kv is None else int(previous.prev_kv.version)
        path = f"{prefix}{n:010d}"
        written, _ = await self.put_at_version(path, value, 0, lease=lease)
        if not written:
            raise AlreadyExists(path)
        return path

    async def take_sequential_number(self, parent: str, name: str, lease: int) -> int:
        """As Pulsar's ledger-id generator on etcd: write `parent` unconditionally, its
        version after the write is `n`; `parent/<name><n>` (unpadded) is created on `lease`
        and deleted."""
        n = await self.put_returning_version(parent, b"")
        key = f"{parent}/{name}{n}"
        written, _ = await self.put_at_version(key, b"", 0, lease=lease)
        if not written:
            raise AlreadyExists(key)
        await self.delete_at_version(key, None)  # already gone (the lease ended): as good
        return n

    # -- leases ---------------------------------------------------------------------------

    async def grant_lease(self, ttl: int) -> int:
        lease = await self._call(lambda c: c.lease(ttl))
        return int(lease.id)

    async def refresh_lease(self, lease: int) -> bool:
        reply = await self._call(lambda c: c.refresh_lease(lease))
        return reply is not None and int(reply.TTL) > 0

    async def revoke_lease(self, lease: int) -> None:
        try:
            await self._call(lambda c: c.revoke_lease(lease))
        except aetcd.ClientError as exc:
            if "lease not found" not in str(exc):
                raise

    # -- etcd versions --------------------------------------------------------------------

    async def get_with_version(self, path: str) -> tuple[bytes, int] | None:
        result = await self._call(lambda c: c.get(to_key(path)))
        return None if result is None else (result.value, int(result.version))

    async def scan(
        self, start: str, end: str, *, limit: int, keys_only: bool
    ) -> tuple[list[tuple[str, bytes, int]], bool]:
        if limit < 1:
            raise ValueError("limit must be at least 1")
        response = await self._range(rpc.RangeRequest(
            key=start.encode(), range_end=end.encode(), limit=limit, keys_only=keys_only
        ))  # fmt: skip
        items = [(kv.key.decode(), kv.value, int(kv.version)) for kv in response.kvs]
        return items, bool(response.more)

    async def put_at_version(
        self, path: str, value: bytes, version: int, *, lease: int | None = None
    ) -> tuple[bool, bool]:
        tx = self._tx()
        key = to_key(path)
        ok, responses = await self._transaction(
            [tx.version(key) == version], [tx.put(key, value, lease=lease)], [tx.get(key)],
            landing=Landing(path, value),
        )
        return ok, (not ok and bool(responses and responses[0]))

    async def put_returning_version(self, path: str, value: bytes) -> int:
        result = await self._write(path, lambda c: c.put(to_key(path), value, prev_kv=True))
        return 0 if result.prev_kv is None else int(result.prev_kv.version)

    async def delete_at_version(self, path: str, version: int | None) -> tuple[bool, bool]:
        tx = self._tx()
        key = to_key(path)
        compare = [tx.version(key) > 0]
        if version is not None:
            compare.append(tx.version(key) == version)
        ok, responses = await self._transaction(compare, [tx.delete(key)], [tx.get(key)])
        return ok, (not ok and bool(responses and responses[0]))

    # -- change history -------------------------------------------------------------------

    async def _range(self, request: rpc.RangeRequest) -> Any:
        """A range request with the options the client's helpers leave out (limits, sorting
        and filters by revision), sent on the client's own stub (connected first: the stub
        exists only once the client has connected)."""
        timeout = self.backend.timeout

        async def call(client: aetcd.Client) -> Any:
            await client.connect()
            return await client.kvstub.Range(request, timeout=timeout, metadata=client.metadata)

        return await self._call(call)

    def _history_request(self, **options: Any) -> rpc.RangeRequest:
        start, end = child_range(paths.CHANGE_HISTORY)
        return rpc.RangeRequest(key=start, range_end=end, **options)

    async def read_changes(self, since: int, limit: int, prefix: str) -> list[ChangeRecord]:
        found: list[ChangeRecord] = []
        page = max(limit, 100)
        while len(found) < limit:
            response = await self._range(self._history_request(
                min_create_revision=since + 1, limit=page,
                sort_order=rpc.RangeRequest.ASCEND, sort_target=rpc.RangeRequest.CREATE,
            ))  # fmt: skip
            records = self._decode_changes(response.kvs)
            if not records:
                break
            last = records[-1].revision
            if response.more:
                whole = [r for r in records if r.revision < last]
                if not whole:  # one transaction fills the page: read all of it
                    whole = await self._changes_at(last)
                records = whole
            records.sort(key=lambda r: (r.revision, r.sequence))
            for record in records:
                if not prefix or record.touches(prefix):
                    found.append(record)
            since = records[-1].revision
            if not response.more:
                break
        return whole_transactions(found, limit)

    async def _changes_at(self, revision: int) -> list[ChangeRecord]:
        response = await self._range(self._history_request(
            min_create_revision=revision, max_create_revision=revision
        ))  # fmt: skip
        return self._decode_changes(response.kvs)

    def _decode_changes(self, kvs: Any) -> list[ChangeRecord]:
        decode = self.change_log.decode
        return [
            record
            for kv in kvs
            for record in decode(kv.key.decode(), kv.value, int(kv.create_revision))
        ]

    async def prune_changes(self, max_records: int, max_age_seconds: float) -> int:
        deleted = 0
        tx = self._tx()
        if max_age_seconds > 0:
            start, _ = child_range(paths.CHANGE_HISTORY)
            cutoff = to_key(self.change_log.age_cutoff_key(max_age_seconds))
            _, responses = await self._transaction([], [tx.delete(start, range_end=cutoff)])
            deleted += int(responses[0].response_delete_range.deleted)
        if max_records > 0:
            counted = await self._range(self._history_request(count_only=True))
            excess = int(counted.count) - max_records
            if excess > 0:
                oldest = await self._range(self._history_request(
                    limit=excess, keys_only=True,
                    sort_order=rpc.RangeRequest.ASCEND, sort_target=rpc.RangeRequest.CREATE,
                ))  # fmt: skip
                keys = [kv.key for kv in oldest.kvs]
                for at in range(0, len(keys), PRUNE_BATCH):
                    ops = [tx.delete(key) for key in keys[at : at + PRUNE_BATCH]]
                    await self._transaction([], ops)
                deleted += len(keys)
        return deleted
