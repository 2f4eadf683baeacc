"""Pure placement decisions: BookKeeper ensembles, Pulsar isolation groups, broker choice.

Plain data in, decisions out: no I/O, no clocks, randomness only through the
`random.Random` passed in. Build a `Topology` once per rack-map change and reuse it.
"""

from placement.brokers import (
    BrokerAssignment,
    IsolationPolicy,
    filter_anti_affinity,
    isolation_candidates,
    parse_policies,
    parse_valid_policies,
    select_broker,
    should_unload_anti_affinity,
)
from placement.check import acked_bookies_adhere
from placement.config import PlacementConfig, PlacementMode
from placement.engine import (
    Explanation,
    adherence,
    explain,
    new_ensemble,
    replace_bookie,
    replace_to_adhere,
)
from placement.errors import InvalidPlacementRequest, NotEnoughBookies, PlacementError
from placement.inputs import default_request, with_sizes
from placement.isolation import AffinityGroups, effective_groups
from placement.java_regex import JavaRegexError, compile_java, is_valid_java_regex, java_matches
from placement.model import (
    Adherence,
    ChosenBookie,
    EnsembleRequest,
    ExcludedBookie,
    Placement,
    Source,
)
from placement.striping import entries_striped_to_bookie, has_entry, write_set
from placement.topology import Topology
from placement.violations import FragmentVerdict, Violation, check_fragment

__all__ = [
    "Adherence",
    "AffinityGroups",
    "BrokerAssignment",
    "ChosenBookie",
    "EnsembleRequest",
    "ExcludedBookie",
    "Explanation",
    "FragmentVerdict",
    "InvalidPlacementRequest",
    "IsolationPolicy",
    "JavaRegexError",
    "NotEnoughBookies",
    "Placement",
    "PlacementConfig",
    "PlacementError",
    "PlacementMode",
    "Source",
    "Topology",
    "Violation",
    "acked_bookies_adhere",
    "adherence",
    "check_fragment",
    "compile_java",
    "default_request",
    "effective_groups",
    "entries_striped_to_bookie",
    "explain",
    "filter_anti_affinity",
    "has_entry",
    "is_valid_java_regex",
    "isolation_candidates",
    "java_matches",
    "new_ensemble",
    "parse_policies",
    "parse_valid_policies",
    "replace_bookie",
    "replace_to_adhere",
    "select_broker",
    "should_unload_anti_affinity",
    "with_sizes",
    "write_set",
]
