"""Garbage collection in a bookie process (BookKeeper's `GarbageCollectorThread` with
`ScanAndCompareGarbageCollector` and the entry-log compactor, for DbLedgerStorage).

Every `gcWaitTime` ms, or at once when forced, one run does:
1. Ledger GC by scan and compare. First the ledgers this bookie holds are listed (states and
   indexed entries), then every ledger id in the metadata store is read (paged range reads);
   a listed ledger the store does not have is deleted here: its index state and locations in
   one transaction, its cached entries (`Bookie.delete_ledgers`). Listing the bookie first is
   the safety rule: a ledger gets its metadata before any bookie sees an entry of it, so a
   ledger created during the run is not in the list; one whose metadata could not be read
   (the scan failed) is never deleted, the run skips ledger GC instead.
   `verifyMetadataOnGC` reads each candidate's metadata once more before deleting it.
   Before it, every `gcOverreplicatedLedgerWaitTime` ms, closed ledgers whose ensembles no
   longer name this bookie are dropped, each under its under-replication lock.
2. Entry-log usage: live bytes per complete log from the index (`Index.log_usage`); a log with
   nothing live is deleted (after the ledger states are re-appended to the current log,
   `compaction.refresh_ledger_states`).
3. Compaction as upstream decides it: major if `majorCompactionInterval` s passed since the
   last major (or forced), else minor if `minorCompactionInterval` s passed (or forced); each
   compacts the logs under its threshold, emptiest first, within its `*MaxTimeMillis`.
   A threshold or interval <= 0 disables that compaction; `forceAllowCompaction` lets a forced
   run compact even then. Disk pressure: above `diskUsageWarnThreshold` major compaction is
   suspended, above `diskUsageThreshold` minor too, unless `isForceGCAllowWhenNoSpace`, which
   forces the run instead.

Off the request path: the scans run in a GC thread; entry-log appends and index transactions
run in the bookie's flush thread between checkpoints (`Bookie.run_exclusive`), one batch at a
time, throttled by `compactionRate*`; only a log's deletion runs on the event loop.

Force GC from outside (BookKeeper's `PUT /api/v1/bookie/gc`): the service puts a request at
`metastore.paths.BOOKIE_GC_REQUEST` (JSON `{"forceMajor": bool, "forceMinor": bool}`, or `{}`),
every bookie watches that key (`watch_force_requests`) and starts a forced run; each bookie
keeps `{"is_in_force_gc": "true"|"false"}` at `paths.bookie_gc_state(bookieId)`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from metastore.ledger_metadata import LedgerMetadata, LedgerState
from metastore.paths import BOOKIE_GC_REQUEST
from metastore.repositories import ForceGc
from metastore.store import MetadataStore
from storage.bookie.bookie import Bookie
from storage.bookie.compaction import Compactor, LogUsage, Throttle, refresh_ledger_states
from storage.bookie.entrylog import log_ids
from storage.bookie.registration import DiskSettings, disk_usage

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class GcSettings:
    """BookKeeper's names and `ServerConfiguration` defaults (intervals: gcWaitTime in ms,
    compaction intervals in s, as upstream)."""

    gcWaitTime: int = 600_000
    gcOverreplicatedLedgerWaitTime: int = 86_400_000
    verifyMetadataOnGC: bool = False
    minorCompactionThreshold: float = 0.2
    minorCompactionInterval: int = 3600
    minorCompactionMaxTimeMillis: int = -1
    majorCompactionThreshold: float = 0.8
    majorCompactionInterval: int = 86400
    majorCompactionMaxTimeMillis: int = -1
    forceAllowCompaction: bool = False
    isForceGCAllowWhenNoSpace: bool = False
    compactionRate: int = 1000
    compactionRateByEntries: int = 0
    """0: the value of compactionRate (the deprecated name it replaces, as upstream)."""
    compactionRateByBytes: int = 1_000_000
    isThrottleByBytes: bool = False

    @property
    def minor_enabled(self) -> bool:
        return self.minorCompactionInterval > 0 and self.minorCompactionThreshold > 0

    @property
    def major_enabled(self) -> bool:
        return self.majorCompactionInterval > 0 and self.majorCompactionThreshold > 0

    @property
    def rate(self) -> int:
        if self.isThrottleByBytes:
            return self.compactionRateByBytes
        return self.compactionRateByEntries or self.compactionRate

    def validate(self) -> None:
        """Upstream's start-up checks (`GarbageCollectorThread`'s constructor)."""
        wait_s = self.gcWaitTime / 1000
        if self.gcWaitTime <= 0:
            raise ValueError(f"gcWaitTime must be positive, got {self.gcWaitTime}")
        if self.minor_enabled:
            if self.minorCompactionThreshold > 1.0:
                raise ValueError(
                    f"Invalid minor compaction threshold {self.minorCompactionThreshold}")
            if self.minorCompactionInterval < wait_s:
                raise ValueError(
                    f"Too short minor compaction interval : {self.minorCompactionInterval}")
        if self.major_enabled:
            if self.majorCompactionThreshold > 1.0:
                raise ValueError(
                    f"Invalid major compaction threshold {self.majorCompactionThreshold}")
            if self.majorCompactionInterval < wait_s:
                raise ValueError(
                    f"Too short major compaction interval : {self.majorCompactionInterval}")
        if self.minor_enabled and self.major_enabled and (
            self.minorCompactionInterval >= self.majorCompactionInterval
            or self.minorCompactionThreshold >= self.majorCompactionThreshold
        ):
            raise ValueError(
                f"Invalid minor/major compaction settings : minor ({self.minorCompactionThreshold}"
                f", {self.minorCompactionInterval}), major ({self.majorCompactionThreshold}, "
                f"{self.majorCompactionInterval})")
        if self.rate <= 0:
            raise ValueError("compaction rate must be positive")


class LedgerSource(Protocol):
    """The metadata store's ledgers, as ledger GC reads them, and the under-replication
    locks that over-replicated GC takes."""

    def ledger_ids(self) -> AsyncIterator[int]: ...

    async def exists(self, ledger_id: int) -> bool: ...

    async def read(self, ledger_id: int) -> LedgerMetadata | None: ...

    async def lock(self, ledger_id: int) -> bool:
        """Take the ledger's under-replication lock; False when someone holds it."""

    async def unlock(self, ledger_id: int) -> None: ...


