"""Pulsar's metadata paths, verbatim (DESIGN.md section 3).

An etcd key is the path itself; the children of a path are the keys under `path + "/"`.
"""

from __future__ import annotations

BOOKIES_RACK_CONFIG = "/bookies"
BOOKIES_AVAILABLE = "/ledgers/available"
BOOKIES_READONLY = "/ledgers/available/readonly"
BROKERS = "/loadbalance/brokers"
CLUSTERS = "/admin/clusters"
TENANTS = "/admin/policies"
LOCAL_POLICIES = "/admin/local-policies"


def join(*parts: str) -> str:
    return "/".join(p.strip("/") for p in ("", *parts))


def cluster(name: str) -> str:
    return join(CLUSTERS, name)


def failure_domains(cluster_name: str) -> str:
    return join(CLUSTERS, cluster_name, "failureDomain")


def failure_domain(cluster_name: str, domain: str) -> str:
    return join(failure_domains(cluster_name), domain)


def namespace_isolation_policies(cluster_name: str) -> str:
    return join(CLUSTERS, cluster_name, "namespaceIsolationPolicies")


def tenant(name: str) -> str:
    return join(TENANTS, name)


def namespace(tenant_name: str, ns: str) -> str:
    return join(TENANTS, tenant_name, ns)


def local_policies(tenant_name: str, ns: str) -> str:
    return join(LOCAL_POLICIES, tenant_name, ns)


def broker(broker_id: str) -> str:
    return join(BROKERS, broker_id)


def bookie_available(bookie_id: str) -> str:
    return join(BOOKIES_AVAILABLE, bookie_id)


def bookie_readonly(bookie_id: str) -> str:
    return join(BOOKIES_READONLY, bookie_id)


# A bookie's cookie (`javaformats.cookie`), kept while the bookie is down: BookKeeper's
# registration manager writes it at `{ledgersRoot}/cookies/{bookieId}`, and its registration
# client's `getAllBookies` (BookieShell `listbookies -a`) lists these keys.
BOOKIE_COOKIES = "/ledgers/cookies"


def bookie_cookie(bookie_id: str) -> str:
    return join(BOOKIE_COOKIES, bookie_id)


# Namespace bundle ownership (Pulsar's OwnershipCache): `/namespace/{tenant}/{ns}/{range}`.
NAMESPACE_OWNERSHIP = "/namespace"


def namespace_ownership(tenant_name: str, ns: str) -> str:
    return join(NAMESPACE_OWNERSHIP, tenant_name, ns)


def bundle_ownership(tenant_name: str, ns: str, bundle_range: str) -> str:
    return join(NAMESPACE_OWNERSHIP, tenant_name, ns, bundle_range)


# -- BookKeeper metadata under /ledgers, as Pulsar's metadata-store driver keeps it ------------
# (shared/reference/storage-pipeline-anchors.md 1.3; BookKeeper's StringUtils for the ledger
# paths, Pulsar's PulsarLedgerIdGenerator for idgen)

LEDGERS = "/ledgers"
LEDGERS_LAYOUT = "/ledgers/LAYOUT"
LEDGERS_INSTANCE_ID = "/ledgers/INSTANCEID"
LEDGER_ID_GEN = "/ledgers/idgen"
LEDGER_ID_GEN_LONG = "/ledgers/idgen-long"
SHORT_LEDGER_ID_LIMIT = 2**31 - 1
"""Ids below Java's Integer.MAX_VALUE use the 2-4-4 path; from it on, the 3-4-4-4-4 path."""


def ledger(ledger_id: int) -> str:
    """The key of a ledger's metadata: `/ledgers/00/0000/L0001` for ids below 2^31-1
    (`%010d` split 2-4-4), `/ledgers/000/0000/0000/0002/L1474` from it on (`%019d` split
    3-4-4-4-4), as BookKeeper's hybrid hierarchical layout names them."""
    if not 0 <= ledger_id < 2**63:
        raise ValueError(f"ledger id {ledger_id} is not a non-negative 64-bit id")
    if ledger_id < SHORT_LEDGER_ID_LIMIT:
        d = f"{ledger_id:010d}"
        return f"{LEDGERS}/{d[0:2]}/{d[2:6]}/L{d[6:10]}"
    d = f"{ledger_id:019d}"
    return f"{LEDGERS}/{d[0:3]}/{d[3:7]}/{d[7:11]}/{d[11:15]}/L{d[15:19]}"


def ledger_id_of(path: str) -> int | None:
    """The ledger id a ledger key names, or None when `path` is not a ledger key (e.g.
    `/ledgers/available/...`, `/ledgers/LAYOUT`, an intermediate `/ledgers/00/0000`)."""
    if not path.startswith(LEDGERS + "/"):
        return None
    parts = path[len(LEDGERS) + 1 :].split("/")
    widths = (2, 4, 4) if len(parts) == 3 else (3, 4, 4, 4, 4) if len(parts) == 5 else None
    if widths is None or not parts[-1].startswith("L"):
        return None
    parts[-1] = parts[-1][1:]
    for part, width in zip(parts, widths, strict=True):
        if len(part) != width or not part.isascii() or not part.isdigit():
            return None
    ledger_id = int("".join(parts))
    return ledger_id if path == ledger(ledger_id) else None


