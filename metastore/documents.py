"""Pure decoders of the stored documents every layer reads (no etcd client: a Spark worker
imports this module as it is).

Each decoder takes the bytes stored at a Pulsar path and returns a small typed value with the
fields placement, lookup and the audit use. The API's pydantic models (api/shapes/models.py) remain
the full shapes that are written; these readers are the tolerant, read-only side:

- `/bookies` (BookiesRackConfiguration): `decode_rack_config` -> `{group: {bookieId: info}}`;
  anything that is not a map of groups reads as empty, so a document another tool wrote
  never takes placement down.
- `/ledgers/available/...` keys: `registrations_of` -> `Registrations` (writable, read-only).
- `/admin/policies/{t}/{ns}` (Policies): `decode_policies` -> `NamespacePolicies`.
- `/admin/local-policies/{t}/{ns}` (LocalPolicies): `decode_local_policies` -> `LocalPolicies`
  (bookie affinity groups with the strict extension, anti-affinity group, bundle boundaries).
- `/admin/clusters/{c}/failureDomain/{d}`: `decode_failure_domain` -> broker ids.
- `/loadbalance/brokers/{id}` (LocalBrokerData): `decode_broker` -> `BrokerRegistration`.

Policies and local policies that are not a JSON object raise `ContentDeserializationError`
(a namespace's own document that cannot be read is an error, never "no policy").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from metastore import paths
from metastore.codec import load_json
from metastore.errors import ContentDeserializationError
from placement import AffinityGroups, EnsembleRequest

RackConfig = dict[str, dict[str, dict[str, Any]]]

READONLY_CHILD = "readonly"
_BROKER_RESOURCES = ("cpu", "memory", "directMemory", "bandwidthIn", "bandwidthOut")


# -- /bookies -------------------------------------------------------------------------------


def decode_rack_config(raw: bytes | None) -> RackConfig:
    """The stored `/bookies` document; anything that is not a map of groups reads as empty."""
    if not raw:
        return {}
    try:
        document = load_json(raw)
    except ValueError:
        return {}
    if not isinstance(document, dict):
        return {}
    return {group: bookies for group, bookies in document.items() if isinstance(bookies, dict)}


# -- /ledgers/available -----------------------------------------------------------------------


@dataclass(frozen=True)
class Registrations:
    """Registered bookie ids, writable and read-only (a bookie in both counts as writable)."""

    writable: frozenset[str]
    read_only: frozenset[str]

    @property
    def all(self) -> frozenset[str]:
        return self.writable | self.read_only


def registrations_of(keys: Iterable[str]) -> Registrations:
    """Split the keys under `/ledgers/available/` into writable and read-only ids (writable:
    `/ledgers/available/{id}`; read-only: `/ledgers/available/readonly/{id}`; the `readonly`
    node itself is not a bookie)."""
    base = paths.BOOKIES_AVAILABLE + "/"
    readonly_base = paths.BOOKIES_READONLY + "/"
    writable: set[str] = set()
    read_only: set[str] = set()
    for key in keys:
        if key.startswith(readonly_base):
            name = key.removeprefix(readonly_base)
            if name and "/" not in name:
                read_only.add(name)
        elif key.startswith(base):
            name = key.removeprefix(base)
            if name and "/" not in name and name != READONLY_CHILD:
                writable.add(name)
    return Registrations(frozenset(writable), frozenset(read_only - writable))


# -- namespace policies -----------------------------------------------------------------------


def _object(path: str, raw: bytes) -> dict[str, Any]:
    try:
        document = load_json(raw)
    except ValueError as exc:
        raise ContentDeserializationError(path) from exc
    if not isinstance(document, dict):
        raise ContentDeserializationError(path)
    return document


def _count(path: str, data: Mapping[str, Any], key: str, default: int) -> int:
    value = data.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise ContentDeserializationError(path)
    return value


@dataclass(frozen=True)
class NamespacePolicies:
    """What placement needs of a namespace's `Policies`: its persistence sizes, if set."""

    persistence: EnsembleRequest | None = None


def decode_policies(path: str, raw: bytes) -> NamespacePolicies:
    """Policies at `path`; persistence fields Pulsar omits take its defaults (2/2/2)."""
    data = _object(path, raw).get("persistence")
    if not isinstance(data, Mapping):
        return NamespacePolicies()
    return NamespacePolicies(
        EnsembleRequest(
            _count(path, data, "bookkeeperEnsemble", 2),
            _count(path, data, "bookkeeperWriteQuorum", 2),
            _count(path, data, "bookkeeperAckQuorum", 2),
        )
    )


