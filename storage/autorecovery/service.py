"""One process's share of auto-recovery: an auditor candidate and a replication worker
(what `autoRecoveryDaemonEnabled` starts inside a bookie upstream; here the service runs it)."""

from __future__ import annotations

import asyncio
import contextlib

from metastore.repositories.underreplication import UnderReplication
from metastore.versioned_keys import VersionedKeys
from storage.autorecovery.auditor import Auditor
from storage.autorecovery.config import AutoRecoveryConfig
from storage.autorecovery.worker import ReplicationWorker
from storage.ledger.client import LedgerClient


class AutoRecovery:
    def __init__(self, keys: VersionedKeys, client: LedgerClient, config: AutoRecoveryConfig,
                 node_id: str, *, tick: float = 1.0) -> None:
        self.keys = keys
        self.marks = UnderReplication(keys)
        self.auditor = Auditor(keys, self.marks, client.topology, client.config, config,
                               node_id, tick=tick, bookies=client.bookies)
        self.worker = ReplicationWorker(client, self.marks, config, node_id, tick=tick)
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        self._tasks = [asyncio.create_task(self.auditor.run(), name="auditor"),
                       asyncio.create_task(self.worker.run(), name="replication worker")]

    async def stop(self) -> None:
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(BaseException):
                await task