MANAGED_LEDGERS = "/managed-ledgers"


def managed_ledger(tenant_name: str, ns: str, encoded_topic: str) -> str:
    """A persistent topic's `ManagedLedgerInfo` key; `encoded_topic` is the topic's local name
    URL-encoded (`TopicName.getPersistenceNamingEncoding`)."""
    return join(MANAGED_LEDGERS, tenant_name, ns, "persistent", encoded_topic)


def managed_ledger_cursor(managed_ledger_path: str, encoded_cursor: str) -> str:
    """A cursor's `ManagedCursorInfo` key, a child of its topic's key."""
    return join(managed_ledger_path, encoded_cursor)


_URL_SAFE = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-*_")


def url_encode(name: str) -> str:
    """Java's `URLEncoder.encode(name, UTF-8)` (Pulsar's `Codec.encode`), which names topic
    and cursor keys: letters, digits and `.-*_` stay, a space becomes `+`, every other byte of
    the UTF-8 form becomes `%XX` (upper-case hex)."""
    out = []
    for byte in name.encode():
        if byte in _URL_SAFE:
            out.append(chr(byte))
        elif byte == 0x20:
            out.append("+")
        else:
            out.append(f"%{byte:02X}")
    return "".join(out)


# -- auto-recovery marks under /ledgers/underreplication (BookKeeper's layout, kept by Pulsar's
# PulsarLedgerUnderreplicationManager on etcd) ----------------------------------------------

UNDERREPLICATION = "/ledgers/underreplication"
UNDERREPLICATION_LAYOUT = "/ledgers/underreplication/LAYOUT"
UNDERREPLICATED_LEDGERS = "/ledgers/underreplication/ledgers"
UNDERREPLICATION_LOCKS = "/ledgers/underreplication/locks"


def underreplicated_ledger(ledger_id: int) -> str:
    """A ledger's under-replication mark: the id's four 16-bit groups in hex, then
    `urL%010d` (`/ledgers/underreplication/ledgers/0000/0000/0000/0001/urL0000000001`)."""
    groups = "/".join(f"{ledger_id >> shift & 0xFFFF:04x}" for shift in (48, 32, 16, 0))
    return f"{UNDERREPLICATED_LEDGERS}/{groups}/urL{ledger_id:010d}"


def underreplication_lock(ledger_id: int) -> str:
    """The ephemeral lock a replication worker holds while it re-replicates the ledger."""
    return f"{UNDERREPLICATION_LOCKS}/urL{ledger_id:010d}"


# Partitioned topic metadata (Pulsar's `/admin/partitioned-topics/{tenant}/{ns}/...`).
PARTITIONED_TOPICS = "/admin/partitioned-topics"


def partitioned_topics(tenant_name: str, ns: str) -> str:
    """The parent of a namespace's persistent partitioned topics' metadata."""
    return join(PARTITIONED_TOPICS, tenant_name, ns, "persistent")


def partitioned_topic(tenant_name: str, ns: str, encoded_topic: str) -> str:
    """A persistent partitioned topic's `PartitionedTopicMetadata` (`encoded_topic`: the local
    name URL-encoded, as its managed ledgers are named)."""
    return join(partitioned_topics(tenant_name, ns), encoded_topic)


# -- force GC of the bookies (BookKeeper's `PUT /api/v1/bookie/gc`, answered for the cluster):
# the service writes the request, every bookie watches it and keeps its state
# (storage.bookie.gc) ---------------------------------------------------------------------------

BOOKIE_GC = "/bookie-gc"
BOOKIE_GC_REQUEST = "/bookie-gc/request"
BOOKIE_GC_STATE = "/bookie-gc/state"


def bookie_gc_state(bookie_id: str) -> str:
    """A bookie's `{"is_in_force_gc": "true"|"false"}`."""
    return join(BOOKIE_GC_STATE, bookie_id)


# -- ours (not a Pulsar key): the change history of admin writes (metastore.change_history) --

CHANGE_HISTORY = "/pulsar-isolation/change-history"


def in_change_history(path: str) -> bool:
    """Whether writes of `path` are recorded: the admin documents (the rack map and everything
    under `/admin/`), not the storage engine's ledgers, topics, registrations or ownership."""
    return path == BOOKIES_RACK_CONFIG or path.startswith("/admin/")


# Extension: decommissions of bookies in progress or done (`storage.autorecovery.decommission`),
# JSON documents outside Pulsar's and BookKeeper's trees.
STORAGE_DECOMMISSIONS = "/storage/decommission"


def storage_decommission(bookie_id: str) -> str:
    return f"{STORAGE_DECOMMISSIONS}/{bookie_id}"
