"""The auditor's two periodic data checks, run while it leads (BookKeeper's `Auditor`
check-all-ledgers and replicas-check tasks, `LedgerChecker`; storage-and-perf.md 5.3).

All-ledgers check, every `auditorPeriodicCheckInterval` s (0: off; upstream default one
week): for every fragment of every ledger and each bookie of its ensemble, the first and the
last entry that bookie stores in the fragment under round-robin striping are read from it,
plus `auditorLedgerVerificationPercentage` % (default 0) of the other entries it stores there,
picked at random;
a bookie that is not registered, or that cannot answer one of those reads (no such ledger, no
such entry, an error, a timeout), has lost the fragment, and the ledger is marked
under-replicated with those bookies (merged into an existing mark, as the bookie audit does).
A bookie that stores nothing of a fragment is skipped. The last fragment of an OPEN ledger is
its writer's business and is not read (upstream reads it up to the LAC; here the writer's
ensemble change and the bookie audit cover it).

Replicas check, every `auditorReplicasCheckInterval` s (0: off, as upstream): for CLOSED
ledgers that are not marked, count for each entry the bookies of its write set that hold it
and report (no mark, as upstream) the ledgers with an entry that has no copy, fewer than Qa
copies or fewer than Qw copies. Upstream asks each bookie for the list of entries it holds
(GET_LIST_OF_ENTRIES_OF_LEDGER, a V3 request); our bookies speak the V2 protocol only, so each
entry is read from each bookie of its write set instead, under the same throttle.

Both checks:
- a run starts, after becoming leader, when the interval has passed since the last run's
  start time persisted at `/ledgers/underreplication/checkallledgersctime` and
  `/ledgers/underreplication/replicascheckctime` (text `CheckAllLedgersFormat` /
  `ReplicasCheckFormat`, as upstream), so a restart or a new leader waits only what is left;
  never run before: at once;
- at most `auditorMaxNumberOfConcurrentOpenLedgerOperations` ledgers are checked at a time
  (upstream's name and default, 500), and bookie reads are paced to
  `auditorCheckReadsPerSecond` (an extension of ours, default 2000, 0 = no limit) so a large
  check never starves producers; etcd is read a page of ledgers at a time;
- progress (ledgers checked so far, the last run's start, end and duration, what it found)
  is in `CheckProgress`, which /metrics and the audit status read.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field

from metastore import paths
from metastore.errors import NotFound
from metastore.ledger_metadata import LedgerMetadata
from metastore.ledgers import LedgerMetadataStore
from metastore.versioned_keys import VersionedKeys
from placement import write_set
from storage.autorecovery.config import AutoRecoveryConfig
from storage.autorecovery.marks import UnderReplication
from storage.autorecovery.registry import registered_bookies
from storage.bookie.errors import BookieError
from storage.ledger.bookies import BookiePool

log = logging.getLogger(__name__)

CHECK_ALL_LEDGERS_CTIME = f"{paths.UNDERREPLICATION}/checkallledgersctime"
REPLICAS_CHECK_CTIME = f"{paths.UNDERREPLICATION}/replicascheckctime"
READ_TIMEOUT = 10.0  # s, one entry read of a check

MarkLedger = Callable[[int, Iterable[str]], Awaitable[None]]


@dataclass
class CheckProgress:
    """One periodic check's state, for /metrics and status pages."""

    name: str
    runs: int = 0
    running: bool = False
    ledgers_checked: int = 0  # in the running (or the last) run
    entries_read: int = 0  # in the running (or the last) run
    last_started: float | None = None  # wall clock, s
    last_finished: float | None = None
    last_duration: float | None = None  # s
    found: frozenset[int] = frozenset()  # the last run's marked (or reported) ledgers
    total_ledgers_checked: int = 0  # over all runs
    total_duration: float = 0.0  # s, over all runs


@dataclass
class ReplicasReport:
    """The replicas check's findings: each ledger in its most severe class."""

    no_replica: set[int] = field(default_factory=set)
    below_ack_quorum: set[int] = field(default_factory=set)
    below_write_quorum: set[int] = field(default_factory=set)

    @property
    def ledgers(self) -> frozenset[int]:
        return frozenset(self.no_replica | self.below_ack_quorum | self.below_write_quorum)


class ReadPacer:
    """At most `rate` reads per second over all the check's tasks (0: no limit)."""

    def __init__(self, rate: int) -> None:
        self.rate = rate
        self._next = 0.0

    async def wait(self) -> None:
        if self.rate <= 0:
            await asyncio.sleep(0)
            return
        now = time.monotonic()
        start = max(self._next, now)
        self._next = start + 1 / self.rate
        await asyncio.sleep(start - now)


