"""Decommissioning a bookie: every ledger fragment it holds is copied to bookies the ledger's
recorded policy accepts, then the bookie is removed (upstream's `bookkeeper shell
decommissionbookie` / `BookKeeperAdmin.decommissionBookie`, which waits for the auditor and
the workers to re-replicate a bookie already shut down; here the bookie is made read-only
first and stays readable while its data moves, so no copy is lost for a while).

Steps, by one task per bookie in the service:
1. `make_read_only(bookie)` (the caller's: the flag file of a supervised bookie), so nothing
   new lands on it;
2. passes over the ledger metadata: each ledger listing the bookie gets
   `ReplicationWorker.move_off` (under the ledger's `urL` lock, each segment's copy verified,
   metadata swapped by CAS; strict groups never left); a ledger that cannot move keeps its
   reason in `stuck` and is retried every `retry` seconds; a pass that moved nothing while
   ledgers remain sets the state BLOCKED (RUNNING again once one moves);
3. no ledger lists the bookie: `remove(bookie)` (the caller's: stop the process, drop the
   registration and the rack-map entry), state DONE.

The state is a JSON document at `/storage/decommission/<bookie>` (`metastore.paths`), written
after each ledger, so a restarted service resumes every decommission not DONE (`resume`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from metastore import paths
from metastore.ledgers import LedgerMetadataStore
from metastore.versioned_keys import VersionedKeys
from storage.autorecovery.worker import Deferred, ReplicationWorker, Waiting

log = logging.getLogger(__name__)

RUNNING = "RUNNING"
BLOCKED = "BLOCKED"
DONE = "DONE"

BookieAction = Callable[[str], Awaitable[None]]


@dataclass
class DecommissionState:
    """What `GET .../{bookie}/decommission` shows, as stored in etcd."""

    bookie: str
    state: str = RUNNING
    startedAt: int = field(default_factory=lambda: int(time.time() * 1000))
    finishedAt: int | None = None
    ledgersTotal: int = 0
    ledgersMoved: int = 0
    ledgersRemaining: int = 0
    stuck: dict[int, str] = field(default_factory=dict)  # ledger id -> why it cannot move
    stage: str = "making the bookie read-only"

    def to_json(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> DecommissionState:
        data: dict[str, Any] = json.loads(raw)
        data["stuck"] = {int(k): str(v) for k, v in (data.get("stuck") or {}).items()}
        return cls(**data)


class Decommissions:
    def __init__(self, keys: VersionedKeys, worker: ReplicationWorker, *,
                 make_read_only: BookieAction, remove: BookieAction,
                 retry: float = 2.0) -> None:
        self.keys = keys
        self.worker = worker
        self.ledgers = LedgerMetadataStore(keys)
        self.make_read_only = make_read_only
        self.remove = remove
        self.retry = retry
        self.tasks: dict[str, asyncio.Task[None]] = {}

    async def get(self, bookie: str) -> DecommissionState | None:
        found = await self.keys.read(paths.storage_decommission(bookie))
        return None if found is None else DecommissionState.from_json(found.value)

    def running(self, bookie: str) -> bool:
        task = self.tasks.get(bookie)
        return task is not None and not task.done()

    async def start(self, bookie: str) -> DecommissionState:
        """Start (or restart after DONE) the bookie's decommission; the caller checks that
        none runs."""
        state = DecommissionState(bookie)
        await self._save(state)
        self._spawn(state)
        return state

    async def resume(self) -> list[str]:
        """Resume every stored decommission that is not DONE (after a restart)."""
        resumed = []
        for bookie in await self.keys.children(paths.STORAGE_DECOMMISSIONS):
            state = await self.get(bookie)
            if state is not None and state.state != DONE and not self.running(bookie):
                self._spawn(state)
                resumed.append(bookie)
        return resumed

    async def stop(self) -> None:
        tasks = list(self.tasks.values())
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(BaseException):
                await task

    def _spawn(self, state: DecommissionState) -> None:
        self.tasks[state.bookie] = asyncio.create_task(self._run(state),
                                                       name=f"decommission {state.bookie}")

    async def _save(self, state: DecommissionState) -> None:
        await self.keys.put(paths.storage_decommission(state.bookie), state.to_json())

    async def _holding(self, bookie: str) -> list[int]:
        found = []
        async for stored in self.ledgers.ledgers():
            md = stored.metadata
            if any(bookie in ensemble for ensemble in md.ensembles.values()):
                found.append(md.ledger_id)
        return found

    async def _run(self, state: DecommissionState) -> None:
        bookie = state.bookie
        while True:
            try:
                await self._decommission(state)
                return
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # etcd or a bookie unreachable: retry the pass
                log.exception("decommission of %s failed a pass", bookie)
                state.stage = f"retrying after {type(exc).__name__}: {exc}"
                with contextlib.suppress(Exception):
                    await self._save(state)
                await asyncio.sleep(self.retry)

    async def _decommission(self, state: DecommissionState) -> None:
        bookie = state.bookie
        await self.make_read_only(bookie)  # idempotent: again after a restart
        ttl = self.worker.config.session_ttl
        lease = await self.keys.grant_lease(ttl)
        try:
            while True:
                holding = await self._holding(bookie)
                state.ledgersRemaining = len(holding)
                state.ledgersTotal = state.ledgersMoved + len(holding)
                state.stuck = {k: v for k, v in state.stuck.items() if k in holding}
                if not holding:
                    break
                state.stage = "moving ledgers"
                await self._save(state)
                moved = False
                pause = self.retry
                transient = False
                for ledger_id in holding:
                    if not await self.keys.refresh_lease(lease):
                        lease = await self.keys.grant_lease(ttl)
                    try:
                        await self.worker.move_off(ledger_id, bookie, lease,
                                                   since_ms=state.startedAt)
                    except Deferred as exc:
                        state.stuck[ledger_id] = exc.why
                        pause = min(pause, max(exc.seconds, 0.1))
                        transient = transient or isinstance(exc, Waiting)
                    else:
                        state.stuck.pop(ledger_id, None)
                        state.ledgersMoved += 1
                        state.ledgersRemaining -= 1
                        moved = True
                    await self._save(state)
                if moved:
                    state.state = RUNNING
                elif transient:  # e.g. an open ledger's grace period: not blocked
                    state.state, state.stage = RUNNING, "waiting for ledgers to be movable"
                    await self._save(state)
                    await asyncio.sleep(pause)
                else:
                    state.state = BLOCKED
                    state.stage = (f"{len(state.stuck)} ledger(s) cannot move; retrying every "
                                   f"{self.retry:g}s")
                    await self._save(state)
                    await asyncio.sleep(self.retry)
        finally:
            with contextlib.suppress(Exception):
                await self.keys.revoke_lease(lease)
        state.stage = "removing the bookie"
        await self._save(state)
        await self.remove(bookie)
        state.state, state.stage = DONE, "done"
        state.finishedAt = int(time.time() * 1000)
        await self._save(state)
        log.info("decommissioned bookie %s: %d ledgers moved", bookie, state.ledgersMoved)
