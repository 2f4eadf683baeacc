"""Topic lookup and namespace bundle ownership, as a Pulsar broker's `TopicLookup` answers it.

- A topic belongs to the bundle of its namespace whose hash range holds
  `crc32(topic name)` (Pulsar's `NamespaceBundleFactory` hashes the full name,
  `persistent://t/ns/topic`, with Guava's crc32, unsigned). Boundaries come from the
  namespace's local policies (after a split), else its policies.
- The owner of a bundle is recorded at `/namespace/{tenant}/{ns}/{lower}_{upper}` as
  `NamespaceEphemeralData` JSON (OwnershipCache). The first lookup picks a broker with
  `placement.brokers.select_broker` over the registered brokers (`/loadbalance/brokers/`,
  LocalBrokerData): namespace isolation policies, then anti-affinity (failure domains first
  when `failureDomainsEnabled`), then fewest bundles of the namespace, then least loaded.
- Recording is create-if-absent in one etcd transaction, so concurrent first lookups (in
  this process or in several) agree on one owner: the loser reads the winner's record. The
  record is attached to the owner's registration lease when it has one, so it vanishes with
  the broker, as Pulsar's ephemeral ownership does. A record whose broker is no longer
  registered is replaced the same way (compare on its revision).
- Unload deletes the namespace's ownership records.
"""

from __future__ import annotations

import bisect
import logging
import zlib
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from api.errors import InvalidInput, NotFound, ServiceUnavailable
from api.naming import require_valid_namespace_name
from api.services.namespaces import (
    NAMESPACE_NOT_FOUND,
    NAMESPACE_NOT_OWNED,
    TOPIC_DOMAINS,
    NamespaceService,
    bundles_for,
)
from api.settings import Settings
from api.shapes.models import BundlesData
from metastore import errors as store_errors
from metastore.cache import WatchedRange
from metastore.codec import dump_json, load_json
from metastore.documents import BrokerRegistration, LocalPolicies
from metastore.readers import read_all_local_policies, read_failure_domains
from metastore.repositories import Repositories
from metastore.store import MetadataStore, Versioned
from placement import IsolationPolicy, parse_valid_policies, select_broker

log = logging.getLogger(__name__)

FULL_RANGE_END = 0xFFFFFFFF


# -- bundles ------------------------------------------------------------------------------------


def topic_hash(topic: str) -> int:
    """Guava `Hashing.crc32().hashString(topic, UTF_8).padToLong()`."""
    return zlib.crc32(topic.encode("utf-8")) & FULL_RANGE_END


def bundle_range(boundaries: list[int], hash_code: int) -> str:
    """NamespaceBundles.getBundle: ranges are [lower, upper) except the last, [lower, upper]."""
    index = bisect.bisect_right(boundaries, hash_code) - 1
    index = max(0, min(index, len(boundaries) - 2))
    return f"0x{boundaries[index]:08x}_0x{boundaries[index + 1]:08x}"


def boundaries_of(bundles: BundlesData | None, default_bundles: int) -> list[int]:
    data = bundles if bundles is not None and bundles.boundaries else bundles_for(default_bundles)
    points = sorted({int(b, 16) for b in data.boundaries or []})
    return points if len(points) >= 2 else [0, FULL_RANGE_END]


# -- brokers ------------------------------------------------------------------------------------


def ownership_record(broker: BrokerRegistration) -> dict[str, Any]:
    """NamespaceEphemeralData as Pulsar's Jackson writes it (nulls dropped)."""
    data: dict[str, Any] = {
        "nativeUrl": broker.pulsar_service_url,
        "nativeUrlTls": broker.pulsar_service_url_tls,
        "httpUrl": broker.web_service_url,
        "httpUrlTls": broker.web_service_url_tls,
        "disabled": False,
        "advertisedListeners": {},
    }
    return {k: v for k, v in data.items() if v is not None}


def broker_id_of(owner: Mapping[str, Any]) -> str | None:
    """The `host:port` a NamespaceEphemeralData's web URL names (brokers register under it)."""
    for key in ("httpUrl", "httpUrlTls"):
        url = owner.get(key)
        if isinstance(url, str) and url:
            netloc = urlsplit(url).netloc
            if netloc:
                return netloc
    return None


def lookup_data(owner: Mapping[str, Any]) -> dict[str, Any]:
    """LookupData JSON from an ownership record (upstream's field set; nulls dropped)."""
    data = {
        "brokerUrl": owner.get("nativeUrl"),
        "brokerUrlTls": owner.get("nativeUrlTls"),
        "httpUrl": owner.get("httpUrl"),
        "httpUrlTls": owner.get("httpUrlTls"),
        "nativeUrl": owner.get("nativeUrl"),
        "brokerUrlSsl": "",
    }
    return {k: v for k, v in data.items() if v is not None}


def decode_json(raw: bytes) -> Any:
    try:
        return load_json(raw)
    except ValueError:
        return None


# -- the service --------------------------------------------------------------------------------


