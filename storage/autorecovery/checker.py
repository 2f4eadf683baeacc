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
A bookie that stores nothing of a fragment is skipped.
The last fragment of a ledger that is not CLOSED is checked up to its last-add-confirmed, as
upstream's `LedgerChecker` after `openLedgerNoRecovery`: the LAC is the highest one that the
bookies of the last ensemble piggy-back on their last entry (a plain read of entry -1, never
a fencing one; `ReadLastConfirmedOp`), once their answers cover every write set; when the LAC
is below the fragment's first entry, that entry is read from its write set and the fragment
[first, first] is checked only if some bookie answers anything but "no such entry/ledger"
(`EntryExistsCallback`). When the answers do not cover the write sets (upstream cannot open
the ledger and checks none of it), the ledger's other fragments are still checked here.

Replicas check, every `auditorReplicasCheckInterval` s (0: off, as upstream;
`AuditorReplicasCheckTask`): for every CLOSED ledger with entries that is not marked, each
bookie of its ensembles is asked once for the entries of the ledger it holds (V3
GET_LIST_OF_ENTRIES_OF_LEDGER; "no such ledger" means it holds none), and the entries striped
to it in each of its segments that it lacks are counted per entry. A ledger whose most-missed
entry has no copy left, fewer than Qa or fewer than Qw copies is reported in that class (no
mark, as upstream); bookies that did not answer are reported apart (`unavailable`), as
upstream logs them, and count in no class.

