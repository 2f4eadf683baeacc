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
"""

from __future__ import annotations

import asyncio
import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from metastore.codec import dump_json, load_stored
from metastore.errors import BadVersion
from metastore.versioned import NOT_CACHED, NotCached, Versioned

if TYPE_CHECKING:
    from metastore.store import MetadataStore

MAX_CAS_ATTEMPTS = 64

PendingUpdate = tuple[Callable[["Draft"], None], "asyncio.Future[Versioned | None]"]


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


@dataclass
class KeyWriter:
    store: MetadataStore
    path: str
    in_flight: deque[_Batch] = field(default_factory=deque)
    tip: _Tip | None = None
    committed: Versioned | None = None  # the key after the last batch that committed
    conflicts: int = 0
    _wakeup: asyncio.Future[None] | None = None

    def wake(self) -> None:
        """New updates are queued: stop waiting for the batch in flight to send them."""
        if self._wakeup is not None and not self._wakeup.done():
            self._wakeup.set_result(None)

    async def run(self) -> None:
        try:
            while True:
                queued = self.store._pending.get(self.path)
                if queued and len(self.in_flight) < self.store.pipeline_depth:
                    await self._send(self.store._pending.pop(self.path))
                elif self.in_flight:
                    await self._wait(room_for_more=len(self.in_flight) < self.store.pipeline_depth)
                    await self._settle()
                else:
                    return
        except BaseException as exc:
            self._fail_in_flight(exc)
            raise

    async def _send(self, updates: list[PendingUpdate]) -> None:
        try:
            draft, guard = await self._start()
        except Exception as exc:  # e.g. etcd down: answer these now, not at the deadline
            fail(updates, exc)
            self.tip = None
            return
        failures = apply_all(draft, [apply for apply, _ in updates])
        batch = _Batch(updates, failures)
        if not draft.changed:
            if not self.in_flight:  # nothing to wait for: the key is as it was read
                resolve(batch, self.committed)
                return
            self.in_flight.append(batch)
            return
        batch.value = draft.raw()
        batch.write = asyncio.create_task(self.store._swap_guarded(self.path, guard, batch.value))
        self.tip = _Tip(batch.value, draft.parsed_doc)
        self.in_flight.append(batch)

    async def _start(self) -> tuple[Draft, SwapGuard]:
        """A draft of the key as the next batch finds it, and the guard of that state."""
        if self.in_flight:
            assert self.tip is not None
            return Draft(self.path, self.tip.value, self.tip.doc), ValueGuard(self.tip.value)
        if self.tip is None:
            await self._load()
            assert self.tip is not None
        revision = 0 if self.committed is None else self.committed.revision
        return Draft(self.path, self.tip.value, self.tip.doc), RevisionGuard(revision)

    async def _load(self) -> None:
        """Start from the cache (first batch) or from etcd (after a failure)."""
        known = self.store._cached(self.path) if self.conflicts == 0 else NOT_CACHED
        if isinstance(known, NotCached):
            known = await self.store.get(self.path)
        self.committed = known
        parsed = self.store._parsed.pop(self.path, None)
        current = self.committed
        doc = parsed[1] if parsed and current and parsed[0] == current.revision else None
        self.tip = _Tip(None if current is None else current.value, doc)

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
            resolve(head, self.committed)

    def _committed(self, value: bytes | None, revision: int) -> None:
        self.conflicts = 0
        self.committed = None if value is None else Versioned(value, revision)
        self.store._write_through(self.path, value, revision)
        if not self.in_flight and self.tip is not None and self.tip.doc is not None:
            self.store._parsed[self.path] = (revision, self.tip.doc)

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
                fail(batch.updates, error or BadVersion(self.path))
        if retry:
            await self._requeue(retry)

    async def _requeue(self, updates: list[PendingUpdate]) -> None:
        self.conflicts += 1
        if self.conflicts >= MAX_CAS_ATTEMPTS:
            fail(updates, BadVersion(self.path))
            self.conflicts = 0
            return
        self.store._pending[self.path] = updates + self.store._pending.get(self.path, [])
        await conflict_backoff(self.conflicts - 1)

    def _fail_in_flight(self, exc: BaseException) -> None:
        for batch in self.in_flight:
            if batch.write is not None:
                batch.write.cancel()
            fail(batch.updates, exc)
        self.in_flight.clear()


@dataclass(frozen=True)
class RevisionGuard:
    """The key is still at this mod_revision (0: still absent)."""

    revision: int


@dataclass(frozen=True)
class ValueGuard:
    """The key holds exactly this value (None: is absent)."""

    value: bytes | None


SwapGuard = RevisionGuard | ValueGuard


def resolve(batch: _Batch, state: Versioned | None) -> None:
    for index, (_, future) in enumerate(batch.updates):
        if future.done():
            continue
        if index in batch.failures:
            future.set_exception(batch.failures[index])
        else:
            future.set_result(state)


def fail(updates: list[PendingUpdate], exc: BaseException) -> None:
    for _, future in updates:
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


async def conflict_backoff(attempt: int) -> None:
    """A short random pause after losing a CAS, growing with the attempt number."""
    await asyncio.sleep(random.uniform(0, 0.002 * (attempt + 1)))
