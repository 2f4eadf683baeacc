"""`/admin/v2/namespaces` routes (namespaces): create/list/delete, anti-affinity, bookie affinity,
persistence."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Query, Request, Response
from fastapi.responses import PlainTextResponse

from api.deps import NamespacePoliciesDep, NamespacesDep, ReplicationDep
from api.shapes.models import (
    BookieAffinityGroupData,
    JavaStringList,
    PersistencePolicies,
    Policies,
    PulsarModel,
)
from api.shapes.params import AntiAffinityGroupName, ClusterName, NamespaceName, TenantName
from api.shapes.responses import ClusterNames, NamespaceNames

router = APIRouter(prefix="/admin/v2/namespaces", tags=["namespaces"])

NOT_FOUND = "Namespace does not exist"
INVALID_NAME = "Namespace name is not valid"
# The anti-affinity group travels as bare text both ways. Pulsar labels it application/json
# although it is not JSON (Jersey reads and writes a String parameter verbatim); we document it
# as text/plain so generated clients send and read `grp1`, never `"grp1"`. The body is taken
# verbatim whatever the Content-Type, as Jersey does: a JSON-quoted `"grp1"` is stored with its
# quotes (Pulsar does the same), so send the bare name.
BARE_STRING: dict[str, Any] = {"text/plain": {"schema": {"type": "string"}, "example": "grp1"}}
BARE_STRING_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "description": (
            "The anti-affinity group name as the raw body, not JSON-quoted: `grp1`, not "
            '`"grp1"`. Taken verbatim whatever the Content-Type (Pulsar\'s own client sends it '
            "labelled `application/json`); a quoted body is stored with its quotes, as Pulsar "
            "stores it. `application/octet-stream` is listed for generators that cannot send "
            "`text/plain` bodies (openapi-python-client)."
        ),
        "content": {
            **BARE_STRING,
            "application/octet-stream": {"schema": {"type": "string", "format": "binary"}},
        },
    }
}
LOCAL_CLUSTER_412 = (
    "Namespace missing local cluster name in clusters list: ... / Namespace does not have any "
    "clusters configured : ..."
)


def errors(reasons: dict[int, str]) -> dict[int | str, dict[str, Any]]:
    """`responses=` for the error statuses a route answers, each with its reason text."""
    return {status: {"description": reason} for status, reason in reasons.items()}


def json_body(model: PulsarModel | None) -> Response:
    """The model as Pulsar writes it (nulls dropped); no model is a 204, as JAX-RS does."""
    if model is None:
        return Response(status_code=204)
    return Response(model.to_bytes(), media_type="application/json")


def no_content() -> Response:
    return Response(status_code=204)


# -- namespaces ---------------------------------------------------------------------------------


@router.get(
    "/{tenant}",
    operation_id="getTenantNamespaces",
    summary="Get the list of all the namespaces for a certain tenant.",
    response_model=NamespaceNames,
    responses=errors({404: "Tenant not found", 412: "Tenant name is not valid"}),
)
async def get_tenant_namespaces(tenant: TenantName, namespaces: NamespacesDep) -> list[str]:
    """The tenant's namespaces, as `tenant/namespace` names."""
    return await namespaces.list(tenant)


@router.get(
    "/{tenant}/{namespace}",
    operation_id="getPolicies",
    summary="Get the dump all the policies specified for a namespace.",
    response_model=Policies,
    responses=errors({404: NOT_FOUND, 412: INVALID_NAME}),
)
async def get_policies(
    tenant: TenantName, namespace: NamespaceName, namespaces: NamespacesDep
) -> Response:
    """The namespace's policies document, as stored (fields we do not interpret included),
    with an unset `is_allow_auto_update_schema` shown as the broker's setting."""
    return json_body(await namespaces.shown_policies(tenant, namespace))


