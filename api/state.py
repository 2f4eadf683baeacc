"""What the app holds while it runs: the store, the caches and the services built on them."""

from __future__ import annotations

from dataclasses import dataclass

from api.services.racks import RackService
from api.services.topology import TopologySnapshot
from api.settings import Settings
from metastore import paths
from metastore.cache import WatchedRange
from metastore.store import MetadataStore
from metastore.versioned_keys import VersionedKeys
from placement import PlacementConfig


def placement_config(settings: Settings) -> PlacementConfig:
    """PlacementConfig from the broker.conf keys in effect (typed fields and extra keys such
    as `reppRegionsToWrite`); a bad value fails the start."""
    return PlacementConfig.from_broker_conf(settings.runtime_configuration())


@dataclass
class AppState:
    settings: Settings
    store: MetadataStore
    rack_watch: WatchedRange
    racks: RackService
    bookie_watch: WatchedRange
    broker_watch: WatchedRange
    ownership_watch: WatchedRange
    placement_config: PlacementConfig
    topology: TopologySnapshot
    versioned_keys: VersionedKeys  # ledger metadata and other records with Pulsar's versions

    @classmethod
    def build(cls, settings: Settings, store: MetadataStore) -> AppState:
        rack_watch = WatchedRange(store, paths.BOOKIES_RACK_CONFIG)
        bookie_watch = WatchedRange(store, paths.BOOKIES_AVAILABLE, prefix=True)
        config = placement_config(settings)
        return cls(
            settings=settings,
            store=store,
            rack_watch=rack_watch,
            racks=RackService(store, settings, rack_watch),
            bookie_watch=bookie_watch,
            broker_watch=WatchedRange(store, paths.BROKERS, prefix=True),
            ownership_watch=WatchedRange(store, paths.NAMESPACE_OWNERSHIP, prefix=True),
            placement_config=config,
            topology=TopologySnapshot(rack_watch, bookie_watch, config),
            versioned_keys=VersionedKeys.of(store),
        )

    def watches(self) -> tuple[WatchedRange, ...]:
        return (self.rack_watch, self.bookie_watch, self.broker_watch, self.ownership_watch)

    async def start(self) -> None:
        for watch in self.watches():
            await watch.start()

    async def stop(self) -> None:
        for watch in self.watches():
            await watch.stop()
        await self.versioned_keys.close()
        await self.store.close()
