"""The one authorisation check. Every request passes through `authorize`: the routes through
the app-wide dependency `authorize_request` (api/deps.py), the rack-write fast path
(api/http/hot_path.py) by calling it directly, so a rule holds for both.

Pulsar's model (`PulsarWebResource`, `PulsarAuthorizationProvider`):

- `authenticationEnabled=false`: everything is allowed, whatever `authorizationEnabled` says.
- `authenticationEnabled=true`: a request without valid credentials (a token, or a client
  certificate with `AuthenticationProviderTls`) is refused, 401
  `Need to authenticate to perform the request` (Pulsar's `AuthenticationFilter`).
- and `authorizationEnabled=true`: each operation needs a role. `RULES` maps every route's
  operation id to what it needs; an operation missing from the table needs super-user
  (refuse by default). A super-user (`superUserRoles`) may do everything; a tenant's admin
  (`adminRoles` of its TenantInfo) may do the tenant- and namespace-scoped operations Pulsar
  gives it. The refusals carry Pulsar's status and text: 401 `This operation requires
  super-user access`, 401 `Unauthorized to validateTenantOperation ...` (tenant and topic
  operations), 403 `Unauthorized to validateNamespace[Policy]Operation ...` (namespace ones).

Bookies, clusters, failure domains, isolation policies, brokers, BookKeeper's admin paths, the
storage engine's bookies and audits, and bookie-affinity writes are super-user only; a tenant
admin may read its namespaces' bookie affinity (Pulsar asks super-user even for that read; see
the README).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Final

from api.auth.authentication import AuthenticationFailed, ProviderChain
from api.errors import Forbidden, NotAuthorized

NEED_AUTHENTICATION: Final = "Need to authenticate to perform the request"
NEED_SUPER_USER: Final = "This operation requires super-user access"


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
    pass


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
class TopicOperation:
    """`validateTopicOperation`: super-user or the topic tenant's admin, else 401."""

    operation: str


@dataclass(frozen=True)
class Authenticated:
    """Any authenticated role; the service itself limits what the role sees (the placement
    console's overview and preview show a tenant admin its own tenants' namespaces only)."""


Need = (
    Authenticated | SuperUser | TenantOperation | NamespaceOperation | NamespacePolicy
    | TopicOperation
)
SUPER_USER: Final = SuperUser()


def _read(policy: str) -> NamespacePolicy:
    return NamespacePolicy(policy, "READ")


def _write(policy: str) -> NamespacePolicy:
    return NamespacePolicy(policy, "WRITE")