@dataclass(frozen=True)
class LocalPolicies:
    """What placement and lookup need of a namespace's `LocalPolicies`."""

    bookie_affinity: AffinityGroups | None = None  # None: no groups of its own
    anti_affinity_group: str | None = None
    bundle_boundaries: tuple[str, ...] | None = None  # after a split; None: from Policies


def affinity_from(data: object) -> AffinityGroups | None:
    """The groups of a BookieAffinityGroupData document; None when it names no group (the
    broker-wide groups apply then)."""
    if not isinstance(data, Mapping):
        return None
    groups = AffinityGroups.from_json(
        {k: v if isinstance(v, str) or k.endswith("Strict") else None for k, v in data.items()}
    )
    if not groups.primary and not groups.secondary:
        return None
    return groups


def decode_local_policies(path: str, raw: bytes) -> LocalPolicies:
    data = _object(path, raw)
    group = data.get("namespaceAntiAffinityGroup")
    bundles = data.get("bundles")
    boundaries = bundles.get("boundaries") if isinstance(bundles, Mapping) else None
    return LocalPolicies(
        bookie_affinity=affinity_from(data.get("bookieAffinityGroup")),
        anti_affinity_group=group if isinstance(group, str) else None,
        bundle_boundaries=(
            tuple(b for b in boundaries if isinstance(b, str))
            if isinstance(boundaries, list) and boundaries
            else None
        ),
    )


def namespace_of_local_policies(path: str) -> str | None:
    """`tenant/namespace` of a key under `/admin/local-policies/`, None for other keys."""
    name = path.removeprefix(paths.LOCAL_POLICIES + "/")
    if name == path or name.count("/") != 1:
        return None
    return name


# -- failure domains and brokers ----------------------------------------------------------------


def decode_failure_domain(raw: bytes) -> list[str]:
    """The broker ids of a failure domain (`{"brokers": [...]}`); unreadable: none."""
    try:
        data = load_json(raw) if raw else {}
    except ValueError:
        return []
    members = data.get("brokers") if isinstance(data, dict) else None
    return [b for b in members or [] if isinstance(b, str)]


@dataclass(frozen=True)
class BrokerRegistration:
    """A registration at `/loadbalance/brokers/{id}` (LocalBrokerData), tolerant of gaps."""

    broker_id: str
    web_service_url: str
    web_service_url_tls: str | None
    pulsar_service_url: str | None
    pulsar_service_url_tls: str | None
    load: float


def decode_broker(broker_id: str, raw: bytes) -> BrokerRegistration:
    try:
        data = load_json(raw) if raw else {}
    except ValueError:
        data = {}
    if not isinstance(data, dict):
        data = {}

    def text(key: str) -> str | None:
        value = data.get(key)
        return value if isinstance(value, str) and value else None

    return BrokerRegistration(
        broker_id=broker_id,
        web_service_url=text("webServiceUrl") or f"http://{broker_id}",
        web_service_url_tls=text("webServiceUrlTls"),
        pulsar_service_url=text("pulsarServiceUrl"),
        pulsar_service_url_tls=text("pulsarServiceUrlTls"),
        load=max_resource_usage(data),
    )


def max_resource_usage(data: Mapping[str, Any]) -> float:
    """LocalBrokerData.getMaxResourceUsage: the highest usage/limit percentage."""
    highest = 0.0
    for name in _BROKER_RESOURCES:
        usage = data.get(name)
        if not isinstance(usage, Mapping):
            continue
        try:
            used, limit = float(usage.get("usage", 0)), float(usage.get("limit", 0))
        except (TypeError, ValueError):
            continue
        if limit > 0:
            highest = max(highest, used / limit * 100)
    return highest


def direct_children(entries: Mapping[str, Any], parent: str) -> dict[str, Any]:
    """The entries of direct children of `parent`, by child name."""
    prefix = parent.rstrip("/") + "/"
    return {
        key.removeprefix(prefix): value
        for key, value in entries.items()
        if key.startswith(prefix) and "/" not in key.removeprefix(prefix)
    }
