"""The frozen, indexed cluster view every policy reads.

Built once from (a) the rack map stored at `/bookies` (Pulsar's BookiesRackConfiguration,
`{group: {bookieId: {"rack": ..., "hostname": ...}}}`), (b) the writable and read-only
bookie ids, (c) optional free-disk weights and (d) the placement mode. Only writable
bookies are candidates (BookKeeper's `knownBookies`). Locations:

    rack-aware    /rack                   default /default-rack
    region-aware  /region/rack            default /default-region/default-rack
    zone-aware    /zone/upgradedomain     default /default-zone/default-upgradedomain

`""`, `"/"` and missing racks map to the default; a bookie absent from the rack map has
the default location and no group. A location of the wrong depth for a rack- or
region-aware topology makes the bookie unplaceable (BookKeeper silently drops it,
bookkeeper #2490; here it is listed in `unplaceable` with the reason). In zone mode a
malformed location is "unresolved": the default fault domain.

Bookies are indexed by rack, region and group at build time, so a call costs the same on
10 bookies or 10,000. A Topology never changes: a new rack map builds a new one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from placement.config import PlacementMode
from placement.weights import WeightedSelector

DEFAULT_RACK = "/default-rack"
DEFAULT_REGION_RACK = "/default-region/default-rack"
DEFAULT_ZONE_UD = "/default-zone/default-upgradedomain"
UNKNOWN_REGION = "UnknownRegion"

_DEFAULTS = {
    PlacementMode.RACK: DEFAULT_RACK,
    PlacementMode.REGION: DEFAULT_REGION_RACK,
    PlacementMode.ZONE: DEFAULT_ZONE_UD,
}
_DEPTH = {PlacementMode.RACK: 1, PlacementMode.REGION: 2, PlacementMode.ZONE: 2}

RackMap = Mapping[str, Mapping[str, Any]]
_T = TypeVar("_T")


class MemoKey(Generic[_T]):
    """A key of `Topology.memo`: subclass it as a frozen dataclass per kind of memoised value
    (its fields say what the value depends on); the type parameter is the value's type."""


def default_location(mode: PlacementMode) -> str:
    """The location a bookie without (usable) rack info resolves to."""
    return _DEFAULTS[mode]


def normalize_rack(rack: object) -> str | None:
    """BookieRackAffinityMapping + NodeBase.normalize: None for empty, `/`-prefixed."""
    if not isinstance(rack, str):
        return None
    text = rack.strip()
    if text in ("", "/"):
        return None
    if not text.startswith("/"):
        text = "/" + text
    if len(text) > 1 and text.endswith("/"):
        text = text[:-1]
    return text


def region_of(location: str) -> str:
    """First path component (BookKeeper's region); the default location is UnknownRegion."""
    parts = [p for p in location.split("/") if p]
    if location == DEFAULT_REGION_RACK or len(parts) <= 1:
        return UNKNOWN_REGION
    return parts[0]


def split_zone(location: str) -> tuple[str, str]:
    """(zone, upgrade domain) of a `/zone/ud` location."""
    parts = [p for p in location.split("/") if p]
    return parts[0], parts[1]


