"""`/admin/v2/storage/bookies`: the bookies this service knows, and control of the local ones.

A bookie is known from three sources: its registration under `/ledgers/available/` (writable)
or `/ledgers/available/readonly/` (read-only), the rack map (`/bookies`: rack and group), and
the local supervisor (`storage.supervisor.LocalBookies`, `python -m api --bookies N`). Its state is
`writable` or `read-only` by its registration, else `stopped`. Disk use and capacity are only
known for supervised bookies (their data directory is on this machine); the ledger count is the
number of ledgers whose ensembles include the bookie (a scan of the ledger metadata).

Control works on supervised bookies only:
- start: spawn a bookie stopped on request, then wait (bounded) for its registration;
- stop: SIGKILL (an unclean stop: no checkpoint, files as they are), then revoke the lease of
  its registration, so it disappears at once rather than after the lease's TTL; the supervisor
  leaves it down until it is started again;
- read-only: the flag file `force-readonly` in its data directory, which the bookie's disk
  check honours (`storage.bookie.registration`), checked at once on SIGUSR1; then wait
  (bounded) for the registration to move under `readonly/`. It stays read-only (across
  restarts too) until the flag file is removed.

Decommission (`storage.autorecovery.decommission`): a supervised bookie is made read-only,
its ledgers' fragments move to bookies their recorded policy accepts, then it is removed:
its process stopped cleanly (SIGTERM), its data directory renamed
`bookie-<port>.decommissioned` (a restart does not bring it back), its registration deleted
and its entry in the rack map (`/bookies`) removed, as the bookie no longer exists. A bookie
this service does not run must be shut down first (as upstream's decommission demands):
412 while it is still registered. Its state lives in etcd and resumes after a restart.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from api.errors import Conflict, NotFound, PreconditionFailed
from api.services.racks import RackService
from metastore.documents import Registrations
from metastore.errors import NotFound as NoSuchKey
from metastore.ledgers import LedgerMetadataStore
from metastore.readers import read_registered_bookies
from metastore.repositories import BookieRegistrations
from metastore.store import MetadataStore
from metastore.topology import read_cluster_view
from metastore.versioned_keys import VersionedKeys
from placement import PlacementConfig
from storage import LocalBookies
from storage.autorecovery import (
    AutoRecoveryConfig,
    Decommissions,
    DecommissionState,
    ReplicationWorker,
    UnderReplication,
)
from storage.ledger import LedgerClient

WRITABLE = "writable"
READ_ONLY = "read-only"
STOPPED = "stopped"
# How long a start or read-only switch waits for the bookie's registration: at most this, and
# at most REGISTRATION_WAIT_SHARE of the request deadline (metadataStoreOperationTimeoutSeconds),
# so that a bookie slow to register gets the answer "done" (it was started or switched; its
# state is in GET /admin/v2/storage/bookies) rather than a 503 saying nothing happened.
WAIT_SECONDS = 15.0
REGISTRATION_WAIT_SHARE = 0.8


def registration_wait(request_deadline: float) -> float:
    """The registration wait for a request deadline of `request_deadline` seconds."""
    return min(WAIT_SECONDS, REGISTRATION_WAIT_SHARE * request_deadline)


@dataclass(frozen=True)
class BookieStatus:
    id: str
    state: str
    rack: str | None
    group: str | None
    ledgers: int
    supervised: bool
    diskUsed: int | None
    diskCapacity: int | None


def directory_size(path: Path) -> int:
    """Bytes of the files under `path` (what the bookie's data takes on disk)."""
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.stat(os.path.join(root, name)).st_blocks * 512
    return total


def capacity(path: Path) -> int | None:
    try:
        stat = os.statvfs(path)
    except OSError:
        return None
    return stat.f_blocks * stat.f_frsize


class StorageBookieService:
    def __init__(
        self,
        store: MetadataStore,
        keys: VersionedKeys,
        config: PlacementConfig,
        local: LocalBookies | None,
        *,
        client: LedgerClient,
        racks: RackService,
        recovery: AutoRecoveryConfig,
        node_id: str,
        wait_seconds: float = WAIT_SECONDS,
    ) -> None:
        self.store = store
        self.wait_seconds = wait_seconds
        self.ledgers = LedgerMetadataStore(keys)
        self.config = config
        self.local = local
        self.racks = racks
        worker = ReplicationWorker(client, UnderReplication(keys), recovery,
                                   f"{node_id}/decommission")
        self.decommissions = Decommissions(keys, worker, make_read_only=self._make_read_only,
                                           remove=self._remove)

    async def list(self) -> list[BookieStatus]:
        view = await read_cluster_view(self.store, self.config)
        placed: dict[str, tuple[str, str | None]] = {}
        for group_name, members in view.rack_map.items():
            for bookie, info in members.items():
                found_rack = info.get("rack") if isinstance(info, dict) else None
                placed[bookie] = (group_name, found_rack if isinstance(found_rack, str) else None)
        supervised = set(self.local.bookie_ids) if self.local else set()
        ids = sorted(set(placed) | view.registrations.all | supervised)
        counts = await self._ledger_counts()
        found = []
        for bookie_id in ids:
            group: str | None = None
            rack: str | None = None
            if bookie_id in placed:
                group, rack = placed[bookie_id]
            used, total = await self.disk(bookie_id)
            found.append(BookieStatus(
                id=bookie_id, state=state_of(bookie_id, view.registrations), rack=rack,
                group=group, supervised=bookie_id in supervised, diskUsed=used,
                diskCapacity=total, ledgers=counts.get(bookie_id, 0),
            ))  # fmt: skip
        return found

    async def _ledger_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        async for stored in self.ledgers.ledgers():
            members = {b for bookies in stored.metadata.ensembles.values() for b in bookies}
            for bookie in members:
                counts[bookie] = counts.get(bookie, 0) + 1
        return counts

    async def disk(self, bookie_id: str) -> tuple[int | None, int | None]:
        local = self.local.find(bookie_id) if self.local else None
        if local is None or not local.data_dir.exists():
            return None, None
        data_dir = local.data_dir
        return await asyncio.to_thread(lambda: (directory_size(data_dir), capacity(data_dir)))

    async def _supervised(self, bookie_id: str) -> LocalBookies:
        """The supervisor of `bookie_id`: 404 for an unknown bookie, 412 for one this service
        does not run."""
        if self.local is not None and self.local.find(bookie_id) is not None:
            return self.local
        registered = await read_registered_bookies(self.store)
        view = await read_cluster_view(self.store, self.config)
        in_rack_map = any(bookie_id in members for members in view.rack_map.values())
        if bookie_id in registered.all or in_rack_map:
            raise PreconditionFailed(f"Bookie {bookie_id} is not supervised by this service")
        raise NotFound(f"Bookie {bookie_id} does not exist")

    async def start(self, bookie_id: str) -> None:
        local = await self._supervised(bookie_id)
        if not await asyncio.to_thread(local.start_bookie, bookie_id):
            raise Conflict(f"Bookie {bookie_id} is already running")
        await self._wait(lambda r: bookie_id in r.all)

    async def stop(self, bookie_id: str) -> None:
        local = await self._supervised(bookie_id)
        if not await asyncio.to_thread(local.kill, bookie_id):
            raise Conflict(f"Bookie {bookie_id} is already stopped")
        await BookieRegistrations(self.store).revoke(bookie_id)

    async def readonly(self, bookie_id: str) -> None:
        local = await self._supervised(bookie_id)
        if not await asyncio.to_thread(local.force_readonly, bookie_id):
            raise Conflict(f"Bookie {bookie_id} is not running")
        await self._wait(lambda r: bookie_id in r.read_only and bookie_id not in r.writable)

    # -- decommission -------------------------------------------------------------------------

    async def decommission(self, bookie_id: str) -> DecommissionState:
        """Start moving everything off the bookie, then remove it: 404 unknown, 412 a bookie
        of another machine still registered, 409 while one runs; after DONE the bookie is
        gone (404 unless a ledger lists it)."""
        if self.decommissions.running(bookie_id):
            raise Conflict(f"Bookie {bookie_id} is already being decommissioned")
        supervised = self.local is not None and self.local.find(bookie_id) is not None
        if not supervised:
            registered = await read_registered_bookies(self.store)
            view = await read_cluster_view(self.store, self.config)
            known = bookie_id in registered.all or any(
                bookie_id in members for members in view.rack_map.values())
            if bookie_id in registered.all:
                raise PreconditionFailed(
                    f"Bookie {bookie_id} is not supervised by this service: shut it down "
                    "first, then decommission it")
            if not known and bookie_id not in await self._ledger_counts():
                raise NotFound(f"Bookie {bookie_id} does not exist")
        return await self.decommissions.start(bookie_id)

    async def decommission_status(self, bookie_id: str) -> DecommissionState:
        state = await self.decommissions.get(bookie_id)
        if state is None:
            raise NotFound(f"Bookie {bookie_id} has no decommission")
        return state

    async def resume_decommissions(self) -> None:
        await self.decommissions.resume()

    async def close(self) -> None:
        await self.decommissions.stop()

    async def _make_read_only(self, bookie_id: str) -> None:
        local = self.local.find(bookie_id) if self.local else None
        if self.local is None or local is None or not local.running:
            return  # not ours, or down: its data moves from the other replicas
        await asyncio.to_thread(self.local.force_readonly, bookie_id)
        await self._wait(lambda r: bookie_id not in r.writable)

    async def _remove(self, bookie_id: str) -> None:
        if self.local is not None:
            await asyncio.to_thread(self.local.remove, bookie_id)
        await BookieRegistrations(self.store).revoke(bookie_id)
        with contextlib.suppress(NotFound, NoSuchKey):
            await self.racks.delete_bookie(bookie_id)

    async def _wait(self, done: Callable[[Registrations], bool]) -> None:
        """Until the registrations satisfy `done` (bounded by `wait_seconds`, below the
        request deadline: the bookie may be slow to come)."""
        deadline = time.monotonic() + self.wait_seconds
        while time.monotonic() < deadline:
            if done(await read_registered_bookies(self.store)):
                return
            await asyncio.sleep(0.1)


def state_of(bookie_id: str, registrations: Registrations) -> str:
    if bookie_id in registrations.writable:
        return WRITABLE
    if bookie_id in registrations.read_only:
        return READ_ONLY
    return STOPPED
