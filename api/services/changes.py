"""Reading the change history (`metastore.change_history`) for `GET /admin/v2/changes`."""

from __future__ import annotations

from typing import Any

from metastore.store import MetadataStore

MAX_LIMIT = 10000


class ChangeHistoryService:
    def __init__(self, store: MetadataStore) -> None:
        self.store = store

    async def changes(self, since: int, prefix: str, limit: int) -> list[dict[str, Any]]:
        """The records after revision `since` whose request path or changed keys start with
        `prefix`, oldest first, at most `limit` (whole transactions)."""
        records = await self.store.read_changes(since, min(limit, MAX_LIMIT), prefix)
        return [record.to_json() for record in records]
