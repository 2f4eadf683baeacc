"""Pure decoders of the stored documents every layer reads (no etcd client: a Spark worker
imports this module as it is).

Each decoder takes the bytes stored at a Pulsar path and returns a small typed value with the
fields placement, lookup and the audit use. Policies and local policies have one model each
(`metastore.models`, which the API also accepts and returns); their decoders here are that
model's tolerant reading side. The others are read-only views:

- `/bookies` (BookiesRackConfiguration): `decode_rack_config` -> `{group: {bookieId: info}}`;
  anything that is not a map of groups reads as empty, so a document another tool wrote
  never takes placement down.
- `/ledgers/available/...` keys: `registrations_of` -> `Registrations` (writable, read-only).
- `/admin/policies/{t}/{ns}` (Policies): `decode_policies` -> `Policies` (placement reads
  `persistence_request`).
- `/admin/local-policies/{t}/{ns}` (LocalPolicies): `decode_local_policies` -> `LocalPolicies`
  (placement reads `bookie_affinity` with the strict extension, `anti_affinity_group`,
  `bundle_boundaries`).
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
from metastore.models import FailureDomain, LocalPolicies, Policies

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


# -- namespace policies: one model each (metastore.models), read tolerantly --------------------


def decode_policies(path: str, raw: bytes) -> Policies:
    """Policies at `path` (`Policies.read`): persistence fields Pulsar omits take its
    defaults (2/2/2); an unreadable document raises."""
    return Policies.read(path, raw)


def decode_local_policies(path: str, raw: bytes) -> LocalPolicies:
    """LocalPolicies at `path` (`LocalPolicies.read`): tolerant of malformed fields; a
    document that is not a JSON object raises."""
    return LocalPolicies.read(path, raw)


def namespace_of_local_policies(path: str) -> str | None:
    """`tenant/namespace` of a key under `/admin/local-policies/`, None for other keys."""
    name = path.removeprefix(paths.LOCAL_POLICIES + "/")
    if name == path or name.count("/") != 1:
        return None
    return name


# -- failure domains and brokers ----------------------------------------------------------------


def decode_failure_domain(raw: bytes) -> list[str]:
    """The broker ids of a failure domain (`FailureDomain.read`); unreadable: none."""
    return FailureDomain.read(raw).brokers or []


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
