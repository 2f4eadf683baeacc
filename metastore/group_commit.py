"""Group commit of one key's read-modify-write updates, optionally pipelined.

Writers of one key queue their mutations; a single `KeyWriter` per key applies every queued
mutation to one draft and writes the result in one transaction (a batch), guarded by the
key's `mod_revision`. With a pipeline depth above 1, while a transaction is in flight the next
batch is already applied to the value the first one writes and sent, guarded by that value
itself (`value == expected`), so etcd's commit of one batch overlaps the next. That pays when
etcd is remote or its disk slow; on a small machine that runs etcd too, the extra bytes of the
value comparison cost more CPU than the overlap saves (BENCHMARKS.md), so the default is 1.

A batch is committed when its own transaction succeeded, and only then. When one fails,
the batches behind it are waited for; those that lost a CAS (they started from a state that
did not commit) are retried, in order, from a fresh read, and any other error fails its
callers. A chained batch that succeeds after an earlier one failed found a value equal to the
one it expected (another writer wrote the same bytes): its mutations, which depend only on
the value, are correct on it, and the failed batch is retried after it. Never take a later
success as proof that an earlier batch committed: with equal values (a counter that another
writer also moved from 5 to 6) it is not.

With nothing in flight, a batch waits briefly before it is sent for the writers the last batch
answered (`KeyWriter._gather`): a writer that repeats its writes (a client setting one rack
after another) queues its next update a moment after its answer. Without the wait, clients
that each wait for their answer split into two halves that alternate, each waiting for the
other's transaction before its own (8 clients: 4 updates per transaction); with it, one
transaction carries nearly all of them. The wait ends when as many updates as were answered
are queued again, and after at most half the last transaction's round trip
(`GATHER_SHARE`, at most `GATHER_MAX_SECONDS`); a writer alone (nothing else queued) never
waits.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from metastore import layer_times, paths
from metastore.change_history import (
    FULL_DOCUMENTS_UP_TO,
    ChangeContext,
    KeyChange,
    apply_changed_parts,
    changed_parts,
    current_change,
)
from metastore.codec import dump_json, load_json, load_stored
from metastore.errors import BadVersion, InvalidValue
from metastore.guards import Guard
from metastore.retry import MAX_CAS_ATTEMPTS, conflict_backoff
from metastore.versioned import NOT_CACHED, NotCached, Versioned

log = logging.getLogger(__name__)

PendingUpdate = tuple[
    Callable[["Draft"], None], "asyncio.Future[Versioned | None]", ChangeContext | None
]
Recorded = list[tuple[str, bytes]]  # change records (key, value) of a batch

RecordChange = Callable[[ChangeContext, KeyChange], tuple[str, bytes]]

# A batch whose updates are recorded (metastore.change_history) holds at most this many of
# them and about this many bytes of records: one transaction carries them all, and etcd
# refuses one of more than 128 operations or 1.5 MiB (its defaults). The rest go in the next.
MAX_RECORDED_UPDATES = 100
MAX_RECORDED_BYTES = 1024 * 1024 - 64 * 1024  # room for the value itself

# How long a batch waits for the writers the last one answered (module docstring): this share
# of the last transaction's round trip, and never longer than GATHER_MAX_SECONDS.
GATHER_SHARE = 0.5
GATHER_MAX_SECONDS = 0.001


class KeyStore(Protocol):
    """What group commit needs of the store (`metastore.store.MetadataStore` implements it)."""

    async def get(self, path: str) -> Versioned | None:
        """The key as etcd holds it now."""

    def cached(self, path: str) -> Versioned | NotCached | None:
        """The key as a watch-fed cache holds it, or `NOT_CACHED`."""

    def write_through(self, path: str, value: bytes | None, revision: int) -> None:
        """Tell the caches about a committed write (None: a delete)."""

    async def swap(
        self, path: str, guard: Guard, value: bytes | None, records: Recorded = ...
    ) -> int:
        """Write `value` (None: delete) if `guard` holds: the new revision, else `BadVersion`;
        `records`, the change records of the batch's updates, go in the same transaction."""

    def change_record(self, context: ChangeContext, change: KeyChange) -> tuple[str, bytes]:
        """The key and value of the change record of one update."""