@router.put(
    "/{tenant}/{namespace}",
    operation_id="createNamespace",
    summary="Creates a new namespace with the specified policies",
    description=(
        "The body is optional. `replication_clusters` defaults to the broker's `clusterName`; "
        "every replication cluster must be allowed for the tenant. `bundles` defaults to "
        "`defaultNumberOfNamespaceBundles` equal hash ranges; `bundles.numBundles` (or explicit "
        "`boundaries` covering 0x00000000-0xffffffff) is honoured. `persistence` and "
        "`retention_policies` are validated. Local policies are not created."
    ),
    status_code=204,
    responses=errors(
        {
            400: "Invalid bundles / persistence / retention policies",
            403: "Cluster [<c>] is not in the list of allowed clusters list for tenant [<t>]",
            404: "Tenant does not exist",
            409: "Namespace already exists",
            412: (
                "Namespace name is not valid / Invalid value for message TTL / Exceed the "
                "maximum number of namespace in tenant :<t>"
            ),
        }
    ),
)
async def create_namespace(
    tenant: TenantName,
    namespace: NamespaceName,
    namespaces: NamespacesDep,
    policies: Policies | None = Body(default=None),
) -> Response:
    await namespaces.create(tenant, namespace, policies)
    return no_content()


@router.delete(
    "/{tenant}/{namespace}",
    operation_id="deleteNamespace",
    summary="Delete a namespace and all the topics under it.",
    description="Removes the namespace's global and local policies.",
    status_code=204,
    responses=errors(
        {
            404: NOT_FOUND,
            405: "Broker doesn't allow forced deletion of namespaces",
            409: "Cannot delete non empty namespace",
            412: INVALID_NAME,
        }
    ),
)
async def delete_namespace(
    tenant: TenantName,
    namespace: NamespaceName,
    namespaces: NamespacesDep,
    force: bool = Query(default=False, description="Delete the namespace's topics too"),
    authoritative: bool = Query(default=False, description="Accepted for compatibility"),
) -> Response:
    await namespaces.delete(tenant, namespace, force)
    return no_content()


# -- anti-affinity --------------------------------------------------------------------------------


@router.get(
    "/{tenant}/{namespace}/antiAffinity",
    operation_id="getNamespaceAntiAffinityGroup",
    summary="Get anti-affinity group of a namespace.",
    description=(
        "The group is the bare response body, not JSON-quoted; 204 when none is set. Like "
        "Pulsar, the answer is labelled `Content-Type: application/json` although it is plain "
        "text: read the body as text."
    ),
    response_class=PlainTextResponse,
    responses={
        200: {"description": "The group name", "content": BARE_STRING},
        204: {"description": "No anti-affinity group set"},
        **errors({404: NOT_FOUND, 412: INVALID_NAME}),
    },
)
async def get_namespace_anti_affinity_group(
    tenant: TenantName, namespace: NamespaceName, policies: NamespacePoliciesDep
) -> Response:
    group = await policies.anti_affinity_group(tenant, namespace)
    if group is None:
        return no_content()
    return Response(group.encode(), media_type="application/json")


@router.post(
    "/{tenant}/{namespace}/antiAffinity",
    operation_id="setNamespaceAntiAffinityGroup",
    summary="Set anti-affinity group for a namespace",
    description="The body is the bare group name (not JSON-quoted), as Pulsar's client sends it.",
    status_code=204,
    openapi_extra=BARE_STRING_BODY,
    responses=errors({404: NOT_FOUND, 412: "antiAffinityGroup can't be empty"}),
)
async def set_namespace_anti_affinity_group(
    tenant: TenantName, namespace: NamespaceName, request: Request, policies: NamespacePoliciesDep
) -> Response:
    group = (await request.body()).decode("utf-8")  # UTF-8 checked by api.http.request_rules
    await policies.set_anti_affinity_group(tenant, namespace, group)
    return no_content()


@router.delete(
    "/{tenant}/{namespace}/antiAffinity",
    operation_id="removeNamespaceAntiAffinityGroup",
    summary="Remove anti-affinity group of a namespace.",
    status_code=204,
    responses=errors({404: NOT_FOUND, 412: INVALID_NAME}),
)
async def remove_namespace_anti_affinity_group(
    tenant: TenantName, namespace: NamespaceName, policies: NamespacePoliciesDep
) -> Response:
    """Clear the namespace's anti-affinity group (204 also when none was set)."""
    await policies.remove_anti_affinity_group(tenant, namespace)
    return no_content()


# -- persistence ----------------------------------------------------------------------------------


