"""The one authorisation check. Every request passes through `authorize`: the routes through
the app-wide dependency `authorize_request` (api/deps.py), the rack-write fast path
(api/http/hot_path.py) by calling it directly, so a rule holds for both.

Pulsar's model (`PulsarWebResource`, `PulsarAuthorizationProvider`):

- `authenticationEnabled=false`: everything is allowed, whatever `authorizationEnabled` says.
- `authenticationEnabled=true`: a request without valid credentials (a token, or a client
  certificate with `AuthenticationProviderTls`) is refused, 401
  `Need to authenticate to perform the request` (Pulsar's `AuthenticationFilter`).
- and `authorizationEnabled=true`: each operation needs a role. `TABLE` has one row per
  operation id of the app: what it needs and the upstream check it mirrors (or, for an
  operation of ours, the rule chosen and why); `PATHS` says the same of the paths outside the
  operations (`/metrics`, the API's description). The README's authorisation table is
  rendered from them (`api.authorization_doc`). An operation missing from the table needs
  super-user (refuse by default), and the matrix test fails for it. A super-user
  (`superUserRoles`) may do everything; a tenant's admin (`adminRoles` of its TenantInfo) may
  do what Pulsar's `PulsarAuthorizationProvider` lets it. The refusals carry Pulsar's status
  and text: 401 `This operation requires super-user access`, 401 `Unauthorized to
  validateTenantOperation ...` (tenant and topic operations), 401 `Unauthorized to
  validateBothTenantOperationAndSuperUser ...` (the tenant routes), 403 `Unauthorized to
  validateNamespace[Policy]Operation ...` (namespace ones), 401 `Unauthorized to
  validateBothSuperuserAndCluster[Policy]Operation ...` (cluster ones, super-users only).
  As upstream, for a role that is not a super-user a namespace name that is not valid is 412
  before any of it (the resource builds its `NamespaceName` first), and so is a tenant name
  at tenant creation; and a tenant that does not exist is 404 `Tenant does not exist` where
  the check reads the tenant to find its admins (tenant, namespace and topic operations).
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Final

from api.auth.authentication import AuthenticationFailed, ProviderChain
from api.errors import Forbidden, NotAuthorized, NotFound, PreconditionFailed
from api.naming import (
    PARTITION_SUFFIX,
    PARTITIONED_NAME,
    partition_index,
    require_valid_namespace_name,
    require_valid_tenant_name,
    require_valid_topic_name,
    topic_url,
)

NEED_AUTHENTICATION: Final = "Need to authenticate to perform the request"
NEED_SUPER_USER: Final = "This operation requires super-user access"
TENANT_NOT_FOUND: Final = "Tenant does not exist"
NAMESPACE_NOT_OWNED: Final = "Namespace not found"


class Before(enum.Enum):
    """A check an upstream resource makes before it authorises, so its refusal comes first
    for every role (run here, in a row's order, for the roles that are not super-users; the
    services repeat them for the rest)."""

    NAMESPACE_NAME = "validateNamespaceName"  # 412 Namespace name is not valid
    TOPIC_NAME = "validateTopicName"  # 412 Topic name is not valid
    NAMESPACE_EXISTS = "validateGlobalNamespaceOwnership"  # 404 Namespace not found
    NO_PARTITION_SUFFIX = "validatePartitionedTopicName"  # 412: the name contains -partition-
    NOT_A_PARTITION = "TopicName.isPartitioned"  # 412: the name is a partition's


@dataclass(frozen=True)
class Access:
    """What a request asks to do: the route's operation id, its path parameters and query,
    and its credentials: its headers, and the client certificate (PEM) of its TLS connection."""

    operation: str
    params: Mapping[str, str]
    headers: Mapping[str, str]
    query: Mapping[str, str] = field(default_factory=dict)
    client_cert: str | None = None


@dataclass(frozen=True)
class SuperUser:
    """`validateSuperUserAccess`: a super-user, else 401 `This operation requires super-user
    access`."""


@dataclass(frozen=True)
class AnyRole:
    """No check beyond authentication: any role with valid credentials."""


@dataclass(frozen=True)
class SuperUserOrTenant:
    """`validateBothSuperUserAndTenantOperation`: a super-user or, for a named tenant, its
    admin (`validateTenantOperation`); else 401 `Unauthorized to
    validateBothTenantOperationAndSuperUser ...`. Without a tenant, super-user only.
    `checks_name`: the resource refuses a tenant name that is not valid (412) first."""

    operation: str
    tenant_param: str | None = "tenant"
    checks_name: bool = False


@dataclass(frozen=True)
class TenantOperation:
    """Pulsar's `validateTenantOperation`: super-user or the tenant's admin, else 401."""

    operation: str
    tenant_param: str = "tenant"
    from_query: tuple[str, ...] = ()  # query keys that name the tenant instead


@dataclass(frozen=True)
class NamespaceOperation:
    """`validateNamespaceOperation`: super-user or the namespace tenant's admin, else 403."""

    operation: str