class Draft:
    """A key's value while a batch of mutations runs: bytes or parsed JSON, converted only
    when the next mutation needs the other form, so JSON batches parse and dump once."""

    def __init__(self, path: str, raw: bytes | None, parsed: Any = None) -> None:
        self.path = path
        self._raw = raw
        self._doc: Any = parsed
        self._parsed = parsed is not None
        self._finalize: Callable[[Any], Any] | None = None
        self.changed = False

    def raw(self) -> bytes | None:
        if self._parsed:
            doc = self._doc
            if doc is not None and self._finalize is not None:
                doc = self._doc = self._finalize(doc)  # the next batch starts from it
            self._raw = None if doc is None else dump_json(doc)
            self._parsed = False
        return self._raw

    def doc(self) -> Any:
        if not self._parsed:
            self._doc = None if self._raw is None else load_stored(self.path, self._raw)
            self._parsed = True
        return self._doc

    @property
    def parsed_doc(self) -> Any:
        """The document in parsed form after the batch, if the batch worked on it."""
        return self._doc if self._parsed or self._finalize is not None else None

    def snapshot(self) -> bytes | None:
        """The value as `raw()` would give it now, leaving the draft in its current form (a
        recorded batch takes one after each update)."""
        if not self._parsed:
            return self._raw
        doc = self._doc
        if doc is not None and self._finalize is not None:
            doc = self._finalize(doc)
        return None if doc is None else dump_json(doc)

    def set_raw(self, value: bytes | None) -> None:
        self._raw, self._parsed, self.changed = value, False, True

    def set_doc(self, doc: Any, finalize: Callable[[Any], Any] | None) -> None:
        self._doc, self._parsed, self.changed = doc, True, True
        self._finalize = finalize or self._finalize


@dataclass
class _Batch:
    updates: list[PendingUpdate]
    failures: dict[int, Exception]
    value: bytes | None = None
    write: asyncio.Task[int] | None = None  # None: the batch changed nothing
    sent: float = 0.0  # the event loop's time when the write was sent
    recorded: Recorded = field(default_factory=list)

    def done(self) -> bool:
        return self.write is None or self.write.done()

    def error(self) -> BaseException | None:
        if self.write is None:
            return None
        return asyncio.CancelledError() if self.write.cancelled() else self.write.exception()


@dataclass
class _Tip:
    """The key's value once every batch in flight has committed."""

    value: bytes | None
    doc: Any


class GroupCommit:
    """The queues of pending updates, one writer task per key with updates queued, and the
    parsed form of this process's last write per key."""

    def __init__(self, store: KeyStore, pipeline_depth: int = 1) -> None:
        if pipeline_depth < 1:
            raise ValueError("pipeline_depth must be at least 1")
        self.store = store
        self.pipeline_depth = pipeline_depth
        self._queues: dict[str, list[PendingUpdate]] = {}
        self._writers: dict[str, KeyWriter] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        # The parsed JSON of this process's last write per key, reused while etcd still holds
        # that revision (saves parsing a large document, e.g. the rack map, on every batch).
        self._parsed: dict[str, tuple[int, Any]] = {}

    async def submit(self, path: str, apply: Callable[[Draft], None]) -> Versioned | None:
        """Queue `apply` for `path` and wait until the batch holding it is answered."""
        future: asyncio.Future[Versioned | None] = asyncio.get_running_loop().create_future()
        # The writer task runs in the context of whoever started it: take the caller's now.
        context = current_change() if paths.in_change_history(path) else None
        self._queues.setdefault(path, []).append((apply, future, context))
        writer = self._writers.get(path)
        if writer is not None:
            writer.wake()
        else:
            writer = self._writers[path] = KeyWriter(self, path)
            task = asyncio.create_task(self._write(writer), name=f"update {path}")
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return await future

    def has_queued(self, path: str) -> bool:
        return bool(self._queues.get(path))

    def queued(self, path: str) -> int:
        return len(self._queues.get(path, ()))

    def take(self, path: str) -> list[PendingUpdate]:
        """Every update queued for `path`; the caller must answer each one."""
        return self._queues.pop(path, [])

    def requeue(self, path: str, updates: list[PendingUpdate]) -> None:
        """Put `updates` back in front of those queued since."""
        self._queues[path] = updates + self._queues.get(path, [])

    def remember_parsed(self, path: str, revision: int, doc: Any) -> None:
        self._parsed[path] = (revision, doc)

    def recall_parsed(self, path: str, revision: int) -> Any:
        """The parsed document last written at `path` if it is still at `revision`, else None."""
        held = self._parsed.pop(path, None)
        return held[1] if held is not None and held[0] == revision else None

    async def _write(self, writer: KeyWriter) -> None:
        try:
            await writer.run()
        except BaseException as exc:
            fail(self.take(writer.path), exc)
            raise
        finally:
            self._writers.pop(writer.path, None)