@router.get(
    "/{tenant}/{namespace}/persistence",
    operation_id="getPersistence",
    summary="Get the persistence configuration for a namespace.",
    response_model=PersistencePolicies,
    responses={200: {"description": "The persistence policies; an empty body when none is set"},
               **errors({404: NOT_FOUND})},
)
async def get_persistence(
    tenant: TenantName, namespace: NamespaceName, policies: NamespacePoliciesDep
) -> Response:
    """The namespace's ensemble size, write and ack quorums and mark-delete rate.

    200 with an empty body when none is set, as the broker answers (its asynchronous response
    resumed with null): new ledgers then use the broker's `managedLedgerDefault*` sizes.
    """
    found = await policies.persistence(tenant, namespace)
    return Response(status_code=200) if found is None else json_body(found)


@router.post(
    "/{tenant}/{namespace}/persistence",
    operation_id="setPersistence",
    summary="Set the persistence configuration for all the topics on a namespace.",
    description=(
        "0 < ensemble <= managedLedgerMaxEnsembleSize, 0 < writeQuorum <= "
        "managedLedgerMaxWriteQuorum, 0 < ackQuorum <= managedLedgerMaxAckQuorum and "
        "ensemble >= writeQuorum >= ackQuorum, else 400."
    ),
    status_code=204,
    responses=errors(
        {400: "Invalid persistence policies", 404: NOT_FOUND, 409: "Concurrent modification"}
    ),
)
async def set_persistence(
    tenant: TenantName,
    namespace: NamespaceName,
    policies: NamespacePoliciesDep,
    persistence: PersistencePolicies | None = Body(default=None),
) -> Response:
    await policies.set_persistence(tenant, namespace, persistence)
    return no_content()


@router.delete(
    "/{tenant}/{namespace}/persistence",
    operation_id="deletePersistence",
    summary="Delete the persistence configuration for all topics on a namespace",
    status_code=204,
    responses=errors({404: NOT_FOUND, 409: "Concurrent modification"}),
)
async def delete_persistence(
    tenant: TenantName, namespace: NamespaceName, policies: NamespacePoliciesDep
) -> Response:
    """Remove the namespace's persistence policy; the broker defaults apply again."""
    await policies.delete_persistence(tenant, namespace)
    return no_content()


# -- bookie affinity ------------------------------------------------------------------------------

STRICT_DESCRIPTION = (
    "Extension `bookkeeperAffinityGroupStrict` (boolean, optional): when true, ledgers of the "
    "namespace are placed only on bookies of the primary groups, then of the secondary groups, "
    "never on ungrouped bookies or bookies of other groups; too few bookies fail the ledger "
    "creation instead of falling back. It is stored with the group in the namespace's local "
    "policies and omitted when false, so an upstream broker reading the same JSON ignores it. "
    "Strict needs a primary group to be strict about: strict with no "
    "`bookkeeperAffinityGroupPrimary`, or with the wildcard primary `*` (which disables "
    "isolation), is refused with 412. A non-boolean value is a 400; nothing is written."
)


@router.get(
    "/{tenant}/{namespace}/persistence/bookieAffinity",
    operation_id="getBookieAffinityGroup",
    summary="Get the bookie-affinity-group from namespace-local policy.",
    description="204 when the namespace has local policies but no group. " + STRICT_DESCRIPTION,
    response_model=BookieAffinityGroupData,
    responses={
        204: {"description": "No bookie affinity group set"},
        **errors(
            {
                404: f"{NOT_FOUND} / Namespace local-policies does not exist",
                412: LOCAL_CLUSTER_412,
            }
        ),
    },
)
async def get_bookie_affinity_group(
    tenant: TenantName, namespace: NamespaceName, policies: NamespacePoliciesDep
) -> Response:
    return json_body(await policies.bookie_affinity_group(tenant, namespace))


@router.post(
    "/{tenant}/{namespace}/persistence/bookieAffinity",
    operation_id="setBookieAffinityGroup",
    summary="Set the bookie-affinity-group to namespace-persistent policy.",
    description=STRICT_DESCRIPTION,
    status_code=204,
    responses=errors(
        {
            400: "Malformed BookieAffinityGroupData (e.g. a non-boolean strict flag)",
            404: NOT_FOUND,
            409: "Concurrent modification",
            412: "Strict without a primary group, or with primary '*' / " + LOCAL_CLUSTER_412,
        }
    ),
)
async def set_bookie_affinity_group(
    tenant: TenantName,
    namespace: NamespaceName,
    policies: NamespacePoliciesDep,
    data: BookieAffinityGroupData | None = Body(default=None),
) -> Response:
    await policies.set_bookie_affinity_group(tenant, namespace, data or BookieAffinityGroupData())
    return no_content()


