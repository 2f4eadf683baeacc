"""How a placement describes its members (rack, group, source), memoised per topology, and
the graded answer of a policy that cannot repair an ensemble."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from placement import check
from placement.config import PlacementConfig
from placement.model import ChosenBookie, EnsembleRequest, Placement, Source
from placement.topology import MemoKey, Topology


def _any_source(_bookie: str) -> Source:
    return Source.ANY


@dataclass(frozen=True)
class DescriptionsKey(MemoKey["Descriptions"]):
    """The memo of how a topology (or a view of it) describes its members."""


DESCRIPTIONS = DescriptionsKey()


class Descriptions(dict[str, ChosenBookie]):
    """bookie -> its ChosenBookie, built on first use and kept (a Topology never changes)."""

    __slots__ = ("_source", "_topology")

    def __init__(self, topology: Topology, source: Callable[[str], Source] = _any_source):
        super().__init__()
        self._topology = topology
        self._source = source

    def __missing__(self, bookie: str) -> ChosenBookie:
        t = self._topology
        found = ChosenBookie(bookie, t.rack_of(bookie), t.group_of.get(bookie),
                             self._source(bookie))
        if bookie in t.location:  # keep only bookies the topology has seen: bounded
            self[bookie] = found
        return found


def describe_ensemble(
    topology: Topology, ensemble: Sequence[str], descriptions: Descriptions | None = None
) -> tuple[ChosenBookie, ...]:
    """Each member's rack, group and source (Source.ANY unless `descriptions` says)."""
    if descriptions is None:
        descriptions = topology.memo(DESCRIPTIONS, lambda: Descriptions(topology))
    return tuple([descriptions[b] for b in ensemble])


def unrepaired(
    topology: Topology, request: EnsembleRequest, config: PlacementConfig,
    ensemble: Sequence[str], policy: str,
) -> Placement:
    """The ensemble unchanged and graded, for policies that cannot repair (as BookKeeper)."""
    current = tuple(ensemble)
    grade, why = check.fault_domain_verdict(
        topology, current, request.write_quorum, request.ack_quorum, config)
    return Placement(current, grade,
                     (why, f"{policy} placement does not repair ensembles (as BookKeeper)"),
                     describe_ensemble(topology, current))
