"""What the app holds while it runs: the store, the caches and the services built on them."""

from __future__ import annotations

from dataclasses import dataclass

from api.services.racks import RackService
from api.settings import Settings
from metastore import paths
from metastore.cache import WatchedRange
from metastore.store import MetadataStore


@dataclass
class AppState:
    settings: Settings
    store: MetadataStore
    rack_watch: WatchedRange
    racks: RackService

    @classmethod
    def build(cls, settings: Settings, store: MetadataStore) -> AppState:
        rack_watch = WatchedRange(store, paths.BOOKIES_RACK_CONFIG)
        return cls(
            settings=settings,
            store=store,
            rack_watch=rack_watch,
            racks=RackService(store, settings, rack_watch),
        )

    async def start(self) -> None:
        await self.rack_watch.start()

    async def stop(self) -> None:
        await self.rack_watch.stop()
        await self.store.close()