@dataclass(frozen=True)
class NamespacePolicy:
    """`validateNamespacePolicyOperation`: as NamespaceOperation, naming the policy."""

    policy: str
    operation: str


@dataclass(frozen=True)
class ClusterOperation:
    """`validateBothSuperuserAndClusterOperation`: a super-user (Pulsar's provider grants
    cluster operations to super-users alone), else 401 naming the operation and the cluster."""

    operation: str


@dataclass(frozen=True)
class ClusterPolicy:
    """`validateBothSuperuserAndClusterPolicyOperation` (a cluster's namespace isolation
    policies, READ or WRITE): a super-user, else 401 naming the operation and the cluster."""

    operation: str


@dataclass(frozen=True)
class TopicOperation:
    """`validateTopicOperation`: super-user or the topic tenant's admin, else 401."""

    operation: str


@dataclass(frozen=True)
class TopicPolicy:
    """`validateTopicPolicyOperation`: super-user or the topic tenant's admin, else 403
    naming the policy."""

    policy: str
    operation: str


Need = (SuperUser | AnyRole | SuperUserOrTenant | TenantOperation | NamespaceOperation
        | NamespacePolicy | TopicOperation | TopicPolicy | ClusterOperation | ClusterPolicy)
SUPER_USER: Final = SuperUser()
ANY_ROLE: Final = AnyRole()


@dataclass(frozen=True)
class Rule:
    """One row of the table: what an operation needs, and the upstream check it mirrors
    (class and method, with the check it starts with) or, for an operation of ours, the rule
    chosen and why."""

    need: Need
    mirrors: str
    # the resource's checks before it authorises; by default its NamespaceName's
    before: tuple[Before, ...] = (Before.NAMESPACE_NAME,)


def _read(policy: str) -> NamespacePolicy:
    return NamespacePolicy(policy, "READ")


def _write(policy: str) -> NamespacePolicy:
    return NamespacePolicy(policy, "WRITE")


_BOOKIES = "BookiesBase.{}: validateSuperUserAccess"
_CLUSTER_OP = "ClustersBase.{}: validateBothSuperuserAndClusterOperation({})"
_CLUSTER_POLICY = ("ClustersBase.{}: validateBothSuperuserAndClusterPolicyOperation"
                   "(NAMESPACE_ISOLATION, {})")
_NS = "Namespaces.{}: {}"
_TOPICS = "PersistentTopicsBase.{}: {}"
_TOPIC_NAME = (Before.TOPIC_NAME,)
_NOT_A_PARTITION = (Before.TOPIC_NAME, Before.NOT_A_PARTITION)
_BK_ADMIN = ("ours: BookKeeper's HTTP admin ({}) has no authorisation of its own; super-user, "
             "since it reads or changes storage of every tenant")
_STORAGE = "ours ({}): super-user, since it spans every tenant's ledgers and bookies"
_HISTORY = "ours ({}): super-user, since records carry every tenant's writes, roles and addresses"

