"""The API's side of the change history (`metastore.change_history`): the change context of a
write request, and the background pruning that keeps the history within its retention.

A write request (PUT, POST, DELETE, PATCH) is recorded under a `ChangeContext` built here from
what the request carries: the role `api.auth.authorization.authorize` found (None when
authentication is off), the client's address, the method and the path. Headers never go into
it, so no token reaches a record.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Final

from starlette.types import Scope

from api.settings import Settings
from metastore.change_history import ChangeContext
from metastore.store import MetadataStore

log = logging.getLogger(__name__)

WRITE_METHODS: Final = frozenset({"PUT", "POST", "DELETE", "PATCH"})


def client_address(scope: Scope) -> str | None:
    client = scope.get("client")
    return str(client[0]) if client else None


def change_context(scope: Scope, role: str | None, settings: Settings) -> ChangeContext | None:
    """The context a write request's changes are recorded under; None for a read, or when
    the history is off."""
    method = scope.get("method", "")
    if not settings.changeHistoryEnabled or method not in WRITE_METHODS:
        return None
    return ChangeContext(role, client_address(scope), method, scope.get("path", ""))


class HistoryPruner:
    """Deletes the records beyond `changeHistoryMaxRecords` and older than
    `changeHistoryMaxAgeSeconds`, every `changeHistoryPruneIntervalSeconds`, in its own task:
    writes never wait for it. Every server does it; deleting what another already deleted
    is harmless."""

    def __init__(self, store: MetadataStore, settings: Settings) -> None:
        self.store = store
        self.settings = settings
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self.settings.changeHistoryEnabled and self._task is None:
            self._task = asyncio.create_task(self._run(), name="change history pruning")

    async def stop(self) -> None:
        if self._task is not None:
            task, self._task = self._task, None
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def prune(self) -> int:
        return await self.store.prune_changes(
            self.settings.changeHistoryMaxRecords, self.settings.changeHistoryMaxAgeSeconds
        )

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.settings.changeHistoryPruneIntervalSeconds)
            try:
                deleted = await self.prune()
            except Exception as exc:  # etcd away: try again next time
                log.warning("pruning the change history failed: %s", type(exc).__name__)
                continue
            if deleted:
                log.info("pruned %d change history records", deleted)