def stripe_bounds(index: int, start: int, end: int, ensemble_size: int,
                  write_quorum: int) -> tuple[int, int] | None:
    """The first and last entry of [start, end] stored by ensemble member `index`, None when
    it stores none of them."""
    first = next((e for e in range(start, min(end, start + ensemble_size - 1) + 1)
                  if index in write_set(e, ensemble_size, write_quorum)), None)
    if first is None:
        return None
    last = next(e for e in range(end, max(start, end - ensemble_size + 1) - 1, -1)
                if index in write_set(e, ensemble_size, write_quorum))
    return first, last


def checked_fragments(md: LedgerMetadata) -> list[tuple[int, int, tuple[str, ...]]]:
    """(first entry, last entry, ensemble) of each fragment with a known end that holds at
    least one entry; the open fragment of an OPEN ledger is left out."""
    starts = sorted(md.ensembles)
    found = []
    for k, start in enumerate(starts):
        if k + 1 < len(starts):
            end = starts[k + 1] - 1
        elif md.is_closed:
            end = md.last_entry_id
        else:
            continue
        if end >= start:
            found.append((start, end, md.ensembles[start]))
    return found


def encode_ctime(field_name: str, millis: int) -> bytes:
    """`CheckAllLedgersFormat` / `ReplicasCheckFormat` in protobuf text, as upstream's ZK
    underreplication manager stores them."""
    return f"{field_name}: {millis}\n".encode()


def decode_ctime(raw: bytes) -> int | None:
    for line in raw.decode(errors="replace").splitlines():
        _, sep, value = line.partition(":")
        if sep and value.strip().isdigit():
            return int(value.strip())
    return None