@router.delete(
    "/{tenant}/{namespace}/persistence/bookieAffinity",
    operation_id="deleteBookieAffinityGroup",
    summary="Delete the bookie-affinity-group from namespace-local policy.",
    description="204 also when no group was set (nothing is written then).",
    status_code=204,
    responses=errors({404: NOT_FOUND, 409: "Concurrent modification", 412: LOCAL_CLUSTER_412}),
)
async def delete_bookie_affinity_group(
    tenant: TenantName, namespace: NamespaceName, policies: NamespacePoliciesDep
) -> Response:
    await policies.delete_bookie_affinity_group(tenant, namespace)
    return no_content()


# -- replication clusters -------------------------------------------------------------------------


@router.get(
    "/{tenant}/{namespace}/replication",
    operation_id="getNamespaceReplicationClusters",
    summary="Get the replication clusters for a namespace.",
    response_model=ClusterNames,
    responses=errors({404: NOT_FOUND, 412: INVALID_NAME}),
)
async def get_namespace_replication_clusters(
    tenant: TenantName, namespace: NamespaceName, replication: ReplicationDep
) -> list[str]:
    """The clusters the namespace's data is replicated to (`replication_clusters` of its
    policies), as Pulsar answers them: a JSON list of cluster names."""
    return await replication.clusters(tenant, namespace)


@router.post(
    "/{tenant}/{namespace}/replication",
    operation_id="setNamespaceReplicationClusters",
    summary="Set the replication clusters for a namespace.",
    description=(
        "The body is the JSON list of cluster names. Each must exist, must not be a peer "
        "cluster of another listed cluster, and must be allowed by the namespace's "
        "`allowed_clusters` when set, else by the tenant's `allowedClusters`."
    ),
    status_code=200,
    response_class=Response,
    responses={200: {"description": "Stored (empty body)."}, **errors(
        {
            403: "Invalid cluster id: <c> / Cluster [<c>] is not in the list of allowed "
            "clusters list for tenant [<t>]",
            404: f"{NOT_FOUND} / Tenant does not exist",
            409: "<c>'s peer-clusters [...] can't be part of replication-clusters [...]",
            412: "ClusterIds should not be null or empty / Cannot specify global in the list "
            "of replication clusters / Invalid replication cluster <c>",
        }
    )},
)
async def set_namespace_replication_clusters(
    tenant: TenantName,
    namespace: NamespaceName,
    replication: ReplicationDep,
    cluster_ids: Annotated[JavaStringList, Body(examples=[["standalone"]])] = None,
) -> Response:
    """Replace the namespace's replication clusters with the listed ones (Pulsar's
    `setNamespaceReplicationClusters`); 200 with an empty body when stored, as the broker
    answers. The list binds as Jackson binds a `List<String>` (a number is its text)."""
    await replication.set_clusters(tenant, namespace, cluster_ids)
    return Response(status_code=200)


# -- anti-affinity listing (after the per-namespace routes: `{cluster}` is a free segment) ------


@router.get(
    "/{cluster}/antiAffinity/{group}",
    operation_id="getAntiAffinityNamespaces",
    summary=(
        "Get all namespaces that are grouped by given anti-affinity group in a given cluster. "
        "api can be only accessed by admin of any of the existing tenant"
    ),
    description=(
        "Namespaces of `tenant` whose anti-affinity group equals `group` ignoring case; the "
        "cluster is only checked for existence."
    ),
    response_model=NamespaceNames,
    responses=errors(
        {
            400: "Tenant should not be null",
            412: "anti-affinity group can't be empty. / Cluster <c> does not exist.",
        }
    ),
)
async def get_anti_affinity_namespaces(
    cluster: ClusterName,
    group: AntiAffinityGroupName,
    policies: NamespacePoliciesDep,
    tenant: str | None = Query(default=None, description="The tenant whose namespaces to list"),
) -> list[str]:
    return await policies.anti_affinity_namespaces(cluster, group, tenant)
