"""One owner per managed ledger in the process (`ManagedLedgerFactoryImpl`).

`open(name, config)` returns the managed ledger already open under that name, or opens it
once however many callers ask at the same time; `delete` and `close` remove it. An open and
a delete of one name never overlap: an open asked for while the name is being deleted waits
for the delete to finish, then opens afresh (and a closed or fenced managed ledger is opened
afresh too), so no caller writes into a managed ledger whose key is gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

from storage.ledger import LedgerClient, NoSuchLedger
from storage.managed_ledger.config import ManagedLedgerConfig
from storage.managed_ledger.managed_ledger import Clock, InfoBackend, ManagedLedger


class ManagedLedgerFactory:
    def __init__(self, ledgers: LedgerClient, info: InfoBackend,
                 clock: Clock = time.time) -> None:
        self.client = ledgers
        self.info = info
        self.clock = clock
        self._open: dict[str, asyncio.Task[ManagedLedger]] = {}
        self._deleting: dict[str, asyncio.Task[None]] = {}

    def get_if_open(self, name: str) -> ManagedLedger | None:
        task = self._open.get(name)
        if task is None or not task.done() or task.cancelled() or task.exception():
            return None
        ledger = task.result()
        return None if ledger.is_closed else ledger

    async def open(self, name: str, config: ManagedLedgerConfig) -> ManagedLedger:
        while (deleting := self._deleting.get(name)) is not None:
            with contextlib.suppress(Exception):
                await asyncio.shield(deleting)
        task = self._open.get(name)
        if task is None or (task.done() and (
                task.cancelled() or task.exception() or task.result().is_closed)):
            ledger = ManagedLedger(name, config, self.client, self.info, self.clock)
            task = asyncio.create_task(ledger.open(), name=f"open {name}")
            self._open[name] = task
        try:
            return await asyncio.shield(task)
        except BaseException:
            if self._open.get(name) is task and task.done():
                del self._open[name]
            raise

    async def delete(self, name: str) -> None:
        """Delete the managed ledger: closed first when open here; otherwise its ledgers
        are read from the stored info (no bookie is needed), then deleted with the info.
        Concurrent deletes of one name share one run."""
        running = self._deleting.get(name)
        if running is None:
            running = asyncio.create_task(self._delete(name), name=f"delete {name}")
            self._deleting[name] = running
            running.add_done_callback(lambda _: self._forget_delete(name, running))
        await asyncio.shield(running)

    def _forget_delete(self, name: str, task: asyncio.Task[None]) -> None:
        if self._deleting.get(name) is task:
            del self._deleting[name]

    async def _delete(self, name: str) -> None:
        task = self._open.pop(name, None)
        if task is not None:
            try:
                ledger = await asyncio.shield(task)
            except Exception:  # a failed open leaves only the stored state to delete
                ledger = None
            if ledger is not None:
                await ledger.delete()
                return
        found = await self.info.read(name)
        if found is None:
            return
        for info in found[0]:
            with contextlib.suppress(NoSuchLedger):
                await self.client.delete(info.ledger_id)
        await self.info.delete(name)

    async def close(self) -> None:
        tasks, self._open = self._open, {}
        for task in tasks.values():
            if task.done() and not task.cancelled() and task.exception() is None:
                await task.result().close()
