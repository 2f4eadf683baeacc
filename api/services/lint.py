"""`bookies lint`: configuration that silently weakens placement, as a list of warnings.

Each warning has a stable `kind` (see `KINDS`) and a readable `message`, plus `bookieId`,
`group` or `namespace` when it is about one. Everything is read from the live topology
snapshot (rack map + registrations) and the namespaces' local policies; nothing is written.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from api.models import LocalPolicies, Policies
from api.services.placement import affinity_of, default_request
from api.services.topology import ClusterView, TopologySnapshot
from metastore import paths
from metastore.store import MetadataStore
from placement import PlacementConfig, PlacementMode
from placement.topology import normalize_rack

UNRACKED = "unracked-bookie"
STALE_RACK_ENTRY = "unregistered-rack-entry"
INVALID_ID = "invalid-bookie-id"
DEPTH_MISMATCH = "rack-depth-mismatch"
EMPTY_GROUP = "empty-affinity-group"
SMALL_GROUP = "affinity-group-too-small"
TOO_FEW_RACKS = "too-few-racks"
DEFAULT_RACK = "default-rack"

KINDS: dict[str, str] = {
    UNRACKED: "a registered bookie has no entry in the rack map: it is placed on the default "
    "rack and, under isolation, counts as ungrouped",
    STALE_RACK_ENTRY: "the rack map lists a bookie that is not registered (stale or mistyped "
    "key)",
    INVALID_ID: "a bookie id (registered or in the rack map) is not in host:port form",
    DEPTH_MISMATCH: "a rack has the wrong number of levels for the placement mode (/rack for "
    "rack-aware, /region/rack for region-aware): the bookie cannot be placed",
    EMPTY_GROUP: "a namespace's bookie affinity group has no bookies in the rack map",
    SMALL_GROUP: "a namespace's primary affinity groups have fewer writable bookies than its "
    "ensemble size (ledgers fall back to secondary or ungrouped bookies, or fail when strict)",
    TOO_FEW_RACKS: "the writable bookies span fewer racks than "
    "bookkeeperClientMinNumRacksPerWriteQuorum",
    DEFAULT_RACK: "a writable bookie listed in the rack map resolves to the default rack "
    "(empty rack, '/', or the default rack named explicitly)",
}

HOST_PORT = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[^:/\s]+):([0-9]{1,5})$")
_SHAPE = {PlacementMode.RACK: "/rack", PlacementMode.REGION: "/region/rack",
          PlacementMode.ZONE: "/zone/upgradedomain"}  # fmt: skip

Warning = dict[str, str]


def warning(kind: str, message: str, **about: str | None) -> Warning:
    return {"kind": kind, **{k: v for k, v in about.items() if v is not None}, "message": message}


def is_host_port(bookie_id: str) -> bool:
    found = HOST_PORT.match(bookie_id)
    return found is not None and 0 < int(found.group(2)) < 65536


def bookie_warnings(view: ClusterView) -> Iterator[Warning]:
    topo = view.topology
    registered = view.registrations.all
    listed: dict[str, tuple[str, Any]] = {}
    for group in sorted(view.rack_map):
        for bookie, info in view.rack_map[group].items():
            listed.setdefault(bookie, (group, info))
    for bookie in sorted(registered | set(listed)):
        if not is_host_port(bookie):
            yield warning(INVALID_ID, f"Bookie id '{bookie}' is not in host:port form",
                          bookieId=bookie)  # fmt: skip
    for bookie in sorted(registered - set(listed)):
        yield warning(UNRACKED, f"Bookie {bookie} is registered but has no rack information; it "
                      f"is placed on {topo.default_location}", bookieId=bookie)  # fmt: skip
    for bookie in sorted(set(listed) - registered):
        group = listed[bookie][0]
        yield warning(STALE_RACK_ENTRY, f"Rack map lists bookie {bookie} (group '{group}') but "
                      "it is not registered", bookieId=bookie, group=group)  # fmt: skip
    for bookie, reason in sorted(topo.unplaceable.items()):
        yield warning(DEPTH_MISMATCH, f"Bookie {bookie}: {reason}", bookieId=bookie,
                      group=listed.get(bookie, (None,))[0])  # fmt: skip
    for bookie in sorted(topo.writable & set(listed)):
        if bookie in topo.unplaceable or topo.rack_of(bookie) != topo.default_location:
            continue
        group, info = listed[bookie]
        rack = info.get("rack") if isinstance(info, Mapping) else None
        shown = "no rack" if normalize_rack(rack) is None else f"rack '{rack}'"
        yield warning(DEFAULT_RACK, f"Bookie {bookie} has {shown} and resolves to the default "
                      f"rack {topo.default_location}", bookieId=bookie, group=group)  # fmt: skip


def rack_warnings(view: ClusterView, config: PlacementConfig) -> Iterator[Warning]:
    racks = view.topology.num_racks
    wanted = config.min_num_racks_per_write_quorum
    if view.topology.bookies and racks < wanted:
        yield warning(TOO_FEW_RACKS, f"Writable bookies span {racks} rack(s), fewer than "
                      f"bookkeeperClientMinNumRacksPerWriteQuorum={wanted}")  # fmt: skip


def group_warnings(
    view: ClusterView, config: PlacementConfig, namespace: str, local: LocalPolicies,
    policies: Policies | None,
) -> Iterator[Warning]:
    groups = affinity_of(local)
    if groups is None or groups.disables_isolation:
        return
    topo = view.topology
    for group in (*groups.primary, *groups.secondary):
        if not topo.bookies_in_group(group):
            yield warning(EMPTY_GROUP, f"Namespace {namespace} uses bookie affinity group "
                          f"'{group}', which has no bookies", group=group,
                          namespace=namespace)  # fmt: skip
    ensemble = default_request(policies or Policies(), config).ensemble_size
    writable = {b for g in groups.primary for b in topo.bookies_in_group(g) if topo.is_known(b)}
    primary = ",".join(groups.primary)
    if groups.primary and len(writable) < ensemble and any(
        topo.bookies_in_group(g) for g in groups.primary
    ):
        yield warning(SMALL_GROUP, f"Namespace {namespace}: primary group '{primary}' has "
                      f"{len(writable)} writable bookie(s), fewer than its ensemble size "
                      f"{ensemble}", group=primary, namespace=namespace)  # fmt: skip


class LintService:
    def __init__(self, store: MetadataStore, snapshot: TopologySnapshot) -> None:
        self.store = store
        self.snapshot = snapshot
        self.config = snapshot.config

    async def lint(self) -> list[Warning]:
        view = await self.snapshot.current()
        found = [*bookie_warnings(view), *rack_warnings(view, self.config)]
        for namespace, local in sorted((await self._local_policies()).items()):
            if local.bookieAffinityGroup is None:
                continue
            policies = await self._policies(namespace)
            found.extend(group_warnings(view, self.config, namespace, local, policies))
        return found

    async def _local_policies(self) -> dict[str, LocalPolicies]:
        prefix = paths.LOCAL_POLICIES + "/"
        out: dict[str, LocalPolicies] = {}
        for key, value in (await self.store.get_children_values(paths.LOCAL_POLICIES)).items():
            name = key.removeprefix(prefix)
            if name.count("/") != 1:
                continue
            try:
                out[name] = LocalPolicies.from_bytes(value.value)
            except ValueError:
                continue
        return out

    async def _policies(self, namespace: str) -> Policies | None:
        found = await self.store.get(paths.join(paths.TENANTS, namespace))
        if found is None:
            return None
        try:
            return Policies.from_bytes(found.value)
        except ValueError:
            return None