@dataclass
class GcStats:
    runs: int = 0
    forced_runs: int = 0
    ledgers_deleted: int = 0
    logs_deleted: int = 0
    logs_compacted: int = 0
    entries_copied: int = 0
    bytes_reclaimed: int = 0
    major_compactions: int = 0
    minor_compactions: int = 0
    last_usage: list[LogUsage] = field(default_factory=list)


StateListener = Callable[[bool], Awaitable[None]]


class GarbageCollector:
    def __init__(
        self,
        bookie: Bookie,
        settings: GcSettings,
        ledgers: LedgerSource,
        disk: DiskSettings | None = None,
        data_dir: Path | None = None,
        bookie_id: str | None = None,
    ) -> None:
        settings.validate()
        self.bookie = bookie
        self.bookie_id = bookie_id
        self.settings = settings
        self.ledgers = ledgers
        self.disk = disk or DiskSettings()
        self.data_dir = data_dir or bookie.settings.data_dir
        self.thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gc")
        self.compactor = Compactor(bookie, self.thread, Throttle(settings.rate),
                                   by_bytes=settings.isThrottleByBytes)
        self.stats = GcStats()
        self.in_force_gc = False
        self.listeners: list[StateListener] = []
        now = time.monotonic()
        self.last_minor = self.last_major = self.last_over_replicated = now
        self._request: tuple[bool, bool] | None = None  # (suspend major, suspend minor)
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()

    # -- control --------------------------------------------------------------------------------

    def force(self, force_major: bool | None = None, force_minor: bool | None = None) -> bool:
        """Ask for a forced run now (BookKeeper's `enableForceGC`): without flags the current
        disk-pressure suspensions hold; with them, a flag left false suspends that compaction
        for the run. False: a forced run is already pending or running."""
        if self.in_force_gc:
            return False
        if force_major is None and force_minor is None:
            self._request = self._disk_suspensions()
        else:
            self._request = (not force_major, not force_minor)
        self._set_force(True)
        self._wake.set()
        return True

    def _set_force(self, value: bool) -> None:
        if value == self.in_force_gc:
            return
        self.in_force_gc = value
        for listener in self.listeners:
            task = asyncio.ensure_future(listener(value))
            task.add_done_callback(_log_failure)

    async def wait_idle(self) -> None:
        await self._idle.wait()

    async def run_forever(self) -> None:
        """Run every gcWaitTime (the first after one gcWaitTime), or at once when forced."""
        wait = self.settings.gcWaitTime / 1000
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), wait)
            self._wake.clear()
            request, self._request = self._request, None
            try:
                if request is not None:
                    await self.run_once(True, *request)
                else:
                    await self.run_once(False, *self._disk_suspensions())
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("garbage collection failed; next run in %.0f s", wait)
                self._set_force(False)

    def _disk_suspensions(self) -> tuple[bool, bool]:
        """(suspend major, suspend minor) from the data directory's usage."""
        if self.settings.isForceGCAllowWhenNoSpace:
            return False, False
        usage = disk_usage(self.data_dir)
        return usage >= self.disk.diskUsageWarnThreshold, usage >= self.disk.diskUsageThreshold

    def _disk_forces(self) -> bool:
        return (self.settings.isForceGCAllowWhenNoSpace
                and disk_usage(self.data_dir) >= self.disk.diskUsageWarnThreshold)

    # -- one run --------------------------------------------------------------------------------

    async def run_once(self, force: bool = False, suspend_major: bool = False,
                       suspend_minor: bool = False) -> GcStats:
        self._idle.clear()
        try:
            force = force or self._disk_forces()
            if force:
                log.info("Garbage collector forced to perform GC before expiry of wait time")
                self.stats.forced_runs += 1
            await self._run(force, suspend_major, suspend_minor)
            self.stats.runs += 1
            stats = self.stats
            log.info("garbage collection run %d done%s: %d ledgers, %d entry logs deleted, "
                     "%d compacted, %d bytes reclaimed so far", stats.runs,
                     " (forced)" if force else "", stats.ledgers_deleted, stats.logs_deleted,
                     stats.logs_compacted, stats.bytes_reclaimed)
        finally:
            if force:
                self._set_force(False)
            self._idle.set()
        return self.stats

    async def _run(self, force: bool, suspend_major: bool, suspend_minor: bool) -> None:
        bookie = self.bookie
        assert bookie.index is not None and bookie.logger is not None
        loop = asyncio.get_running_loop()
        # What this bookie holds, before anything is read from the metadata store.
        complete_below = bookie.logger.writable_from
        held = bookie.ledger_ids()
        usage = await loop.run_in_executor(self.thread, bookie.index.log_usage)
        for per_ledger in usage.values():
            held.update(per_ledger)
        deleted = await self._gc_over_replicated(held)
        deleted |= await self._gc_ledgers(held - deleted)
        for per_ledger in usage.values():
            for ledger_id in deleted:
                per_ledger.pop(ledger_id, None)
        usages = self._usages(usage, complete_below)
        self.stats.last_usage = usages
        empty = [u for u in usages if u.live_bytes == 0]
        if empty:
            await refresh_ledger_states(bookie)
            for item in empty:
                self.compactor.remove(item.log_id)
                self.stats.logs_deleted += 1
                self.stats.bytes_reclaimed += item.total_bytes
            log.info("deleted %d entry logs with nothing live: %s", len(empty),
                     " ".join(f"{u.log_id:x}" for u in empty))
        candidates = [u for u in usages if u.live_bytes > 0]
        await self._maybe_compact(candidates, force, suspend_major, suspend_minor)

    async def _gc_ledgers(self, held: set[int]) -> set[int]:
        if not held:
            return set()
        existing: set[int] = set()
        try:
            async for ledger_id in self.ledgers.ledger_ids():
                if ledger_id in held:
                    existing.add(ledger_id)
        except Exception as exc:
            log.warning("ledger GC skipped: cannot list the ledgers in metadata: %s", exc)
            return set()
        garbage = held - existing
        if garbage and self.settings.verifyMetadataOnGC:
            confirmed = set()
            for ledger_id in sorted(garbage):
                try:
                    if not await self.ledgers.exists(ledger_id):
                        confirmed.add(ledger_id)
                except Exception as exc:
                    log.warning("ledger %d missing in the metadata list, but reading it "
                                "failed: %s", ledger_id, exc)
            garbage = confirmed
        if not garbage:
            return set()
        removed = await self.bookie.delete_ledgers(garbage)
        self.stats.ledgers_deleted += len(garbage)
        log.info("garbage-collected %d deleted ledgers (%d entries): %s", len(garbage), removed,
                 " ".join(str(i) for i in sorted(garbage)[:20]))
        return garbage

    async def _gc_over_replicated(self, held: set[int]) -> set[int]:
        """Every gcOverreplicatedLedgerWaitTime ms: drop the copy of each closed ledger whose
        ensembles no longer name this bookie (its data was re-replicated elsewhere), holding
        the ledger's under-replication lock meanwhile so no replication worker puts this
        bookie back into it (`removeOverReplicatedledgers`); a locked ledger is skipped."""
        wait = self.settings.gcOverreplicatedLedgerWaitTime
        if (wait <= 0 or self.bookie_id is None or not held
                or (time.monotonic() - self.last_over_replicated) * 1000 <= wait):
            return set()
        removed: set[int] = set()
        for ledger_id in sorted(held):
            try:
                if not await self.ledgers.lock(ledger_id):
                    continue
                try:
                    metadata = await self.ledgers.read(ledger_id)
                    if (metadata is None or metadata.state != LedgerState.CLOSED
                            or any(self.bookie_id in e for e in metadata.ensembles.values())):
                        continue
                    await self.bookie.delete_ledgers({ledger_id})
                    removed.add(ledger_id)
                finally:
                    await self.ledgers.unlock(ledger_id)
            except Exception as exc:
                log.warning("over-replication check of ledger %d failed: %s", ledger_id, exc)
        self.last_over_replicated = time.monotonic()
        if removed:
            self.stats.ledgers_deleted += len(removed)
            log.info("Removed over-replicated ledgers: %s", " ".join(map(str, sorted(removed))))
        return removed

    def _usages(self, usage: dict[int, dict[int, int]], complete_below: int) -> list[LogUsage]:
        assert self.bookie.logger is not None
        result = []
        for log_id in log_ids(self.bookie.logger.directory):
            if log_id >= complete_below:
                continue
            try:
                total = self.bookie.logger.path(log_id).stat().st_size
            except FileNotFoundError:
                continue
            result.append(LogUsage(log_id, sum(usage.get(log_id, {}).values()), total))
        return result

    async def _maybe_compact(self, candidates: list[LogUsage], force: bool,
                             suspend_major: bool, suspend_minor: bool) -> None:
        s = self.settings
        now = time.monotonic()
        force_major_allowed = s.forceAllowCompaction and 0 < s.majorCompactionThreshold < 1
        force_minor_allowed = s.forceAllowCompaction and 0 < s.minorCompactionThreshold < 1
        if suspend_major:
            log.info("Disk almost full, suspend major compaction to slow down filling disk.")
        if suspend_minor:
            log.info("Disk full, suspend minor compaction to slow down filling disk.")
        major_due = s.major_enabled and (force or now - self.last_major > s.majorCompactionInterval)
        minor_due = s.minor_enabled and (force or now - self.last_minor > s.minorCompactionInterval)
        if ((force_major_allowed and force) or major_due) and not suspend_major:
            try:
                await self._compact(candidates, s.majorCompactionThreshold,
                                    s.majorCompactionMaxTimeMillis)
            finally:
                self.last_major = self.last_minor = time.monotonic()
                self.stats.major_compactions += 1
        elif ((force_minor_allowed and force) or minor_due) and not suspend_minor:
            try:
                await self._compact(candidates, s.minorCompactionThreshold,
                                    s.minorCompactionMaxTimeMillis)
            finally:
                self.last_minor = time.monotonic()
                self.stats.minor_compactions += 1

    async def _compact(self, candidates: list[LogUsage], threshold: float,
                       max_time_ms: int) -> None:
        chosen = sorted((u for u in candidates if u.usage < threshold), key=lambda u: u.usage)
        if not chosen:
            return
        deadline = time.monotonic() + max_time_ms / 1000 if max_time_ms > 0 else None
        await refresh_ledger_states(self.bookie)
        for item in chosen:
            result = await self.compactor.compact(item.log_id, deadline)
            self.stats.entries_copied += result.entries
            if not result.done:
                return
            self.stats.logs_compacted += 1
            self.stats.bytes_reclaimed += item.total_bytes - result.bytes

    def close(self) -> None:
        self.thread.shutdown(wait=True, cancel_futures=True)