@dataclass
class KeyWriter:
    owner: GroupCommit
    path: str
    in_flight: deque[_Batch] = field(default_factory=deque)
    tip: _Tip | None = None
    committed: Versioned | None = None  # the key after the last batch that committed
    conflicts: int = 0
    answered: int = 0  # updates answered since the last batch was sent
    round_trip: float = 0.0  # seconds, the last committed transaction's
    _wakeup: asyncio.Future[None] | None = None

    @property
    def store(self) -> KeyStore:
        return self.owner.store

    def wake(self) -> None:
        """New updates are queued: stop waiting for the batch in flight to send them."""
        if self._wakeup is not None and not self._wakeup.done():
            self._wakeup.set_result(None)

    async def run(self) -> None:
        depth = self.owner.pipeline_depth
        try:
            while True:
                if self.owner.has_queued(self.path) and len(self.in_flight) < depth:
                    if not self.in_flight:
                        await self._gather()
                    self.answered = 0
                    await self._send(self.owner.take(self.path))
                elif self.in_flight:
                    await self._wait(room_for_more=len(self.in_flight) < depth)
                    await self._settle()
                else:
                    return
        except BaseException as exc:
            self._fail_in_flight(exc)
            raise

    async def _gather(self) -> None:
        """Wait until the writers the last batch answered have queued again (as many updates
        as were answered, on top of those queued already), at most `GATHER_SHARE` of the last
        round trip: one transaction for what would otherwise take two."""
        window = min(self.round_trip * GATHER_SHARE, GATHER_MAX_SECONDS)
        if self.answered == 0 or window <= 0:
            return
        target = self.owner.queued(self.path) + self.answered
        loop = asyncio.get_running_loop()
        deadline = loop.time() + window
        while self.owner.queued(self.path) < target and (left := deadline - loop.time()) > 0:
            self._wakeup = loop.create_future()
            timer = loop.call_later(left, self.wake)
            try:
                await self._wakeup
            finally:
                timer.cancel()
                self._wakeup = None

    async def _send(self, updates: list[PendingUpdate]) -> None:
        """Prepare and send one batch; a failure before it is sent fails these updates only
        (the writer goes on with the others)."""
        try:
            await self._prepare(updates)
        except Exception as exc:
            log.warning("update of %s failed: %s", self.path, brief(exc))
            fail(updates, exc)
            if not self.in_flight:
                self.tip = None  # start the next batch from a fresh read

    async def _prepare(self, updates: list[PendingUpdate]) -> None:
        draft, guard = await self._start()
        assert self.tip is not None
        start = self.tip.value
        recorded: Recorded = []
        failures: dict[int, Exception] = {}
        unencodable = False
        started = layer_times.cpu_start()
        if any(context is not None for _, _, context in updates):
            try:
                taken = apply_recording(draft, start, updates, failures, recorded,
                                        self.store.change_record)  # fmt: skip
            except Unencodable as exc:
                taken, unencodable = exc.taken, True
            layer_times.cpu_stop("change history records (with the mutations)", started)
            started = layer_times.cpu_start()
            if taken < len(updates):
                self.owner.requeue(self.path, updates[taken:])
                updates = updates[:taken]
        else:
            failures = apply_all(draft, [apply for apply, _, _ in updates])
        value: bytes | None = None
        changed = draft.changed
        if changed:
            try:
                if unencodable:
                    raise Unencodable(len(updates))
                value = draft.raw()
                parsed = draft.parsed_doc
                layer_times.cpu_stop("group commit (mutations, serialising)", started)
            except Exception:  # e.g. a lone surrogate: find the updates that cannot encode
                value, changed, recorded = isolate(
                    self.path, start, updates, failures, self.store.change_record
                )
                parsed = None
                self.tip = _Tip(value, None)  # the draft's document holds the failed changes
        batch = _Batch(updates, failures, recorded=recorded)
        if not changed:
            if not self.in_flight:  # nothing to wait for: the key is as it was read
                resolve(batch, self.committed)
                return
            self.in_flight.append(batch)
            return
        batch.value = value
        batch.sent = asyncio.get_running_loop().time()
        batch.write = asyncio.create_task(
            self.store.swap(self.path, guard, value, batch.recorded)
        )
        self.tip = _Tip(value, parsed)
        self.in_flight.append(batch)

    async def _start(self) -> tuple[Draft, Guard]:
        """A draft of the key as the next batch finds it, and the guard of that state."""
        if self.in_flight:
            assert self.tip is not None
            draft = Draft(self.path, self.tip.value, self.tip.doc)
            return draft, Guard.holds(self.path, self.tip.value)
        if self.tip is None:
            await self._load()
            assert self.tip is not None
        revision = 0 if self.committed is None else self.committed.revision
        return Draft(self.path, self.tip.value, self.tip.doc), Guard(self.path, revision)

    async def _load(self) -> None:
        """Start from the cache (first batch) or from etcd (after a failure)."""
        known = self.store.cached(self.path) if self.conflicts == 0 else NOT_CACHED
        if isinstance(known, NotCached):
            known = await self.store.get(self.path)
        self.committed = known
        if known is None:
            self.tip = _Tip(None, None)
        else:
            self.tip = _Tip(known.value, self.owner.recall_parsed(self.path, known.revision))

    async def _wait(self, room_for_more: bool) -> None:
        head = self.in_flight[0]
        if head.done():
            return
        assert head.write is not None
        if not room_for_more:
            await asyncio.wait({head.write})
            return
        self._wakeup = asyncio.get_running_loop().create_future()
        head.write.add_done_callback(lambda _: self.wake())
        await self._wakeup
        self._wakeup = None

    async def _settle(self) -> None:
        """Answer the batches at the head that are done, in order."""
        while self.in_flight and self.in_flight[0].done():
            head = self.in_flight[0]
            if head.error() is not None:
                await self._settle_after_failure()
                return
            self.in_flight.popleft()
            if head.write is not None:
                self._committed(head.value, head.write.result())
                self.round_trip = asyncio.get_running_loop().time() - head.sent
            resolve(head, self.committed)
            self.answered += len(head.updates)

    def _committed(self, value: bytes | None, revision: int) -> None:
        started = layer_times.cpu_start()
        self.conflicts = 0
        self.committed = None if value is None else Versioned(value, revision)
        self.store.write_through(self.path, value, revision)
        layer_times.cpu_stop("cache update (write-through)", started)
        if not self.in_flight and self.tip is not None and self.tip.doc is not None:
            self.owner.remember_parsed(self.path, revision, self.tip.doc)

    async def _settle_after_failure(self) -> None:
        """The head failed: wait for the batches behind it, answer those whose own write
        succeeded, retry or fail the others."""
        await asyncio.wait([b.write for b in self.in_flight if b.write is not None])
        batches = list(self.in_flight)
        self.in_flight.clear()
        self.tip = None
        retry: list[PendingUpdate] = []
        for batch in batches:
            error = batch.error()
            if batch.write is not None and error is None:
                self._committed(batch.value, batch.write.result())
                resolve(batch, self.committed)
            elif batch.write is None or isinstance(error, BadVersion):
                retry += batch.updates  # started from a state that did not commit
            else:
                log.warning("write of %s failed: %s", self.path, brief(error))
                fail(batch.updates, error or BadVersion(self.path))
        if retry:
            await self._requeue(retry)

    async def _requeue(self, updates: list[PendingUpdate]) -> None:
        self.conflicts += 1
        if self.conflicts >= MAX_CAS_ATTEMPTS:
            fail(updates, BadVersion(self.path))
            self.conflicts = 0
            return
        self.owner.requeue(self.path, updates)
        await conflict_backoff(self.conflicts - 1)

    def _fail_in_flight(self, exc: BaseException) -> None:
        for batch in self.in_flight:
            if batch.write is not None:
                batch.write.cancel()
            fail(batch.updates, exc)
        self.in_flight.clear()