class PeriodicChecks:
    def __init__(self, keys: VersionedKeys, marks: UnderReplication, bookies: BookiePool,
                 config: AutoRecoveryConfig, mark: MarkLedger, *, tick: float = 1.0) -> None:
        self.keys = keys
        self.marks = marks
        self.bookies = bookies
        self.config = config
        self.mark = mark
        self.tick = tick
        self.ledgers = LedgerMetadataStore(keys)
        self.all_ledgers = CheckProgress("checkAllLedgers")
        self.replicas = CheckProgress("replicasCheck")
        self.replicas_report = ReplicasReport()
        self.rng = random.Random()

    # -- scheduling -----------------------------------------------------------------------------

    async def run(self) -> None:
        """While the auditor leads: run each enabled check when it is due."""
        cfg = self.config
        schedule = [
            (cfg.auditorPeriodicCheckInterval, CHECK_ALL_LEDGERS_CTIME, "checkAllLedgersCTime",
             self.check_all_ledgers),
            (cfg.auditorReplicasCheckInterval, REPLICAS_CHECK_CTIME, "replicasCheckCTime",
             self.check_replicas),
        ]
        while True:
            for interval, key, field_name, check in schedule:
                if interval <= 0:
                    continue
                last = await self._last_run(key)
                now_ms = int(time.time() * 1000)
                if last is not None and now_ms - last < interval * 1000:
                    continue
                await self.keys.put(key, encode_ctime(field_name, now_ms))
                await check()
            await asyncio.sleep(self.tick)

    async def _last_run(self, key: str) -> int | None:
        found = await self.keys.read(key)
        return None if found is None else decode_ctime(found.value)

    # -- the all-ledgers check ------------------------------------------------------------------

    async def check_all_ledgers(self) -> set[int]:
        """Read each fragment's first and last entry from each bookie that stores it; mark the
        ledgers with bookies that lost a fragment. The ids marked."""
        progress = self.all_ledgers
        available = await registered_bookies(self.keys)
        pacer = ReadPacer(self.config.auditorCheckReadsPerSecond)
        marked: set[int] = set()

        async def one(md: LedgerMetadata) -> None:
            lost = await self._lost_bookies(md, available, pacer, progress)
            if lost:
                await self.mark(md.ledger_id, lost)
                marked.add(md.ledger_id)

        await self._each_ledger(progress, one)
        progress.found = frozenset(marked)
        if marked:
            log.warning("check of all ledgers marked %d ledgers: %s", len(marked),
                        sorted(marked)[:20])
        return marked

    async def _lost_bookies(self, md: LedgerMetadata, available: frozenset[str],
                            pacer: ReadPacer, progress: CheckProgress) -> set[str]:
        lost: set[str] = set()
        for start, end, ensemble in checked_fragments(md):
            for index, bookie in enumerate(ensemble):
                if bookie in lost:
                    continue
                bounds = stripe_bounds(index, start, end, md.ensemble_size,
                                       md.write_quorum_size)
                if bounds is None:
                    continue
                if bookie not in available:
                    lost.add(bookie)
                    continue
                for entry_id in self._to_read(index, bounds, md):
                    await pacer.wait()
                    progress.entries_read += 1
                    if not await self._holds(bookie, md.ledger_id, entry_id):
                        lost.add(bookie)
                        break
        return lost

    def _to_read(self, index: int, bounds: tuple[int, int], md: LedgerMetadata) -> list[int]:
        """The stripe's first and last entry, and the sampled share of the entries between."""
        first, last = bounds
        wanted = {first, last}
        percentage = self.config.auditorLedgerVerificationPercentage
        if percentage > 0 and last - first > 1:
            between = [e for e in range(first + 1, last)
                       if index in write_set(e, md.ensemble_size, md.write_quorum_size)]
            count = len(between) * percentage // 100
            wanted.update(self.rng.sample(between, count))
        return sorted(wanted)

    async def _holds(self, bookie: str, ledger_id: int, entry_id: int) -> bool:
        try:
            connection = await asyncio.wait_for(self.bookies.get(bookie), READ_TIMEOUT)
            await asyncio.wait_for(connection.read(ledger_id, entry_id), READ_TIMEOUT)
        except (BookieError, OSError, TimeoutError) as exc:
            log.info("check: %s cannot read %d:%d: %s", bookie, ledger_id, entry_id, exc)
            return False
        return True

    # -- the replicas check ---------------------------------------------------------------------

    async def check_replicas(self) -> ReplicasReport:
        """Count the copies of every entry of every CLOSED, unmarked ledger; report the ledgers
        short of copies (no marks)."""
        progress = self.replicas
        marked = {m.ledger_id for m in await self.marks.marks()}
        pacer = ReadPacer(self.config.auditorCheckReadsPerSecond)
        report = ReplicasReport()

        async def one(md: LedgerMetadata) -> None:
            if not md.is_closed or md.ledger_id in marked:
                return
            fewest = md.write_quorum_size
            for start, end, ensemble in checked_fragments(md):
                for entry_id in range(start, end + 1):
                    copies = 0
                    for index in write_set(entry_id, md.ensemble_size, md.write_quorum_size):
                        await pacer.wait()
                        progress.entries_read += 1
                        if await self._holds(ensemble[index], md.ledger_id, entry_id):
                            copies += 1
                    fewest = min(fewest, copies)
            if fewest == 0:
                report.no_replica.add(md.ledger_id)
            elif fewest < md.ack_quorum_size:
                report.below_ack_quorum.add(md.ledger_id)
            elif fewest < md.write_quorum_size:
                report.below_write_quorum.add(md.ledger_id)

        await self._each_ledger(progress, one)
        self.replicas_report = report
        progress.found = report.ledgers
        if report.ledgers:
            log.warning("replicas check: no copy of an entry %s, below Qa %s, below Qw %s",
                        sorted(report.no_replica), sorted(report.below_ack_quorum),
                        sorted(report.below_write_quorum))
        return report

    # -- shared ---------------------------------------------------------------------------------

    async def _each_ledger(self, progress: CheckProgress,
                           check: Callable[[LedgerMetadata], Awaitable[None]]) -> None:
        """`check` every ledger, at most the configured number at a time."""
        progress.running = True
        progress.ledgers_checked = progress.entries_read = 0
        progress.last_started = time.time()
        started = time.monotonic()
        limit = max(1, self.config.auditorMaxNumberOfConcurrentOpenLedgerOperations)
        running: set[asyncio.Task[None]] = set()
        failed: list[BaseException] = []

        async def guarded(md: LedgerMetadata) -> None:
            try:
                await check(md)
            finally:
                progress.ledgers_checked += 1
                progress.total_ledgers_checked += 1

        def done(task: asyncio.Task[None]) -> None:
            running.discard(task)
            if not task.cancelled() and task.exception() is not None:
                failed.append(task.exception())  # type: ignore[arg-type]

        try:
            async for stored in self.ledgers.ledgers():
                while len(running) >= limit:
                    await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
                if failed:
                    break
                task = asyncio.create_task(guarded(stored.metadata))
                running.add(task)
                task.add_done_callback(done)
            if running:
                await asyncio.wait(running)
            if failed:
                raise failed[0]
        finally:
            for task in list(running):
                task.cancel()
            for task in list(running):
                with contextlib.suppress(BaseException):
                    await task
            progress.running = False
            progress.runs += 1
            progress.last_finished = time.time()
            progress.last_duration = time.monotonic() - started
            progress.total_duration += progress.last_duration


async def forget_last_runs(keys: VersionedKeys) -> None:
    """Drop the persisted run times (the next leader runs both checks at once)."""
    for key in (CHECK_ALL_LEDGERS_CTIME, REPLICAS_CHECK_CTIME):
        with contextlib.suppress(NotFound):
            await keys.delete(key)
