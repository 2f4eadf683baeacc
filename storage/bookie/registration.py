"""Registration in etcd and the disk-usage check that switches a bookie to read-only.

A writable bookie holds `/ledgers/available/{bookieId}`, a read-only one
`/ledgers/available/readonly/{bookieId}` (never both: switching writes the new key and deletes
the old one, as BookKeeper's registration managers do). Both keys live on one etcd lease kept
alive by this process, so they vanish when it dies. The value is `BookieServiceInfoFormat`, as
Pulsar's `BookieServiceInfoSerde` writes it (`metastore.bookie_service_info`).

Disk check (`LedgerDirsMonitor`): every `diskCheckInterval` ms the usage of the data directory's
file system (1 - usable/total, as `DiskChecker`) is compared with `diskUsageThreshold` (0.95):
at or above it the directory is full and the bookie goes read-only (`readOnlyModeEnabled`);
above `diskUsageWarnThreshold` (0.90) a warning is logged. A full bookie turns writable again
once usage drops below `diskUsageLwmThreshold`, which defaults to `diskUsageThreshold`.

Forced read-only (BookKeeper's `forceReadOnlyBookie`, switched at run time): while the file
`force-readonly` exists in the data directory the check keeps the bookie read-only whatever the
usage. The check runs at once on SIGUSR1 (`wake`), so whoever writes the file (the local
supervisor, `storage.supervisor`) sees the switch without waiting for `diskCheckInterval`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from metastore.bookie_service_info import bookie_service_info, encode_bookie_service_info
from metastore.errors import MetastoreError, NotFound
from metastore.repositories import BookieRegistrations
from metastore.store import MetadataStore

log = logging.getLogger(__name__)

FORCE_READONLY_FILE = "force-readonly"
STOP_ATTEMPTS = 3


@dataclass(frozen=True)
class DiskSettings:
    diskUsageThreshold: float = 0.95
    diskUsageWarnThreshold: float = 0.90
    diskUsageLwmThreshold: float | None = None
    diskCheckInterval: int = 10_000
    readOnlyModeEnabled: bool = True

    @property
    def low_water_mark(self) -> float:
        lwm = self.diskUsageLwmThreshold
        return self.diskUsageThreshold if lwm is None else lwm


def disk_usage(path: Path) -> float:
    stat = os.statvfs(path)
    total = stat.f_blocks * stat.f_frsize
    usable = stat.f_bavail * stat.f_frsize
    return 1.0 - usable / total if total else 0.0


def forced_readonly(path: Path) -> bool:
    return (path / FORCE_READONLY_FILE).exists()


def next_readonly(
    settings: DiskSettings, usage: float, readonly: bool, forced: bool = False
) -> bool:
    """Whether the bookie should be read-only after a check that measured `usage` (and
    found the force-readonly flag file, or not)."""
    if forced:
        return True
    if not settings.readOnlyModeEnabled:
        return False
    if readonly:
        return usage >= settings.low_water_mark
    return usage >= settings.diskUsageThreshold


def registration_value(bookie_id: str) -> bytes:
    host, _, port = bookie_id.rpartition(":")
    return encode_bookie_service_info(bookie_service_info(host, int(port)))


class Registration:
    """The bookie's registration key on a lease; `set_readonly` moves it."""

    def __init__(self, store: MetadataStore, bookie_id: str, ttl: int) -> None:
        self.store = store
        self.registrations = BookieRegistrations(store)
        self.bookie_id = bookie_id
        self.ttl = ttl
        self.readonly = False
        self.value = registration_value(bookie_id)
        self._lease: int | None = None
        self._task: asyncio.Task[None] | None = None

    def _path(self, readonly: bool) -> str:
        return BookieRegistrations.path(self.bookie_id, readonly=readonly)

    async def start(self, readonly: bool) -> None:
        """Register in the background: an etcd that is slow or away delays it, never fails it."""
        self.readonly = readonly
        self._task = asyncio.get_running_loop().create_task(self._maintain())

    async def _register(self) -> None:
        self._lease = await self.store.grant_lease(self.ttl)
        await self.registrations.put_ephemeral(
            self.bookie_id, self.value, readonly=self.readonly, lease=self._lease)
        with contextlib.suppress(MetastoreError):
            await self.registrations.delete(self.bookie_id, readonly=not self.readonly)

    async def set_readonly(self, readonly: bool) -> None:
        if readonly == self.readonly:
            return
        self.readonly = readonly
        if self._lease is None:
            return  # not registered yet: the first registration uses the new state
        await self.registrations.put_ephemeral(
            self.bookie_id, self.value, readonly=readonly, lease=self._lease)
        with contextlib.suppress(MetastoreError):
            await self.registrations.delete(self.bookie_id, readonly=not readonly)
        log.warning("bookie %s is now %s", self.bookie_id, "read-only" if readonly else "writable")

    async def _maintain(self) -> None:
        registered = False
        while True:
            try:
                if not registered:
                    await self._register()
                    registered = True
                    log.info("registered %s", self._path(self.readonly))
                await asyncio.sleep(max(self.ttl / 3, 0.2))
                assert self._lease is not None
                await self.store.refresh_lease(self._lease)
                # The lease may have expired while etcd was away: then register again.
                registered = await self.registrations.exists(
                    self.bookie_id, readonly=self.readonly)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("registration of %s failed, retrying: %s", self.bookie_id, exc)
                registered = False
                await asyncio.sleep(0.5)

    async def stop(self) -> None:
        """Deregister now, as a bookie closing its session does: the key is deleted (even one
        a previous run of this bookie left on a lease not yet expired) and the lease revoked.
        The revocation matters on etcd: a registration cancelled with its put in flight may
        have that put applied after the delete, on a lease nothing keeps alive; once the
        lease is revoked such a put either went with it or is refused."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        # A store that is slow or away at this moment gets a few more tries (a stop is not
        # the time to give up on a key readers take for a live bookie); after that the key
        # goes with its lease or session.
        for attempt in range(STOP_ATTEMPTS):
            try:
                with contextlib.suppress(NotFound):
                    await self.registrations.delete(self.bookie_id, readonly=self.readonly)
                if self._lease is not None:
                    await self.store.revoke_lease(self._lease)
            except MetastoreError as exc:
                log.warning("deregistering %s failed (attempt %d of %d): %s",
                            self.bookie_id, attempt + 1, STOP_ATTEMPTS, exc)
                await asyncio.sleep(0.2)
            else:
                log.info("deregistered %s", self._path(self.readonly))
                return


async def watch_disk(
    settings: DiskSettings,
    path: Path,
    readonly: Callable[[], bool],
    switch: Callable[[bool], Awaitable[None]],
    wake: asyncio.Event | None = None,
) -> None:
    """Check the disk every `diskCheckInterval` (or at once when `wake` is set) and call
    `switch(new_state)` on a change."""
    while True:
        usage = disk_usage(path)
        if usage >= settings.diskUsageWarnThreshold:
            log.warning("data directory %s is %.1f%% full", path, usage * 100)
        wanted = next_readonly(settings, usage, readonly(), forced_readonly(path))
        if wanted != readonly():
            try:
                await switch(wanted)
            except Exception:
                log.exception("switching to %s failed", "read-only" if wanted else "writable")
        if wake is None:
            await asyncio.sleep(settings.diskCheckInterval / 1000)
            continue
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(wake.wait(), settings.diskCheckInterval / 1000)
        wake.clear()
