"""Namespace-to-broker assignment (placement.md §7; Pulsar's LoadManagerShared).

Pure functions over plain data: broker ids like `host:8080`, loads as percentages,
namespace isolation policies as stored (`{name: NamespaceIsolationData JSON}`), failure
domains as `{domain: [broker, ...]}` and anti-affinity counts as `{broker: n}`.
Order: isolation policies -> anti-affinity (failure domains first when enabled) ->
fewest bundles of this namespace -> least loaded.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from placement.errors import InvalidPlacementRequest
from placement.java_regex import JavaRegexError, compile_java, java_matches

DEFAULT_DOMAIN = "default"


@dataclass(frozen=True, slots=True)
class IsolationPolicy:
    """One NamespaceIsolationData with a min_available auto-failover policy."""

    name: str
    namespaces: tuple[str, ...]
    primary: tuple[str, ...]
    secondary: tuple[str, ...]
    min_limit: int = 1
    usage_threshold: int = 100

    @classmethod
    def from_json(cls, name: str, data: Mapping[str, Any]) -> IsolationPolicy:
        failover = data.get("auto_failover_policy") or {}
        params = failover.get("parameters") or {}
        try:
            min_limit = int(params.get("min_limit", 1))
            usage = int(params.get("usage_threshold", 100))
        except (TypeError, ValueError) as exc:
            raise InvalidPlacementRequest(f"policy {name}: bad failover parameters") from exc
        policy = cls(name, tuple(data.get("namespaces") or ()), tuple(data.get("primary") or ()),
                     tuple(data.get("secondary") or ()), min_limit, usage)
        for rx in (*policy.namespaces, *policy.primary, *policy.secondary):
            try:
                compile_java(rx)  # Java's dialect, run by RE2 in linear time
            except JavaRegexError as exc:
                raise InvalidPlacementRequest(f"policy {name}: bad regex {rx!r}") from exc
        return policy

    def applies_to(self, namespace: str) -> bool:
        return any(java_matches(rx, namespace) for rx in self.namespaces)

    def is_primary(self, host: str) -> bool:
        return any(java_matches(rx, host) for rx in self.primary)

    def is_secondary(self, host: str) -> bool:
        return any(java_matches(rx, host) for rx in self.secondary)


def parse_policies(data: Mapping[str, Mapping[str, Any]] | None) -> tuple[IsolationPolicy, ...]:
    """The stored `namespaceIsolationPolicies` document, in name order."""
    return tuple(IsolationPolicy.from_json(n, d) for n, d in sorted((data or {}).items()))


def parse_valid_policies(
    data: Mapping[str, Any] | None,
) -> tuple[tuple[IsolationPolicy, ...], dict[str, str]]:
    """The policies of a stored document that can be applied, and `{name: why}` for the ones
    that cannot (a bad pattern or shape stored by another tool never stops every lookup)."""
    policies: list[IsolationPolicy] = []
    skipped: dict[str, str] = {}
    for name, policy in sorted((data or {}).items()):
        if not isinstance(policy, Mapping):
            skipped[name] = "not a JSON object"
            continue
        try:
            policies.append(IsolationPolicy.from_json(name, policy))
        except (InvalidPlacementRequest, TypeError, AttributeError) as exc:
            skipped[name] = str(exc)
    return tuple(policies), skipped


def broker_host(broker: str) -> str:
    """Policies match the host part of `host:port` (Pulsar parses `http://<broker>`)."""
    host = broker.rsplit(":", 1)[0] if broker.count(":") == 1 else broker
    return host.strip("[]")


def isolation_candidates(
    namespace: str, brokers: Iterable[str], policies: Sequence[IsolationPolicy],
    loads: Mapping[str, float] | None = None,
) -> set[str]:
    """applyNamespacePolicies: primaries, plus secondaries when too few primaries are usable.

    A primary counts as available for min_limit only if its load is below the policy's
    usage_threshold (min_available). Without a matching policy: every broker that is no
    policy's primary (shared brokers).
    """
    loads = loads or {}
    matching = [p for p in policies if p.applies_to(namespace)]
    if not matching:
        return {b for b in brokers
                if not any(p.is_primary(broker_host(b)) for p in policies)}
    policy = matching[0]
    primaries: set[str] = set()
    secondaries: set[str] = set()
    for b in brokers:
        host = broker_host(b)
        if policy.is_primary(host):
            primaries.add(b)
        elif policy.is_secondary(host):
            secondaries.add(b)
    usable = [b for b in primaries if loads.get(b, 0.0) < policy.usage_threshold]
    if len(usable) < policy.min_limit:
        return primaries | secondaries
    return primaries


def broker_to_domain(domains: Mapping[str, Iterable[str]]) -> dict[str, str]:
    """{broker: domain} from `{domain: [brokers]}` (failure domain documents)."""
    return {b: d for d, members in sorted(domains.items()) for b in members}


def filter_anti_affinity(
    candidates: Collection[str], counts: Mapping[str, int] | None,
    domain_of: Mapping[str, str] | None, failure_domains_enabled: bool,
) -> set[str]:
    """filterAntiAffinityGroupOwnedBrokers (§7.3, exact)."""
    out = set(candidates)
    if counts is None or not out:
        return out
    if failure_domains_enabled and domain_of:
        per_domain: dict[str, int] = {}
        for b in out:
            d = domain_of.get(b, DEFAULT_DOMAIN)
            per_domain[d] = per_domain.get(d, 0) + counts.get(b, 0)
        least_domain = min(per_domain.values())
        out = {b for b in out if per_domain[domain_of.get(b, DEFAULT_DOMAIN)] == least_domain}
    least = 0 if any(b not in counts for b in out) else min(counts[b] for b in out)
    if least == 0:
        return {b for b in out if counts.get(b, 0) == 0}
    return {b for b in out if counts[b] == least}


def fewest_namespace_bundles(candidates: Collection[str],
                             bundles: Mapping[str, int] | None) -> set[str]:
    """removeMostServicingBrokersForNamespace: keep brokers with the fewest bundles of it."""
    out = set(candidates)
    if not out or not bundles:
        return out
    least = min(bundles.get(b, 0) for b in out)
    return {b for b in out if bundles.get(b, 0) == least}


@dataclass(frozen=True, slots=True)
class BrokerAssignment:
    """The chosen broker and the candidate set after each filter (for explanations)."""

    broker: str | None
    after_isolation: tuple[str, ...]
    after_anti_affinity: tuple[str, ...]
    after_namespace_bundles: tuple[str, ...]


def select_broker(
    namespace: str,
    brokers: Iterable[str],
    *,
    policies: Sequence[IsolationPolicy] = (),
    loads: Mapping[str, float] | None = None,
    anti_affinity_counts: Mapping[str, int] | None = None,
    failure_domains: Mapping[str, Iterable[str]] | None = None,
    failure_domains_enabled: bool = False,
    namespace_bundles: Mapping[str, int] | None = None,
) -> BrokerAssignment:
    """selectBrokerForAssignment: filters in order; an empty step restores the previous set.

    Ties in load are broken by broker id, so the answer is deterministic.
    """
    loads = loads or {}
    isolated = isolation_candidates(namespace, brokers, policies, loads)
    domain_of = broker_to_domain(failure_domains or {})
    anti = filter_anti_affinity(isolated, anti_affinity_counts, domain_of,
                                failure_domains_enabled) or isolated
    fewest = fewest_namespace_bundles(anti, namespace_bundles) or anti
    broker = min(fewest, key=lambda b: (loads.get(b, 0.0), b)) if fewest else None
    return BrokerAssignment(broker, tuple(sorted(isolated)), tuple(sorted(anti)),
                            tuple(sorted(fewest)))


def should_unload_anti_affinity(
    current_broker: str, candidates: Collection[str], counts: Mapping[str, int] | None,
) -> bool:
    """shouldAntiAffinityNamespaceUnload (§7.4). `counts` None: no anti-affinity group."""
    if not counts:
        return True
    if not candidates:
        return True
    least = min(counts.get(b, 0) for b in candidates)
    cur = counts.get(current_broker, 0)
    if least == 0 or cur > least:
        return True
    return not all(counts.get(b, 0) == least for b in candidates)
