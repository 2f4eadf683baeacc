"""The live placement topology: one frozen `placement.Topology`, rebuilt when the inputs change.

Inputs are two watch-fed mirrors: the rack map (`/bookies`) and the bookie registrations under
`/ledgers/available/` (read-only ones under `/ledgers/available/readonly/`). A change only
marks the snapshot stale (a watch listener must not do I/O); the next `current()` builds a new
Topology and swaps the reference (STYLE.md item 9), and every call until the next change
reuses it. While a watch is down the view is built from etcd reads on each call and never
kept, so a stale mirror is never served as current.

Code that places or audits once, without watches, calls `read_cluster_view`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from metastore import paths
from metastore.cache import WatchedRange
from metastore.documents import Registrations, decode_rack_config, registrations_of
from metastore.store import MetadataStore
from placement import PlacementConfig, Topology


@dataclass(frozen=True)
class ClusterView:
    """One consistent read of the inputs and the Topology built from them."""

    rack_map: Mapping[str, Mapping[str, Any]]
    registrations: Registrations
    topology: Topology

    @classmethod
    def build(
        cls, rack_map: Mapping[str, Mapping[str, Any]], registrations: Registrations,
        config: PlacementConfig,
    ) -> ClusterView:
        topology = Topology.build(
            rack_map,
            registrations.writable,
            registrations.read_only,
            mode=config.mode,
            weight_multiple=config.bookie_max_multiple_for_weight_based_placement,
        )
        return cls(rack_map, registrations, topology)


async def read_cluster_view(store: MetadataStore, config: PlacementConfig) -> ClusterView:
    """The topology as etcd holds it now (two reads; no watch)."""
    found = await store.get(paths.BOOKIES_RACK_CONFIG)
    rack_map = decode_rack_config(None if found is None else found.value)
    registered = await store.get_children_values(paths.BOOKIES_AVAILABLE)
    return ClusterView.build(rack_map, registrations_of(registered), config)


class TopologySnapshot:
    """Holds the current `ClusterView`; `current()` rebuilds it only after a change."""

    def __init__(
        self, racks: WatchedRange, bookies: WatchedRange, config: PlacementConfig
    ) -> None:
        self.racks = racks
        self.bookies = bookies
        self.config = config
        self._generation = 0
        self._view: tuple[int, ClusterView] | None = None
        self.builds = 0
        racks.add_listener(self._changed)
        bookies.add_listener(self._changed)

    @classmethod
    def watching(cls, store: MetadataStore, config: PlacementConfig) -> TopologySnapshot:
        """A snapshot over watches of its own (`start()` them before use, `stop()` after)."""
        return cls(
            WatchedRange(store, paths.BOOKIES_RACK_CONFIG),
            WatchedRange(store, paths.BOOKIES_AVAILABLE, prefix=True),
            config,
        )

    async def start(self) -> None:
        await self.racks.start()
        await self.bookies.start()

    async def stop(self) -> None:
        await self.racks.stop()
        await self.bookies.stop()

    def _changed(self) -> None:
        self._generation += 1

    @property
    def generation(self) -> int:
        """Counts the changes its watches delivered (equal: the same view)."""
        return self._generation

    async def current(self) -> ClusterView:
        held = self._view
        live = self.racks.synced and self.bookies.synced
        if live and held is not None and held[0] == self._generation:
            return held[1]
        generation = self._generation
        found = await self.racks.get()
        rack_map = decode_rack_config(None if found is None else found.value)
        registrations = registrations_of(await self.bookies.entries())
        view = ClusterView.build(rack_map, registrations, self.config)
        self.builds += 1
        if live:
            self._view = (generation, view)  # swap; a change during the build stays stale
        return view