Both checks:
- a run that completes stores its completion time at
  `/ledgers/underreplication/checkallledgersctime` and
  `/ledgers/underreplication/replicascheckctime` (text `CheckAllLedgersFormat` /
  `ReplicasCheckFormat`), as upstream's `setCheckAllLedgersCTime` / `setReplicasCheckCTime`
  after the run; on becoming leader a check is first due when the interval has passed since
  that time (never completed: at once), so a restart or a new leader waits only what is left,
  and a run cut short (leadership lost, a crash) is not taken for a completed one; then it
  runs at a fixed rate, every interval from the previous start, whether that run failed or
  not (upstream's `scheduleAtFixedRate`);
- at most `auditorMaxNumberOfConcurrentOpenLedgerOperations` ledgers are checked at a time
  (upstream's name and default, 500), and bookie requests (entry reads, LAC reads, list
  requests) are paced to `auditorCheckReadsPerSecond` (an extension of ours, default 2000,
  0 = no limit) so a large check never starves producers; etcd is read a page of ledgers at a
  time;
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
from metastore.repositories.underreplication import UnderReplication
from metastore.versioned_keys import VersionedKeys
from placement import write_set
from storage.autorecovery.config import AutoRecoveryConfig
from storage.autorecovery.registry import registered_bookies
from storage.bookie.availability import EntryAvailability
from storage.bookie.errors import BookieError, NoEntry, NoLedger
from storage.bookie.format import verify_entry
from storage.ledger.bookies import BookiePool
from storage.ledger.recovery import covered

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
    requests: int = 0  # bookie requests (entry, LAC and list requests) in that run
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
    # ledger -> bookies that did not answer the list request (in no class, as upstream)
    unavailable: dict[int, set[str]] = field(default_factory=dict)

    def classes(self) -> dict[str, set[int]]:
        """The three classes by the names `shortfall` gives."""
        return {"no_replica": self.no_replica, "below_ack_quorum": self.below_ack_quorum,
                "below_write_quorum": self.below_write_quorum}

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


def stores(index: int, entry_id: int, ensemble_size: int, write_quorum: int) -> bool:
    """Does ensemble member `index` store `entry_id` under round-robin striping?"""
    return (index - entry_id) % ensemble_size < write_quorum


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


def shortfall(missed: dict[int, int], write_quorum: int, ack_quorum: int) -> str | None:
    """The `ReplicasReport` class of a ledger whose entries lack `missed[entry]` of their
    write set's copies: by its most-missed entry, as upstream's
    `reportLedgersWithMissingEntries`; None when every entry has Qw copies."""
    if not missed:
        return None
    copies = write_quorum - max(missed.values())
    if copies <= 0:
        return "no_replica"
    if copies < ack_quorum:
        return "below_ack_quorum"
    if copies < write_quorum:
        return "below_write_quorum"
    return None


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


class FragmentChecker:
    """Which bookies lost which fragments of a ledger, found by reading (upstream's
    `LedgerChecker`, the auditor's all-ledgers check and the replication worker's check
    before it repairs; see the module docstring)."""

    def __init__(self, bookies: BookiePool, verification_percentage: int = 0,
                 rng: random.Random | None = None) -> None:
        self.bookies = bookies
        self.verification_percentage = verification_percentage
        self.rng = rng or random.Random()

    async def lost_bookies(self, md: LedgerMetadata, available: frozenset[str],
                           pacer: ReadPacer, progress: CheckProgress | None = None, *,
                           only: Iterable[str] | None = None) -> dict[int, set[str]]:
        """{first entry of a fragment: the bookies that lost it}, for the fragments that lost
        any: closed fragments, and the last one of a ledger that is not CLOSED up to its
        LAC. `only`: check these bookies and no others."""
        progress = progress or CheckProgress("fragments")
        wanted = None if only is None else set(only)
        lost: dict[int, set[str]] = {}
        fragments = checked_fragments(md)
        if not md.is_closed:
            last = await self._open_fragment(md, available, pacer, progress)
            if last is not None:
                fragments.append(last)
        for start, end, ensemble in fragments:
            for index, bookie in enumerate(ensemble):
                if wanted is not None and bookie not in wanted:
                    continue
                bounds = stripe_bounds(index, start, end, md.ensemble_size,
                                       md.write_quorum_size)
                if bounds is None:
                    continue
                if bookie not in available:
                    lost.setdefault(start, set()).add(bookie)
                    continue
                for entry_id in self._to_read(index, bounds, md):
                    await pacer.wait()
                    progress.entries_read += 1
                    progress.requests += 1
                    if not await self._holds(bookie, md.ledger_id, entry_id):
                        lost.setdefault(start, set()).add(bookie)
                        break
        return lost

    async def _open_fragment(self, md: LedgerMetadata, available: frozenset[str],
                             pacer: ReadPacer, progress: CheckProgress,
                             ) -> tuple[int, int, tuple[str, ...]] | None:
        """The last fragment of a ledger that is not closed, up to its LAC, as upstream's
        `LedgerChecker.checkLedger`; None when there is nothing to check or the LAC could not
        be established."""
        start = max(md.ensembles)
        ensemble = md.ensembles[start]
        lac = await self._last_add_confirmed(md, ensemble, available, pacer, progress)
        if lac is None:
            log.warning("check: the last-add-confirmed of open ledger %d could not be read "
                        "from enough bookies of %s; its last fragment is not checked",
                        md.ledger_id, list(ensemble))
            return None
        if lac > start:
            return start, lac, ensemble
        # No confirmed entry in the fragment: check it only if its first entry may exist.
        for index in write_set(start, md.ensemble_size, md.write_quorum_size):
            await pacer.wait()
            progress.requests += 1
            if await self._may_exist(ensemble[index], available, md.ledger_id, start):
                return start, start, ensemble
        return None

    async def _last_add_confirmed(self, md: LedgerMetadata, ensemble: tuple[str, ...],
                                  available: frozenset[str], pacer: ReadPacer,
                                  progress: CheckProgress) -> int | None:
        """`ReadLastConfirmedOp` without fencing: the highest LAC piggy-backed on the last
        entry of the bookies of `ensemble` (-1: none has an entry), None unless the answers
        (an entry, or no such entry/ledger) cover every write set."""

        async def one(bookie: str) -> int | None:
            if bookie not in available:
                return None
            await pacer.wait()
            progress.requests += 1
            try:
                connection = await asyncio.wait_for(self.bookies.get(bookie), READ_TIMEOUT)
                packaged = await asyncio.wait_for(connection.read(md.ledger_id, -1),
                                                  READ_TIMEOUT)
                return verify_entry(packaged, md.ledger_id).last_add_confirmed
            except (NoEntry, NoLedger):
                return -1
            except (BookieError, OSError, TimeoutError) as exc:
                log.info("check: %s cannot read the LAC of %d: %s", bookie, md.ledger_id, exc)
                return None

        answers = await asyncio.gather(*(one(b) for b in ensemble))
        answered = {i for i, lac in enumerate(answers) if lac is not None}
        if not covered(answered, md.ensemble_size, md.write_quorum_size, md.ack_quorum_size):
            return None
        return max(lac for lac in answers if lac is not None)

    async def _may_exist(self, bookie: str, available: frozenset[str], ledger_id: int,
                         entry_id: int) -> bool:
        """Upstream's `EntryExistsCallback`: anything but "no such entry/ledger" (an entry,
        an error, no answer, a bookie that is gone) means the entry may have been written."""
        if bookie not in available:
            return True
        try:
            connection = await asyncio.wait_for(self.bookies.get(bookie), READ_TIMEOUT)
            await asyncio.wait_for(connection.read(ledger_id, entry_id), READ_TIMEOUT)
        except (NoEntry, NoLedger):
            return False
        except (BookieError, OSError, TimeoutError):
            return True
        return True

    def _to_read(self, index: int, bounds: tuple[int, int], md: LedgerMetadata) -> list[int]:
        """The stripe's first and last entry, and the sampled share of the entries between."""
        first, last = bounds
        wanted = {first, last}
        percentage = self.verification_percentage
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
        self.fragments = FragmentChecker(bookies, config.auditorLedgerVerificationPercentage)
        self._due: dict[str, int] = {}  # check's ctime key -> when it is next due (epoch ms)

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
                now_ms = int(time.time() * 1000)
                due = self._due.get(key)
                if due is None:  # first look in this term: from the persisted time
                    last = await self._last_run(key)
                    due = self._due[key] = now_ms if last is None else last + interval * 1000
                if now_ms < due:
                    continue
                self._due[key] = now_ms + interval * 1000  # a fixed rate, whatever the outcome
                await check()
                done_ms = int(time.time() * 1000)
                await self.keys.put(key, encode_ctime(field_name, done_ms))
            await asyncio.sleep(self.tick)

    def new_term(self) -> None:
        """Forget the in-memory schedule: on becoming leader, each check is due by its
        persisted time again."""
        self._due.clear()

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
            by_fragment = await self.fragments.lost_bookies(md, available, pacer, progress)
            lost = set().union(*by_fragment.values())
            if lost:
                await self.mark(md.ledger_id, lost)
                marked.add(md.ledger_id)

        await self._each_ledger(progress, one)
        progress.found = frozenset(marked)
        if marked:
            log.warning("check of all ledgers marked %d ledgers: %s", len(marked),
                        sorted(marked)[:20])
        return marked

    # -- the replicas check ---------------------------------------------------------------------

    async def check_replicas(self) -> ReplicasReport:
        """Ask each bookie of every CLOSED, unmarked ledger for the entries it holds; report
        the ledgers short of copies (no marks)."""
        progress = self.replicas
        marked = {m.ledger_id for m in await self.marks.marks()}
        pacer = ReadPacer(self.config.auditorCheckReadsPerSecond)
        report = ReplicasReport()

        async def one(md: LedgerMetadata) -> None:
            if not md.is_closed or md.ledger_id in marked or md.last_entry_id < 0:
                return
            # bookie -> the segments (first, last entry, its index there) it should hold
            expected: dict[str, list[tuple[int, int, int]]] = {}
            for start, end, ensemble in checked_fragments(md):
                for index, bookie in enumerate(ensemble):
                    if stripe_bounds(index, start, end, md.ensemble_size,
                                     md.write_quorum_size) is not None:
                        expected.setdefault(bookie, []).append((start, end, index))
            missed: dict[int, int] = {}  # entry -> bookies of its write set without it

            async def ask(bookie: str, segments: list[tuple[int, int, int]]) -> None:
                held = await self._entries_of(bookie, md.ledger_id, pacer, progress)
                if held is None:
                    report.unavailable.setdefault(md.ledger_id, set()).add(bookie)
                    return
                for start, end, index in segments:
                    lacking = held.missing(
                        e for e in range(start, end + 1)
                        if stores(index, e, md.ensemble_size, md.write_quorum_size))
                    for entry_id in lacking:
                        missed[entry_id] = missed.get(entry_id, 0) + 1
                    if lacking:
                        log.warning("replicas check: ledger %d, segment from %d: %d entries "
                                    "missing on %s (first %s)", md.ledger_id, start,
                                    len(lacking), bookie, lacking[:10])

            await asyncio.gather(*(ask(b, segs) for b, segs in expected.items()))
            short = shortfall(missed, md.write_quorum_size, md.ack_quorum_size)
            if short is not None:
                report.classes()[short].add(md.ledger_id)

        await self._each_ledger(progress, one)
        self.replicas_report = report
        progress.found = report.ledgers
        if report.ledgers:
            log.warning("replicas check: no copy of an entry %s, below Qa %s, below Qw %s",
                        sorted(report.no_replica), sorted(report.below_ack_quorum),
                        sorted(report.below_write_quorum))
        if report.unavailable:
            log.warning("replicas check: ledgers with bookies that did not answer: %s",
                        {k: sorted(v) for k, v in sorted(report.unavailable.items())[:20]})
        return report

    async def _entries_of(self, bookie: str, ledger_id: int, pacer: ReadPacer,
                          progress: CheckProgress) -> EntryAvailability | None:
        """The entries of the ledger the bookie holds (none when it does not know the
        ledger); None when it did not answer."""
        await pacer.wait()
        progress.requests += 1
        try:
            connection = await asyncio.wait_for(self.bookies.get(bookie), READ_TIMEOUT)
            return await asyncio.wait_for(connection.entries_of_ledger(ledger_id),
                                          READ_TIMEOUT)
        except NoLedger:
            return EntryAvailability(())
        except (BookieError, OSError, TimeoutError) as exc:
            log.info("replicas check: %s did not list the entries of %d: %s", bookie,
                     ledger_id, exc)
            return None

    # -- shared ---------------------------------------------------------------------------------

    async def _each_ledger(self, progress: CheckProgress,
                           check: Callable[[LedgerMetadata], Awaitable[None]]) -> None:
        """`check` every ledger, at most the configured number at a time."""
        progress.running = True
        progress.ledgers_checked = progress.entries_read = progress.requests = 0
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
