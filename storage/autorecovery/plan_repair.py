"""Applying a placement audit's repair plan (`pipeline.outputs`' `repair_plan.parquet`: ledger,
segment, position, bookie out, bookie in) with the replication workers' copy path.

Each move goes through `ReplicationWorker.apply_move`, which first checks it against the live
metadata, the live topology and the ledger's recorded policy (the segment still holds
`bookie_out` at that position, `bookie_in` is writable, allowed by the recorded groups, not in
the segment, and the move adds no violation): a move that no longer applies is skipped with
its reason; one that cannot run now (a lock, a copy that failed) is retried a few times, then
reported as failed with its reason. Moves run one at a time, in ledger and segment order, under
the worker's throttle (`replicationRateByBytes`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from metastore.versioned_keys import VersionedKeys
from storage.autorecovery.worker import Deferred, ReplicationWorker, Stale

log = logging.getLogger(__name__)

RUNNING = "RUNNING"
DONE = "DONE"


@dataclass(frozen=True, order=True)
class PlannedMove:
    ledger_id: int
    segment: int  # 0-based index of the segment in entry order
    position: int
    bookie_out: str
    bookie_in: str


@dataclass
class RepairProgress:
    moves: int
    unfixable: int  # fragments the plan said it cannot fix
    state: str = RUNNING
    applied: int = 0
    skipped: list[dict[str, Any]] = field(default_factory=list)
    failed: list[dict[str, Any]] = field(default_factory=list)
    startedAt: int = field(default_factory=lambda: int(time.time() * 1000))
    finishedAt: int | None = None

    @property
    def done_moves(self) -> int:
        return self.applied + len(self.skipped) + len(self.failed)

    def to_json(self) -> dict[str, Any]:
        return {"state": self.state, "moves": self.moves, "applied": self.applied,
                "skipped": self.skipped, "failed": self.failed,
                "unfixableFragments": self.unfixable, "startedAt": self.startedAt,
                "finishedAt": self.finishedAt}


def _row(move: PlannedMove, reason: str) -> dict[str, Any]:
    return {"ledgerId": move.ledger_id, "segment": move.segment, "position": move.position,
            "bookieOut": move.bookie_out, "bookieIn": move.bookie_in, "reason": reason}


async def apply_plan(worker: ReplicationWorker, keys: VersionedKeys,
                     moves: Iterable[PlannedMove], progress: RepairProgress, *,
                     attempts: int = 3) -> RepairProgress:
    """Apply the moves, recording each outcome in `progress` as it goes."""
    ttl = worker.config.session_ttl
    lease = await keys.grant_lease(ttl)
    try:
        for move in sorted(moves):
            for attempt in range(attempts):
                if not await keys.refresh_lease(lease):
                    lease = await keys.grant_lease(ttl)
                try:
                    await worker.apply_move(move.ledger_id, move.segment, move.position,
                                            move.bookie_out, move.bookie_in, lease)
                except Stale as exc:
                    progress.skipped.append(_row(move, str(exc)))
                except Deferred as exc:
                    if attempt + 1 < attempts:
                        await asyncio.sleep(min(max(exc.seconds, 0.1), 2.0))
                        continue
                    progress.failed.append(_row(move, exc.why))
                except Exception as exc:  # the store or a bookie failed: report, go on
                    log.exception("repair move %s failed", move)
                    progress.failed.append(_row(move, f"{type(exc).__name__}: {exc}"))
                else:
                    progress.applied += 1
                break
    finally:
        with contextlib.suppress(Exception):
            await keys.revoke_lease(lease)
        progress.state = DONE
        progress.finishedAt = int(time.time() * 1000)
    log.info("repair plan applied: %d moved, %d skipped, %d failed", progress.applied,
             len(progress.skipped), len(progress.failed))
    return progress