# Every operation id the app serves, one row each. The matrix test
# (tests/api/test_auth.py) fails for an operation without a row; at run time one missing
# would need super-user (refuse by default).
TABLE: Final[Mapping[str, Rule]] = {
    # bookies (BookiesBase)
    "getBookiesRackInfo": Rule(SUPER_USER, _BOOKIES.format("getBookiesRackInfo")),
    "getBookieRackInfo": Rule(SUPER_USER, _BOOKIES.format("getBookieRackInfo")),
    "updateBookieRackInfo": Rule(SUPER_USER, _BOOKIES.format("updateBookieRackInfo")),
    "deleteBookieRackInfo": Rule(SUPER_USER, _BOOKIES.format("deleteBookieRackInfo")),
    "getAllBookies": Rule(SUPER_USER, _BOOKIES.format("getAllBookies")),
    "importBookiesRackInfo": Rule(SUPER_USER, "ours (bulk rack map): super-user, as "
                                  "BookiesBase.updateBookieRackInfo for each bookie"),
    "lintBookies": Rule(SUPER_USER, "ours (rack map lint): super-user, as "
                        "BookiesBase.getBookiesRackInfo, whose data it reads"),
    # change history and watch (ours)
    "getChanges": Rule(SUPER_USER, _HISTORY.format("change history")),
    "watchChanges": Rule(SUPER_USER, _HISTORY.format("watch")),
    # brokers (BrokersBase)
    "getRuntimeConfiguration": Rule(
        SUPER_USER, "BrokersBase.getRuntimeConfiguration: validateSuperUserAccess"),
    "getActiveBrokers": Rule(
        SUPER_USER, "BrokersBase.getActiveBrokers: validateBothSuperuserAndBrokerOperation"
        "(LIST_BROKERS); no broker-operation grants here, so super-user"),
    # clusters, failure domains, isolation policies (ClustersBase)
    "getClusters": Rule(ANY_ROLE, "ClustersBase.getClusters: no check beyond authentication"),
    **{op: Rule(ClusterOperation(name), _CLUSTER_OP.format(op, name)) for op, name in (
        ("getCluster", "GET_CLUSTER"), ("createCluster", "CREATE_CLUSTER"),
        ("updateCluster", "UPDATE_CLUSTER"), ("deleteCluster", "DELETE_CLUSTER"),
        ("getPeerCluster", "GET_PEER_CLUSTER"), ("setPeerClusterNames", "UPDATE_PEER_CLUSTER"),
        ("getFailureDomains", "GET_FAILURE_DOMAIN"), ("getDomain", "GET_FAILURE_DOMAIN"),
        ("setFailureDomain", "UPDATE_FAILURE_DOMAIN"),
        ("deleteFailureDomain", "DELETE_FAILURE_DOMAIN"))},
    **{op: Rule(ClusterPolicy(name), _CLUSTER_POLICY.format(op, name)) for op, name in (
        ("getNamespaceIsolationPolicies", "READ"), ("getNamespaceIsolationPolicy", "READ"),
        ("setNamespaceIsolationPolicy", "WRITE"), ("deleteNamespaceIsolationPolicy", "WRITE"),
        ("getBrokersWithNamespaceIsolationPolicy", "READ"),
        ("getBrokerWithNamespaceIsolationPolicy", "READ"))},
    # tenants (TenantsBase): super-user or, for a named tenant, its admin
    "getTenants": Rule(SuperUserOrTenant("LIST_TENANTS", None),
                       "TenantsBase.getTenants: validateBothSuperUserAndTenantOperation"
                       "(null, LIST_TENANTS)"),
    "getTenantAdmin": Rule(SuperUserOrTenant("GET_TENANT"),
                           "TenantsBase.getTenantAdmin: validateBothSuperUserAndTenantOperation"
                           "(GET_TENANT)"),
    "createTenant": Rule(SuperUserOrTenant("CREATE_TENANT", checks_name=True),
                         "TenantsBase.createTenant: NamedEntity.checkName, then "
                         "validateBothSuperUserAndTenantOperation(CREATE_TENANT)"),
    "updateTenant": Rule(SuperUserOrTenant("UPDATE_TENANT"),
                         "TenantsBase.updateTenant: validateBothSuperUserAndTenantOperation"
                         "(UPDATE_TENANT)"),
    "deleteTenant": Rule(SuperUserOrTenant("DELETE_TENANT"),
                         "TenantsBase.deleteTenant: validateBothSuperUserAndTenantOperation"
                         "(DELETE_TENANT)"),
    # namespaces (Namespaces v2, NamespacesBase)
    "getTenantNamespaces": Rule(TenantOperation("LIST_NAMESPACES"), _NS.format(
        "getTenantNamespaces", "validateTenantOperation(LIST_NAMESPACES)")),
    "createNamespace": Rule(TenantOperation("CREATE_NAMESPACE"), _NS.format(
        "createNamespace", "validateTenantOperation(CREATE_NAMESPACE)")),
    "deleteNamespace": Rule(TenantOperation("DELETE_NAMESPACE"), _NS.format(
        "deleteNamespace", "validateTenantOperation(DELETE_NAMESPACE)")),
    "getPolicies": Rule(_read("ALL"), _NS.format(
        "getPolicies", "validateNamespacePolicyOperation(ALL, READ)")),
    "getNamespaceAntiAffinityGroup": Rule(_read("ANTI_AFFINITY"), _NS.format(
        "getNamespaceAntiAffinityGroup", "validateNamespacePolicyOperation(ANTI_AFFINITY, READ)")),
    "setNamespaceAntiAffinityGroup": Rule(_write("ANTI_AFFINITY"), _NS.format(
        "setNamespaceAntiAffinityGroup",
        "validateNamespacePolicyOperation(ANTI_AFFINITY, WRITE)")),
    "removeNamespaceAntiAffinityGroup": Rule(_write("ANTI_AFFINITY"), _NS.format(
        "removeNamespaceAntiAffinityGroup",
        "validateNamespacePolicyOperation(ANTI_AFFINITY, WRITE)")),
    "getAntiAffinityNamespaces": Rule(
        TenantOperation("LIST_NAMESPACES", from_query=("tenant",)), _NS.format(
            "getAntiAffinityNamespaces", "validateAdminAccessForTenant(tenant)")),
    "getAntiAffinityNamespacesV1": Rule(
        TenantOperation("LIST_NAMESPACES", from_query=("property",)),
        "Namespaces (v1).getAntiAffinityNamespaces: validateAdminAccessForTenant(property)"),
    "getPersistence": Rule(_read("PERSISTENCE"), _NS.format(
        "getPersistence", "validateNamespacePolicyOperation(PERSISTENCE, READ)")),
    "setPersistence": Rule(_write("PERSISTENCE"), _NS.format(
        "setPersistence", "validateNamespacePolicyOperation(PERSISTENCE, WRITE)")),
    "deletePersistence": Rule(_write("PERSISTENCE"), _NS.format(
        "deletePersistence", "validateNamespacePolicyOperation(PERSISTENCE, WRITE)")),
    "getBookieAffinityGroup": Rule(SUPER_USER, "NamespacesBase.internalGetBookieAffinityGroup: "
                                   "validateSuperUserAccess"),
    "setBookieAffinityGroup": Rule(SUPER_USER, "NamespacesBase.internalSetBookieAffinityGroup: "
                                   "validateSuperUserAccess"),
    "deleteBookieAffinityGroup": Rule(SUPER_USER, "NamespacesBase.internalDeleteBookieAffinity"
                                      "Group: validateSuperUserAccess (through the set)"),
    "getNamespaceReplicationClusters": Rule(_read("REPLICATION"), _NS.format(
        "getNamespaceReplicationClusters", "validateNamespacePolicyOperation(REPLICATION, READ)")),
    "setNamespaceReplicationClusters": Rule(_write("REPLICATION"), _NS.format(
        "setNamespaceReplicationClusters",
        "validateNamespacePolicyOperation(REPLICATION, WRITE)")),
    "unloadNamespace": Rule(NamespaceOperation("UNLOAD"), _NS.format(
        "unloadNamespace", "validateNamespaceOperation(UNLOAD)")),
    "getList": Rule(NamespaceOperation("GET_TOPICS"), "PersistentTopics.getList: "
                    "validateNamespaceOperation(GET_TOPICS)"),
    "getNonPersistentList": Rule(NamespaceOperation("GET_TOPICS"), "NonPersistentTopics."
                                 "getList: validateNamespaceOperation(GET_TOPICS)"),
    "getPlacementPreview": Rule(_read("ALL"), "ours (placement preview): as getPolicies, "
                                "since it shows what the namespace's own policies decide"),
    # topics
    "lookupTopicAsync": Rule(TopicOperation("LOOKUP"), "TopicLookupBase.internalLookupTopic"
                             "Async: validateTopicOperation(LOOKUP)"),
    "produceOnPersistentTopic": Rule(TopicOperation("PRODUCE"), "TopicsBase.publishMessages: "
                                     "validateProducePermission (PRODUCE; no grant-permission "
                                     "here, so super-user or the tenant's admin)", _TOPIC_NAME),
    "produceOnPersistentTopicPartition": Rule(TopicOperation("PRODUCE"), "TopicsBase."
                                              "publishMessagesToPartition: "
                                              "validateProducePermission (PRODUCE)",
                                              _TOPIC_NAME),
    "createNonPartitionedTopic": Rule(NamespaceOperation("CREATE_TOPIC"), _TOPICS.format(
        "internalCreateNonPartitionedTopic", "validateNamespaceOperation(CREATE_TOPIC)")),
    "deleteTopic": Rule(TopicOperation("DELETE"), _TOPICS.format(
        "internalDeleteTopic", "validateTopicOperation(DELETE)"), _TOPIC_NAME),
    "getStats": Rule(TopicOperation("GET_STATS"), _TOPICS.format(
        "internalGetStatsAsync", "validateTopicOperation(GET_STATS)"), _TOPIC_NAME),
    "getPartitionedStats": Rule(TopicOperation("GET_STATS"), _TOPICS.format(
        "internalGetPartitionedStats", "validateTopicOperation(GET_STATS)"),
        _NOT_A_PARTITION),
    "getInternalStats": Rule(TopicOperation("GET_STATS"), _TOPICS.format(
        "internalGetInternalStats", "validateTopicOperation(GET_STATS)"), _TOPIC_NAME),
    "getMessageById": Rule(TopicOperation("PEEK_MESSAGES"), _TOPICS.format(
        "internalGetMessageById", "validateTopicOperation(PEEK_MESSAGES)"), _TOPIC_NAME),
    "examineMessage": Rule(TopicOperation("PEEK_MESSAGES"), _TOPICS.format(
        "internalExamineMessage", "validateTopicOperation(PEEK_MESSAGES)"), _TOPIC_NAME),
    "getPartitionedStatsInternal": Rule(TopicOperation("GET_STATS"), _TOPICS.format(
        "internalGetPartitionedStatsInternal", "validateTopicOperation(GET_STATS)"),
        _TOPIC_NAME),
    "getPartitionedTopicList": Rule(NamespaceOperation("GET_TOPICS"), "PersistentTopics."
                                    "getPartitionedTopicList: validateNamespaceOperation("
                                    "GET_TOPICS)"),
    "getNonPersistentPartitionedTopicList": Rule(
        NamespaceOperation("GET_TOPICS"), "NonPersistentTopics.getPartitionedTopicList: "
                                          "validateNamespaceOperation(GET_TOPICS)"),
    "createPartitionedTopic": Rule(TopicPolicy("PARTITION", "WRITE"), "PersistentTopics."
                                   "createPartitionedTopic: validateTopicPolicyOperation("
                                   "PARTITION, WRITE)", (
        Before.NAMESPACE_NAME, Before.NAMESPACE_EXISTS, Before.TOPIC_NAME,
        Before.NO_PARTITION_SUFFIX)),
    "getPartitionedMetadata": Rule(TopicOperation("LOOKUP"), "AdminResource.getPartitioned"
                                   "TopicMetadataAsync: validateTopicOperation(LOOKUP)",
                                   _TOPIC_NAME),
    "updatePartitionedTopic": Rule(TopicPolicy("PARTITION", "WRITE"), "PersistentTopics."
                                   "updatePartitionedTopic: validateTopicPolicyOperation("
                                   "PARTITION, WRITE)", _NOT_A_PARTITION),
    "deletePartitionedTopic": Rule(NamespaceOperation("DELETE_TOPIC"), _TOPICS.format(
        "internalDeletePartitionedTopic", "validateNamespaceOperation(DELETE_TOPIC)"),
        _NOT_A_PARTITION),
    # the placement console's data (ours, api/routes/console.py)
    "getConsoleOverview": Rule(ANY_ROLE, "ours (console overview): any authenticated role; the "
                               "service shows a tenant admin its own tenants' namespaces only, "
                               "and, the watch being super-user only, lets it follow them by "
                               "conditional GET (ETag, 304 when nothing it is made of changed)"),
    "previewConsoleChange": Rule(ANY_ROLE, "ours (console preview): as the overview; it changes "
                                 "nothing, and applying goes through the routes above"),
    "getConsoleNamespaceLedgers": Rule(_read("ALL"), "ours (a namespace's ledgers in the "
                                       "console): as getPolicies, one namespace's data"),
    # BookKeeper's HTTP admin paths (/api/v1/...)
    **{op: Rule(SUPER_USER, _BK_ADMIN.format(path)) for op, path in (
        ("bookkeeperGetLedgerMetadata", "ledger/metadata"),
        ("bookkeeperListLedgers", "ledger/list"),
        ("bookkeeperListBookies", "bookie/list_bookies"),
        ("bookkeeperTriggerGc", "bookie/gc"),
        ("bookkeeperGetGcState", "bookie/gc_details"),
        ("bookkeeperDecommissionBookie", "autorecovery/decommission"),
        ("bookkeeperListUnderReplicatedLedgers", "autorecovery/list_under_replicated_ledger"),
        ("bookkeeperTriggerAudit", "autorecovery/trigger_audit"),
        ("bookkeeperWhoIsAuditor", "autorecovery/who_is_auditor"))},
    # storage engine and placement audit (ours)
    **{op: Rule(SUPER_USER, _STORAGE.format(what)) for op, what in (
        ("startStorageAudit", "placement audit"),
        ("getStorageAudit", "placement audit"),
        ("getStorageAuditReport", "placement audit"),
        ("repairStorageAudit", "placement audit"),
        ("getStorageBookies", "local bookies"),
        ("startStorageBookie", "local bookies"),
        ("stopStorageBookie", "local bookies"),
        ("setStorageBookieReadOnly", "local bookies"),
        ("decommissionStorageBookie", "bookie decommission"),
        ("getStorageBookieDecommission", "bookie decommission"))},
}