def isolate(
    path: str,
    start: bytes | None,
    updates: list[PendingUpdate],
    failures: dict[int, Exception],
    record: RecordChange,
) -> tuple[bytes | None, bool, Recorded]:
    """The batch's result could not be serialised: apply its updates again one at a time from
    `start`, each on the last value that encoded; an update whose result does not encode
    joins `failures` (InvalidValue) and leaves the value as it was. Costs a parse and a dump
    per update, only when a batch fails to encode. Returns the value, whether it changed and
    the records of the updates that carry a change context."""
    value, changed = start, False
    recorded: Recorded = []
    for index, (apply, _, context) in enumerate(updates):
        if index in failures:
            continue
        trial = Draft(path, value)
        try:
            apply(trial)
        except Exception as exc:
            failures[index] = exc
            continue
        try:
            encoded = trial.raw()
        except Exception as exc:
            failures[index] = InvalidValue(path, brief(exc))
            log.warning("update of %s refused: %s", path, brief(exc))
            continue
        if trial.changed:
            if context is not None and encoded != value:
                recorded.append(record(context, KeyChange(path, value, encoded)))
            value, changed = encoded, True
    return value, changed, recorded


class Unencodable(Exception):
    """A recorded batch's value stopped encoding after `taken` updates."""

    def __init__(self, taken: int) -> None:
        super().__init__(f"unencodable after {taken} updates")
        self.taken = taken


