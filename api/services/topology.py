"""The live placement topology: one frozen `placement.Topology`, rebuilt when the inputs change.

Inputs are three watch-fed mirrors: the rack map (`/bookies`), the bookie registrations under
`/ledgers/available/` (writable: `/ledgers/available/{id}`; read-only:
`/ledgers/available/readonly/{id}`; the `readonly` node itself is not a bookie) and, for
lookups, the broker registrations under `/loadbalance/brokers/`. A change of the rack map or of
the registrations only marks the snapshot stale (a watch listener must not do I/O); the next
placement call builds a new Topology and swaps the reference (STYLE.md item 9), and every call
until the next change reuses it. While a watch is down the snapshot is built from etcd reads on
each call and never kept, so a stale mirror is never served as current.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from api.services.racks import decode_rack_config
from metastore import paths
from metastore.cache import WatchedRange
from metastore.store import Versioned
from placement import PlacementConfig, Topology

READONLY_CHILD = "readonly"


@dataclass(frozen=True)
class Registrations:
    """Registered bookie ids, writable and read-only (a bookie in both counts as writable)."""

    writable: frozenset[str]
    read_only: frozenset[str]

    @property
    def all(self) -> frozenset[str]:
        return self.writable | self.read_only


def registrations_of(entries: Mapping[str, Versioned]) -> Registrations:
    """Split the keys under `/ledgers/available/` into writable and read-only ids."""
    base = paths.BOOKIES_AVAILABLE + "/"
    readonly_base = paths.BOOKIES_READONLY + "/"
    writable: set[str] = set()
    read_only: set[str] = set()
    for key in entries:
        if key.startswith(readonly_base):
            name = key.removeprefix(readonly_base)
            if name and "/" not in name:
                read_only.add(name)
        elif key.startswith(base):
            name = key.removeprefix(base)
            if name and "/" not in name and name != READONLY_CHILD:
                writable.add(name)
    return Registrations(frozenset(writable), frozenset(read_only - writable))


@dataclass(frozen=True)
class ClusterView:
    """One consistent read of the inputs and the Topology built from them."""

    rack_map: Mapping[str, Mapping[str, Any]]
    registrations: Registrations
    topology: Topology


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

    def _changed(self) -> None:
        self._generation += 1

    async def current(self) -> ClusterView:
        held = self._view
        live = self.racks.synced and self.bookies.synced
        if live and held is not None and held[0] == self._generation:
            return held[1]
        generation = self._generation
        found = await self.racks.get()
        rack_map = decode_rack_config(None if found is None else found.value)
        registrations = registrations_of(await self.bookies.entries())
        view = ClusterView(
            rack_map=rack_map,
            registrations=registrations,
            topology=Topology.build(
                rack_map,
                registrations.writable,
                registrations.read_only,
                mode=self.config.mode,
                weight_multiple=self.config.bookie_max_multiple_for_weight_based_placement,
            ),
        )
        self.builds += 1
        if live:
            self._view = (generation, view)  # swap; a change during the build stays stale
        return view