RULES: Final[Mapping[str, Need]] = {op: rule.need for op, rule in TABLE.items()}

# Routes without an operation id: the hidden aliases of BookKeeper's HTTP admin paths (a
# trailing slash, the methods BookKeeper answers 405 to, answered as its server does).
ALIASES: Final = Rule(SUPER_USER, "ours: as the BookKeeper HTTP admin paths they alias")

# Paths served outside the operations above, with who may read them and why.
PATHS: Final[Mapping[str, str]] = {
    "/metrics": "Pulsar's `authenticateMetricsEndpoint` (default false): anybody; when true "
                "and authentication is on, any authenticated role (api/metrics.py)",
    "/metrics/": "as /metrics",
    "/openapi.json": "anybody: the API's description, no data (Pulsar serves its swagger too)",
    "/docs": "anybody: the page that shows /openapi.json",
    "/docs/oauth2-redirect": "anybody: part of the /docs page",
    "/redoc": "anybody: the page that shows /openapi.json",
    "/docs-assets": "anybody: the /docs page's scripts and styles",
    "/console": "anybody: the placement console's page and assets, no data (its data comes "
                "from the operations above, with the caller's token)",
}


# A tenant's admin roles; None when the tenant does not exist.
TenantAdmins = Callable[[str], Awaitable[frozenset[str] | None]]
# Whether a namespace (tenant, namespace) exists.
NamespaceExists = Callable[[str, str], Awaitable[bool]]