def apply_recording(
    draft: Draft,
    start: bytes | None,
    updates: list[PendingUpdate],
    failures: dict[int, Exception],
    recorded: Recorded,
    record: RecordChange,
) -> int:
    """`apply_all` for a batch whose updates are recorded: the value after each update is
    the `before` of the next, and each update with a change context that changed the value
    is recorded. Stops after `MAX_RECORDED_UPDATES` updates or `MAX_RECORDED_BYTES` of
    records and returns how many updates it took; `Unencodable` when a value does not
    encode (the caller isolates the culprit).

    A JSON object is not serialised after every update: a private copy of it (`shadow`) is
    compared with the draft after each update (`changed_parts`), the record is built from
    both (the whole documents, or over `FULL_DOCUMENTS_UP_TO` the parts that differ), and the
    parts that differ are copied into the shadow."""
    before = start
    shadow = _shadow_of(start)
    whole = start is not None and len(start) <= FULL_DOCUMENTS_UP_TO
    size = 0
    for index, (apply, _, context) in enumerate(updates):
        if index >= MAX_RECORDED_UPDATES or size > MAX_RECORDED_BYTES:
            return index
        try:
            apply(draft)
        except Exception as exc:
            failures[index] = exc
            continue
        doc = draft.doc() if shadow is not None else None
        if shadow is not None and isinstance(doc, dict):
            removed, added = changed_parts(shadow, doc)
            if not (removed or added):
                continue
            if context is not None:
                if whole:  # serialised now, before the shadow moves on
                    change = KeyChange(draft.path, None, None, documents=(shadow, doc))
                else:
                    change = KeyChange(draft.path, None, None, parts=(removed, added))
                try:
                    recorded.append(record(context, change))
                except Exception:
                    raise Unencodable(index + 1) from None
                size += len(recorded[-1][1])
            try:
                apply_changed_parts(shadow, removed, added)
            except Exception:
                raise Unencodable(index + 1) from None
            continue
        if shadow is not None:  # no longer a JSON object: record it as stored
            before, shadow = dump_json(shadow), None
        try:
            after = draft.snapshot()
        except Exception:
            raise Unencodable(index + 1) from None
        if context is not None and after != before:
            recorded.append(record(context, KeyChange(draft.path, before, after)))
            size += len(recorded[-1][1])
        before = after
    return len(updates)


def _shadow_of(start: bytes | None) -> dict[str, Any] | None:
    """A private parsed copy of a JSON object, None for anything else."""
    if start is None:
        return None
    try:
        doc = load_json(start)
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None


def brief(exc: BaseException | None, limit: int = 200) -> str:
    """An error's type and message, cut short: logs name the key and reason, never a whole
    document."""
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def resolve(batch: _Batch, state: Versioned | None) -> None:
    for index, (_, future, _) in enumerate(batch.updates):
        if future.done():
            continue
        if index in batch.failures:
            future.set_exception(batch.failures[index])
        else:
            future.set_result(state)


def fail(updates: list[PendingUpdate], exc: BaseException) -> None:
    for _, future, _ in updates:
        if not future.done():
            future.set_exception(exc)


def apply_all(draft: Draft, mutations: list[Callable[[Draft], None]]) -> dict[int, Exception]:
    """Apply mutations in order; one that raises is skipped and reported by its index."""
    failures: dict[int, Exception] = {}
    for index, apply in enumerate(mutations):
        try:
            apply(draft)
        except Exception as exc:
            failures[index] = exc
    return failures
