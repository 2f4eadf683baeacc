"""Custom metadata Pulsar writes on a managed ledger's ledgers; a ledger's metadata, closed.

Custom metadata of a managed-ledger ledger (Pulsar's `LedgerMetadataUtils`):

    application                    "pulsar"
    component                      "managed-ledger"
    pulsar/managed-ledger          the managed ledger's name (tenant/ns/persistent/topic)
    EnsemblePlacementPolicyConfig  when the namespace has a bookie affinity group (or the
                                   broker enforces strict affinity): Jackson pretty-printed JSON
                                   {"policyClass": IsolatedBookieEnsemblePlacementPolicy,
                                    "properties": {"isolationBookieGroups": primary csv,
                                                   "secondaryIsolationBookieGroups": secondary csv}}

Our strict mode (the namespace's `bookkeeperAffinityGroupStrict`) is one more property,
`bookkeeperAffinityGroupStrict: "true"`, in the same `properties` map: Pulsar's isolation
policy reads the two keys it knows and ignores any other.
"""

from __future__ import annotations

import json
from dataclasses import replace

from javaformats import jackson_pretty
from metastore.ledger_metadata import LedgerMetadata, LedgerState
from placement import AffinityGroups

APPLICATION = "application"
COMPONENT = "component"
MANAGED_LEDGER_NAME = "pulsar/managed-ledger"
PLACEMENT_POLICY_CONFIG = "EnsemblePlacementPolicyConfig"
ISOLATION_POLICY_CLASS = (
    "org.apache.pulsar.bookie.rackawareness.IsolatedBookieEnsemblePlacementPolicy"
)
ISOLATION_BOOKIE_GROUPS = "isolationBookieGroups"
SECONDARY_ISOLATION_BOOKIE_GROUPS = "secondaryIsolationBookieGroups"
STRICT_PROPERTY = "bookkeeperAffinityGroupStrict"


def closed(metadata: LedgerMetadata, last_entry_id: int, length: int) -> LedgerMetadata:
    """`metadata` in state CLOSED at `last_entry_id` with `length` bytes."""
    return replace(metadata, state=LedgerState.CLOSED, last_entry_id=last_entry_id,
                   length=length)


def placement_policy_config(groups: AffinityGroups) -> bytes:
    """The EnsemblePlacementPolicyConfig value recording a namespace's isolation groups."""
    properties: dict[str, str] = {
        ISOLATION_BOOKIE_GROUPS: ",".join(groups.primary),
        SECONDARY_ISOLATION_BOOKIE_GROUPS: ",".join(groups.secondary),
    }
    if groups.strict:
        properties[STRICT_PROPERTY] = "true"
    document = {"policyClass": ISOLATION_POLICY_CLASS, "properties": properties}
    return jackson_pretty(document).encode()


def parse_placement_policy_config(raw: bytes) -> AffinityGroups | None:
    """The groups an EnsemblePlacementPolicyConfig value records (None: not an isolation
    policy, or not readable)."""
    try:
        document = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(document, dict) or document.get("policyClass") != ISOLATION_POLICY_CLASS:
        return None
    properties = document.get("properties") or {}

    def groups(key: str) -> tuple[str, ...]:
        text = properties.get(key) or ""
        return tuple(g.strip() for g in str(text).split(",") if g.strip())

    strict = str(properties.get(STRICT_PROPERTY, "false")).lower() == "true"
    return AffinityGroups(groups(ISOLATION_BOOKIE_GROUPS),
                          groups(SECONDARY_ISOLATION_BOOKIE_GROUPS), strict)


def managed_ledger_custom_metadata(
    name: str, groups: AffinityGroups | None
) -> dict[str, bytes]:
    """The custom metadata Pulsar's managed ledger writes on each of its ledgers."""
    custom = {
        APPLICATION: b"pulsar",
        COMPONENT: b"managed-ledger",
        MANAGED_LEDGER_NAME: name.encode(),
    }
    if groups is not None:
        custom[PLACEMENT_POLICY_CONFIG] = placement_policy_config(groups)
    return custom