async def _all_exist(tenant: str, namespace: str) -> bool:
    del tenant, namespace
    return True


async def _no_admins(tenant: str) -> frozenset[str] | None:
    del tenant
    return frozenset()


@dataclass(frozen=True)
class Guard:
    """The security settings in effect: who authenticates, who is a super-user, and how to
    read a tenant's admin roles (`tenant_admins`, None for a tenant that does not exist)."""

    authenticator: ProviderChain | None = None
    authorization_enabled: bool = False
    super_users: frozenset[str] = frozenset()
    tenant_admins: TenantAdmins = _no_admins
    namespace_exists: NamespaceExists = _all_exist

    @property
    def enabled(self) -> bool:
        return self.authenticator is not None


OPEN: Final = Guard()


async def authorize(access: Access, guard: Guard) -> str | None:
    """The role `access` acts as (None when authentication is off); raises `NotAuthorized`
    (401) or `Forbidden` (403) when it is not allowed."""
    if guard.authenticator is None:
        return None
    try:
        role = guard.authenticator.authenticate(access.headers, access.client_cert)
    except AuthenticationFailed:
        raise NotAuthorized(NEED_AUTHENTICATION) from None
    if not guard.authorization_enabled or role in guard.super_users:
        return role
    rule = TABLE.get(access.operation)
    need = SUPER_USER if rule is None else rule.need
    if isinstance(need, AnyRole):
        return role
    if "namespace" in access.params:
        # the resource builds its NamespaceName (or TopicName) before it authorises
        await _before(access, guard, (Before.NAMESPACE_NAME,) if rule is None else rule.before)
    if (isinstance(need, SuperUserOrTenant) and need.checks_name) or (
            isinstance(need, TenantOperation) and not need.from_query):
        require_valid_tenant_name(access.params.get("tenant", ""))
    if isinstance(need, SuperUser):
        raise NotAuthorized(NEED_SUPER_USER)
    if isinstance(need, ClusterOperation | ClusterPolicy):
        raise _refusal(access, need, role)
    consults_tenant = not isinstance(need, SuperUserOrTenant)
    tenant = _tenant_of(access, need)
    admins = await guard.tenant_admins(tenant) if tenant else frozenset()
    if admins is None:
        if consults_tenant:  # `validateTenantAdminAccess` reads the tenant for non-super-users
            raise NotFound(TENANT_NOT_FOUND)
        admins = frozenset()
    if tenant and role in admins:
        return role
    raise _refusal(access, need, role)


