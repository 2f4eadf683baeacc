"""What the app holds while it runs: the store, the caches and the services built on them."""

from __future__ import annotations

from dataclasses import dataclass

from api.services.racks import RackService
from api.services.topology import TopologySnapshot
from api.settings import Settings
from metastore import paths
from metastore.cache import WatchedRange
from metastore.store import MetadataStore
from placement import PlacementConfig, Topology
from storage.bookie.client import BookieClient
from storage.engine import build_ledger_client, build_managed_ledger_factory
from storage.ledger import BookiePool, LedgerClient
from storage.managed_ledger import ManagedLedgerFactory


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
    ledgers: LedgerClient
    managed_ledgers: ManagedLedgerFactory

    @classmethod
    def build(cls, settings: Settings, store: MetadataStore) -> AppState:
        rack_watch = WatchedRange(store, paths.BOOKIES_RACK_CONFIG)
        bookie_watch = WatchedRange(store, paths.BOOKIES_AVAILABLE, prefix=True)
        config = placement_config(settings)
        snapshot = TopologySnapshot(rack_watch, bookie_watch, config)

        async def topology() -> Topology:
            return (await snapshot.current()).topology

        ledgers = build_ledger_client(store, BookiePool(BookieClient.connect), topology, config)
        return cls(
            settings=settings,
            store=store,
            rack_watch=rack_watch,
            racks=RackService(store, settings, rack_watch),
            bookie_watch=bookie_watch,
            broker_watch=WatchedRange(store, paths.BROKERS, prefix=True),
            ownership_watch=WatchedRange(store, paths.NAMESPACE_OWNERSHIP, prefix=True),
            placement_config=config,
            topology=snapshot,
            ledgers=ledgers,
            managed_ledgers=build_managed_ledger_factory(store, ledgers),
        )

    def watches(self) -> tuple[WatchedRange, ...]:
        return (self.rack_watch, self.bookie_watch, self.broker_watch, self.ownership_watch)

    async def start(self) -> None:
        for watch in self.watches():
            await watch.start()

    async def stop(self) -> None:
        await self.managed_ledgers.close()
        await self.ledgers.close()
        for watch in self.watches():
            await watch.stop()
        await self.store.close()