def _log_failure(task: asyncio.Future[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.warning("publishing the force-GC state failed: %s", task.exception())


# -- force GC through the metadata store -------------------------------------------------------


def parse_force_request(raw: bytes) -> tuple[bool | None, bool | None]:
    """(forceMajor, forceMinor) of a request value; absent keys are None."""
    try:
        body = json.loads(raw) if raw.strip() else {}
    except ValueError:
        return None, None
    if not isinstance(body, dict):
        return None, None
    major, minor = body.get("forceMajor"), body.get("forceMinor")
    return (major if isinstance(major, bool) else None,
            minor if isinstance(minor, bool) else None)


def encode_force_request(force_major: bool | None, force_minor: bool | None) -> bytes:
    body = {}
    if force_major is not None:
        body["forceMajor"] = force_major
    if force_minor is not None:
        body["forceMinor"] = force_minor
    return json.dumps(body).encode()


def encode_gc_state(in_force_gc: bool) -> bytes:
    return json.dumps({"is_in_force_gc": "true" if in_force_gc else "false"}).encode()


async def publish_gc_state(store: MetadataStore, bookie_id: str, in_force_gc: bool) -> None:
    await ForceGc(store).publish_state(bookie_id, encode_gc_state(in_force_gc))


async def watch_force_requests(store: MetadataStore, collector: GarbageCollector) -> None:
    """Start a forced run on each new value at BOOKIE_GC_REQUEST (not on the one found at
    start); a request written while the watch was down is noticed when it comes back."""
    seen: int | None = None
    while True:
        try:
            snapshot = await store.read_range(BOOKIE_GC_REQUEST, prefix=False)
            current = snapshot.entries.get(BOOKIE_GC_REQUEST)
            if seen is not None and current is not None and current.revision > seen:
                collector.force(*parse_force_request(current.value))
            seen = snapshot.revision
            stream = await store.watch(BOOKIE_GC_REQUEST, prefix=False,
                                       start_revision=snapshot.revision + 1)
            try:
                async for event in stream:
                    seen = max(seen, event.revision)
                    if event.value is not None:
                        log.info("force GC requested through the metadata store")
                        collector.force(*parse_force_request(event.value))
            finally:
                await stream.cancel()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.warning("watching force-GC requests failed, retrying: %s", exc)
        await asyncio.sleep(1.0)