# Every operation id the app serves; anything missing needs super-user.
RULES: Final[Mapping[str, Need]] = {
    # bookies, brokers, clusters, failure domains, isolation policies: super-user
    "getBookiesRackInfo": SUPER_USER,
    "getBookieRackInfo": SUPER_USER,
    "updateBookieRackInfo": SUPER_USER,
    "deleteBookieRackInfo": SUPER_USER,
    "getAllBookies": SUPER_USER,
    "importBookiesRackInfo": SUPER_USER,
    "lintBookies": SUPER_USER,
    "getChanges": SUPER_USER,
    "getRuntimeConfiguration": SUPER_USER,
    "getActiveBrokers": SUPER_USER,
    "getClusters": SUPER_USER,
    "getCluster": SUPER_USER,
    "createCluster": SUPER_USER,
    "updateCluster": SUPER_USER,
    "deleteCluster": SUPER_USER,
    "getFailureDomains": SUPER_USER,
    "getDomain": SUPER_USER,
    "setFailureDomain": SUPER_USER,
    "deleteFailureDomain": SUPER_USER,
    "getNamespaceIsolationPolicies": SUPER_USER,
    "getNamespaceIsolationPolicy": SUPER_USER,
    "setNamespaceIsolationPolicy": SUPER_USER,
    "deleteNamespaceIsolationPolicy": SUPER_USER,
    "getBrokersWithNamespaceIsolationPolicy": SUPER_USER,
    "getBrokerWithNamespaceIsolationPolicy": SUPER_USER,
    "bookkeeperGetLedgerMetadata": SUPER_USER,
    "bookkeeperListLedgers": SUPER_USER,
    "bookkeeperListBookies": SUPER_USER,
    "bookkeeperTriggerGc": SUPER_USER,
    "bookkeeperGetGcState": SUPER_USER,
    "startStorageAudit": SUPER_USER,
    "getStorageAudit": SUPER_USER,
    "getStorageAuditReport": SUPER_USER,
    "repairStorageAudit": SUPER_USER,
    "getStorageBookies": SUPER_USER,
    "startStorageBookie": SUPER_USER,
    "stopStorageBookie": SUPER_USER,
    "setStorageBookieReadOnly": SUPER_USER,
    "watchChanges": SUPER_USER,
    "decommissionStorageBookie": SUPER_USER,
    "bookkeeperDecommissionBookie": SUPER_USER,
    "getStorageBookieDecommission": SUPER_USER,
    # tenants: super-user, except that a tenant's admin reads its own tenant
    "getTenants": SUPER_USER,
    "getTenantAdmin": TenantOperation("GET_TENANT"),
    "createTenant": SUPER_USER,
    "updateTenant": SUPER_USER,
    "deleteTenant": SUPER_USER,
    # namespaces: the tenant's admin
    "getTenantNamespaces": TenantOperation("LIST_NAMESPACES"),
    "createNamespace": TenantOperation("CREATE_NAMESPACE"),
    "deleteNamespace": TenantOperation("DELETE_NAMESPACE"),
    "getPolicies": _read("ALL"),
    "getNamespaceAntiAffinityGroup": _read("ANTI_AFFINITY"),
    "setNamespaceAntiAffinityGroup": _write("ANTI_AFFINITY"),
    "removeNamespaceAntiAffinityGroup": _write("ANTI_AFFINITY"),
    "getPersistence": _read("PERSISTENCE"),
    "setPersistence": _write("PERSISTENCE"),
    "deletePersistence": _write("PERSISTENCE"),
    "getBookieAffinityGroup": _read("ALL"),
    "setBookieAffinityGroup": SUPER_USER,
    "deleteBookieAffinityGroup": SUPER_USER,
    "getNamespaceReplicationClusters": _read("REPLICATION"),
    "setNamespaceReplicationClusters": _write("REPLICATION"),
    "getAntiAffinityNamespaces": TenantOperation("LIST_NAMESPACES", from_query=("tenant",)),
    "getAntiAffinityNamespacesV1": TenantOperation("LIST_NAMESPACES", from_query=("property",)),
    "getPlacementPreview": _read("ALL"),
    # the placement console's extensions (api/routes/console.py)
    "getConsoleOverview": Authenticated(),
    "previewConsoleChange": Authenticated(),
    "getConsoleNamespaceLedgers": _read("ALL"),
    "unloadNamespace": NamespaceOperation("UNLOAD"),
    "getList": NamespaceOperation("GET_TOPICS"),
    # topics: the tenant's admin
    "lookupTopicAsync": TopicOperation("LOOKUP"),
    "produceOnPersistentTopic": TopicOperation("PRODUCE"),
    "createNonPartitionedTopic": NamespaceOperation("CREATE_TOPIC"),
    "deleteTopic": TopicOperation("DELETE"),
    "getInternalStats": TopicOperation("GET_STATS"),
    "getMessageById": TopicOperation("PEEK_MESSAGES"),
    "examineMessage": TopicOperation("PEEK_MESSAGES"),
}


TenantAdmins = Callable[[str], Awaitable[frozenset[str]]]


async def _no_admins(tenant: str) -> frozenset[str]:
    del tenant
    return frozenset()


@dataclass(frozen=True)
class Guard:
    """The security settings in effect: who authenticates, who is a super-user, and how to
    read a tenant's admin roles (`tenant_admins`, empty for a tenant that does not exist)."""

    authenticator: ProviderChain | None = None
    authorization_enabled: bool = False
    super_users: frozenset[str] = frozenset()
    tenant_admins: TenantAdmins = _no_admins

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
    need = RULES.get(access.operation, SUPER_USER)
    if isinstance(need, Authenticated):
        return role
    if isinstance(need, SuperUser):
        raise NotAuthorized(NEED_SUPER_USER)
    tenant = _tenant_of(access, need)
    if tenant and role in await guard.tenant_admins(tenant):
        return role
    raise _refusal(access, need, role)


def _tenant_of(access: Access, need: Need) -> str:
    if isinstance(need, TenantOperation):
        for key in need.from_query:
            if key in access.query:
                return access.query[key]
        return access.params.get(need.tenant_param, "")
    return access.params.get("tenant", "")


def _refusal(access: Access, need: Need, role: str) -> NotAuthorized | Forbidden:
    namespace = f"{access.params.get('tenant', '')}/{access.params.get('namespace', '')}"
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
    assert isinstance(need, TopicOperation)
    topic = f"persistent://{namespace}/{access.params.get('topic', '')}"
    return NotAuthorized(
        f"Unauthorized to validateTopicOperation for operation [{need.operation}] on topic "
        f"[{topic}]"
    )