@dataclass(frozen=True, eq=False)
class Topology:
    """Immutable, indexed view of the writable bookies and where they are."""

    mode: PlacementMode
    default_location: str
    bookies: tuple[str, ...]
    writable: frozenset[str]
    read_only: frozenset[str]
    location: Mapping[str, str]
    group_of: Mapping[str, str | None]
    group_members: Mapping[str, frozenset[str]]
    by_rack: Mapping[str, tuple[str, ...]]
    by_region: Mapping[str, tuple[str, ...]]
    region: Mapping[str, str]
    weights: Mapping[str, float]
    unplaceable: Mapping[str, str]
    known: frozenset[str] = frozenset()
    filtered: Mapping[str, str] = field(default_factory=dict)
    selector: WeightedSelector | None = None
    weight_multiple: float = 3
    _memo: dict[MemoKey[Any], Any] = field(default_factory=dict, repr=False)

    @classmethod
    def build(
        cls,
        rack_map: RackMap | None,
        writable: Iterable[str],
        read_only: Iterable[str] = (),
        weights: Mapping[str, float] | None = None,
        mode: PlacementMode = PlacementMode.RACK,
        weight_multiple: float = 3,
    ) -> Topology:
        """Index a cluster. `rack_map` is the `/bookies` document exactly as stored."""
        default = _DEFAULTS[mode]
        writable_ids = frozenset(writable)
        read_only_ids = frozenset(read_only) - writable_ids
        location: dict[str, str] = {}
        group_of: dict[str, str | None] = {}
        members: dict[str, set[str]] = {}
        unplaceable: dict[str, str] = {}
        for group in sorted(rack_map or {}):
            for bookie, info in (rack_map or {})[group].items():
                members.setdefault(group, set()).add(bookie)
                if bookie in group_of:  # hand-written JSON may overlap: first group wins
                    continue
                group_of[bookie] = group
                rack = normalize_rack(info.get("rack") if isinstance(info, Mapping) else None)
                location[bookie] = _resolve(rack, mode, default, bookie, unplaceable)
        for bookie in writable_ids | read_only_ids:
            if bookie not in location:
                location[bookie] = default
                group_of[bookie] = None
        placeable = sorted(b for b in writable_ids if b not in unplaceable)
        return cls._indexed(
            mode=mode,
            bookies=placeable,
            writable=writable_ids,
            read_only=read_only_ids,
            location=location,
            group_of=group_of,
            group_members={g: frozenset(m) for g, m in members.items()},
            weights=dict(weights or {}),
            unplaceable=unplaceable,
            filtered={},
            weight_multiple=weight_multiple,
        )

    @classmethod
    def _indexed(cls, *, bookies: list[str], location: Mapping[str, str],
                 weights: Mapping[str, float], weight_multiple: float,
                 **rest: Any) -> Topology:
        by_rack: dict[str, list[str]] = {}
        by_region: dict[str, list[str]] = {}
        region: dict[str, str] = {}
        for bookie in bookies:
            loc = location[bookie]
            by_rack.setdefault(loc, []).append(bookie)
            reg = region_of(loc)
            region[bookie] = reg
            by_region.setdefault(reg, []).append(bookie)
        selector = None
        if weights:
            selector = WeightedSelector({b: weights.get(b, 0.0) for b in bookies},
                                        weight_multiple)
        return cls(
            default_location=_DEFAULTS[rest["mode"]],
            bookies=tuple(bookies),
            known=frozenset(bookies),
            location=location,
            by_rack={k: tuple(v) for k, v in by_rack.items()},
            by_region={k: tuple(v) for k, v in by_region.items()},
            region=region,
            weights=weights,
            selector=selector,
            weight_multiple=weight_multiple,
            **rest,
        )

    # -- queries -------------------------------------------------------------------------

    @property
    def num_racks(self) -> int:
        """Distinct locations of placeable writable bookies (the default rack counts)."""
        return len(self.by_rack)

    def rack_of(self, bookie: str) -> str:
        """Location of any bookie ever seen; the default location otherwise."""
        return self.location.get(bookie, self.default_location)

    def is_known(self, bookie: str) -> bool:
        """Writable and placeable: a candidate, and counted by adherence checks."""
        return bookie in self.known

    def bookies_in_group(self, group: str) -> frozenset[str]:
        """Every bookie listed under `group` in the rack map (any state)."""
        return self.group_members.get(group, frozenset())

    # -- views ---------------------------------------------------------------------------

    def restrict(
        self, key: MemoKey[Topology], allowed: Iterable[str], reasons: Mapping[str, str]
    ) -> Topology:
        """A view holding only `allowed` writable bookies; others get `reasons`.

        Views are memoised under `key` (the caller's description of the filter), so
        repeated calls with the same groups reuse one index.
        """
        view = self._memo.get(key)
        if isinstance(view, Topology):
            return view
        keep = frozenset(allowed)
        bookies = [b for b in self.bookies if b in keep]
        filtered = dict(self.filtered)
        for bookie in self.bookies:
            if bookie not in keep:
                filtered[bookie] = reasons.get(bookie, "not allowed")
        view = Topology._indexed(
            mode=self.mode,
            bookies=bookies,
            writable=self.writable,
            read_only=self.read_only,
            location=self.location,
            group_of=self.group_of,
            group_members=self.group_members,
            weights=self.weights,
            unplaceable=self.unplaceable,
            filtered=filtered,
            weight_multiple=self.weight_multiple,
        )
        self._memo[key] = view
        return view

    def memo(self, key: MemoKey[_T], factory: Callable[[], _T]) -> _T:
        """Compute once per topology (it never changes), then reuse."""
        try:
            found: _T = self._memo[key]
            return found
        except KeyError:
            value = factory()
            self._memo[key] = value
            return value

    def memoised(self, key: MemoKey[_T]) -> _T | None:
        """The value memoised under `key`, if any (no computing)."""
        found: _T | None = self._memo.get(key)
        return found


def _resolve(
    rack: str | None, mode: PlacementMode, default: str, bookie: str, bad: dict[str, str]
) -> str:
    if rack is None:
        return default
    depth = len([p for p in rack.split("/") if p])
    if depth == _DEPTH[mode]:
        return rack
    if mode is PlacementMode.ZONE:
        return default  # unresolved: the default fault domain
    shape = "/rack" if mode is PlacementMode.RACK else "/region/rack"
    bad[bookie] = (
        f"location '{rack}' has {depth} level(s); {mode.value} placement needs {shape}"
    )
    return rack