async def _before(access: Access, guard: Guard, checks: tuple[Before, ...]) -> None:
    tenant, namespace = access.params.get("tenant", ""), access.params["namespace"]
    topic = access.params.get("topic", "")
    for check in checks:
        if check is Before.NAMESPACE_NAME:
            require_valid_namespace_name(tenant, namespace)
        elif check is Before.TOPIC_NAME:
            require_valid_topic_name(tenant, namespace, topic)
        elif check is Before.NAMESPACE_EXISTS:
            if not await guard.namespace_exists(tenant, namespace):
                raise NotFound(NAMESPACE_NOT_OWNED)
        elif check is Before.NO_PARTITION_SUFFIX:
            if PARTITION_SUFFIX in topic:
                raise PreconditionFailed(PARTITIONED_NAME)
        elif partition_index(topic) != -1:
            raise PreconditionFailed(PARTITIONED_NAME)


def _tenant_of(access: Access, need: Need) -> str:
    if isinstance(need, SuperUserOrTenant):
        return access.params.get(need.tenant_param, "") if need.tenant_param else ""
    if isinstance(need, TenantOperation):
        for key in need.from_query:
            if key in access.query:
                return access.query[key]
        return access.params.get(need.tenant_param, "")
    return access.params.get("tenant", "")


def _refusal(access: Access, need: Need, role: str) -> NotAuthorized | Forbidden:
    namespace = f"{access.params.get('tenant', '')}/{access.params.get('namespace', '')}"
    if isinstance(need, ClusterOperation | ClusterPolicy):
        check = ("validateBothSuperuserAndClusterOperation" if isinstance(need, ClusterOperation)
                 else "validateBothSuperuserAndClusterPolicyOperation")
        return NotAuthorized(
            f"Unauthorized to {check} for originalPrincipal [null] and clientAppId [{role}] "
            f"about operation [{need.operation}] on cluster [{access.params.get('cluster', '')}]"
        )
    if isinstance(need, SuperUserOrTenant):
        return NotAuthorized(
            f"Unauthorized to validateBothTenantOperationAndSuperUser for originalPrincipal "
            f"[null] and clientAppId [{role}] about operation [{need.operation}] "
        )
    if isinstance(need, TenantOperation):
        return NotAuthorized(
            f"Unauthorized to validateTenantOperation for originalPrincipal [null] and "
            f"clientAppId [{role}] about operation [{need.operation}] on tenant "
            f"[{_tenant_of(access, need)}]"
        )
    if isinstance(need, NamespacePolicy):
        return Forbidden(
            f"Unauthorized to validateNamespacePolicyOperation for operation "
            f"[{need.operation}] on namespace [{namespace}] on policy [{need.policy}]"
        )
    if isinstance(need, NamespaceOperation):
        return Forbidden(
            f"Unauthorized to validateNamespaceOperation for operation [{need.operation}] "
            f"on namespace [{namespace}]"
        )
    topic = topic_url(access.params.get("tenant", ""), access.params.get("namespace", ""),
                      access.params.get("topic", ""))
    if isinstance(need, TopicPolicy):
        return Forbidden(
            f"Unauthorized to validateTopicPolicyOperation for operation [{need.operation}] "
            f"on topic [{topic}] on policy [{need.policy}]"
        )
    assert isinstance(need, TopicOperation)
    return NotAuthorized(
        f"Unauthorized to validateTopicOperation for operation [{need.operation}] on topic "
        f"[{topic}]"
    )