class LookupService:
    def __init__(
        self,
        store: MetadataStore,
        settings: Settings,
        brokers: WatchedRange,
        ownership: WatchedRange,
    ) -> None:
        self.store = store
        self.settings = settings
        self.brokers = brokers
        self.ownership = ownership
        self.namespaces = NamespaceService(store, settings)
        self.docs = Repositories(store)

    async def lookup(self, domain: str, tenant: str, namespace: str, topic: str) -> dict[str, Any]:
        if domain not in TOPIC_DOMAINS:
            raise InvalidInput(f"Invalid topic domain: {domain}")
        require_valid_namespace_name(tenant, namespace)
        found = await self.docs.policies.get_cached(tenant, namespace)  # once per request
        if found is None:
            raise NotFound(NAMESPACE_NOT_OWNED)
        policies = found.value
        local = await self.namespaces.load_bundles(tenant, namespace)  # as the broker's
        topic_name = f"{domain}://{tenant}/{namespace}/{topic}"
        bundles = policies.bundles
        if local is not None and local.bundle_boundaries:
            bundles = BundlesData(boundaries=list(local.bundle_boundaries))
        boundaries = boundaries_of(bundles, self.settings.defaultNumberOfNamespaceBundles)
        key = self.docs.ownership.key(tenant, namespace,
                                      bundle_range(boundaries, topic_hash(topic_name)))
        owner = await self.owner(f"{tenant}/{namespace}", key, local, topic_name)
        return lookup_data(owner)

    async def unload(self, tenant: str, namespace: str) -> None:
        """Release every bundle of the namespace (delete its ownership records)."""
        await self.namespaces.policies(tenant, namespace, NAMESPACE_NOT_OWNED)
        root = self.docs.ownership.namespace_root(tenant, namespace)
        revision = await self.docs.ownership.release_namespace(tenant, namespace)
        for key in [k for k in await self.ownership.entries() if k.startswith(root + "/")]:
            self.ownership.observe(key, None, revision)

    async def owner(
        self, namespace: str, key: str, local: LocalPolicies | None, topic_name: str
    ) -> dict[str, Any]:
        """The bundle's owner record, assigning one when it has none (or a departed one)."""
        brokers = await self._brokers()
        for _ in range(8):
            current = await self.ownership.entries()
            held = current.get(key)
            if held is not None:
                record = decode_json(held.value)
                if isinstance(record, dict) and broker_id_of(record) in brokers:
                    return record
            chosen = await self._choose(namespace, local, brokers, current)
            if chosen is None:
                raise ServiceUnavailable(f"No broker was available to own {topic_name}")
            record = ownership_record(brokers[chosen])
            won, stored = await self._claim(key, record, chosen,
                                            0 if held is None else held.revision)  # fmt: skip
            if stored is not None:
                self.ownership.observe(key, stored.value, stored.revision)
                found = decode_json(stored.value)
                if won or (isinstance(found, dict) and broker_id_of(found) in brokers):
                    return found if isinstance(found, dict) else record
        raise ServiceUnavailable(f"No broker was available to own {topic_name}")

    async def _claim(
        self, key: str, record: dict[str, Any], broker_id: str, expected: int
    ) -> tuple[bool, Versioned | None]:
        """Write `record` if `key` is still at `expected` (0: absent) and its namespace still
        exists, on the broker's lease; otherwise return what is there now, read in the same
        transaction (NotFound when the namespace is gone: no ownership record outlives it,
        since a namespace DELETE takes its records in its own transaction)."""
        try:
            return await self.docs.ownership.claim(key, dump_json(record), expected, broker_id)
        except store_errors.NotFound:
            raise NotFound(NAMESPACE_NOT_FOUND) from None

    async def _choose(
        self, namespace: str, local: LocalPolicies | None,
        brokers: Mapping[str, BrokerRegistration],
        owners: Mapping[str, Versioned],
    ) -> str | None:
        if not brokers:
            return None
        owned = self._owned_by_namespace(owners, brokers)
        group = local.anti_affinity_group if local is not None else None
        counts = await self._anti_affinity_counts(group, owned) if group else None
        cluster = self.settings.clusterName
        assignment = select_broker(
            namespace,
            sorted(brokers),
            policies=await self._isolation_policies(cluster),
            loads={b: broker.load for b, broker in brokers.items()},
            anti_affinity_counts=counts,
            failure_domains=await read_failure_domains(self.store, cluster),
            failure_domains_enabled=self.settings.failureDomainsEnabled,
            namespace_bundles={b: n for b, n in owned.get(namespace, {}).items()},
        )
        return assignment.broker

    def _owned_by_namespace(
        self, owners: Mapping[str, Versioned], brokers: Mapping[str, BrokerRegistration]
    ) -> dict[str, dict[str, int]]:
        """{tenant/ns: {broker: bundles owned}} over live owners."""
        out: dict[str, dict[str, int]] = {}
        for key, held in owners.items():
            bundle = self.docs.ownership.bundle_of(key)
            record = decode_json(held.value)
            if bundle is None or not isinstance(record, dict):
                continue
            broker = broker_id_of(record)
            if broker is not None and broker in brokers:
                per = out.setdefault(f"{bundle[0]}/{bundle[1]}", {})
                per[broker] = per.get(broker, 0) + 1
        return out

    async def _anti_affinity_counts(
        self, group: str, owned: Mapping[str, Mapping[str, int]]
    ) -> dict[str, int]:
        """Modular LB counting: one per namespace of the group with a bundle on the broker."""
        wanted = group.casefold()
        counts: dict[str, int] = {}
        for name, local in (await read_all_local_policies(self.store)).items():
            other = local.anti_affinity_group
            if other is None or other.casefold() != wanted:
                continue
            for broker in owned.get(name, {}):
                counts[broker] = counts.get(broker, 0) + 1
        return counts

    async def _brokers(self) -> dict[str, BrokerRegistration]:
        return self.docs.brokers.decoded(await self.brokers.entries())

    async def _isolation_policies(self, cluster: str) -> tuple[IsolationPolicy, ...]:
        """The cluster's applicable isolation policies; one that cannot be applied (a pattern
        or shape another tool stored) is logged by name and skipped, never failing lookups."""
        found = await self.docs.isolation.get(cluster)
        document = None if found is None else found.value_or(None)
        policies, skipped = parse_valid_policies(document)
        for name, why in skipped.items():
            log.warning("isolation policy %r of cluster %r skipped: %s", name, cluster, why)
        return policies

