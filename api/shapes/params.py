"""Path parameters, one name and one description per concept, for every router.

Each alias carries what the OpenAPI document says about the parameter (description and an
example a generated client or Swagger UI's "Try it out" can use). The names follow Pulsar's
swagger, except that the tenant is always `tenant` (upstream spells it `property` on two
bookie-affinity operations; the URL paths are the same).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Path
from pydantic import BeforeValidator


def _example(value: str, summary: str) -> dict[str, Any]:
    return {"example": {"summary": summary, "value": value}}


TenantName = Annotated[
    str,
    Path(
        description=(
            "Tenant name (the first part of `tenant/namespace`): letters, digits and `-=:._`; "
            "`public` exists after a first start."
        ),
        openapi_examples=_example("public", "Pulsar's default tenant"),
    ),
]
NamespaceName = Annotated[
    str,
    Path(
        description="Namespace name within the tenant (the second part of `tenant/namespace`).",
        openapi_examples=_example("default", "Pulsar's default namespace"),
    ),
]
ClusterName = Annotated[
    str,
    Path(
        description=(
            "Cluster name, as stored under `/admin/clusters`; letters, digits and `-=:._`, no "
            "`/`. The broker's own cluster is its `clusterName` setting."
        ),
        openapi_examples=_example("standalone", "the cluster `pulsar standalone` creates"),
    ),
]
BookieId = Annotated[
    str,
    Path(
        description=(
            "Bookie id in `host:port` form, used verbatim as the key in the rack map (it need "
            "not be registered)."
        ),
        openapi_examples=_example("127.0.0.1:3181", "a bookie on its default port"),
    ),
]
BrokerId = Annotated[
    str,
    Path(
        description=(
            "Broker id, `host:webServicePort`, as the broker registers itself under "
            "`/loadbalance/brokers`."
        ),
        openapi_examples=_example("broker-1.example.com:8080", "a broker's web service address"),
    ),
]
IsolationPolicyName = Annotated[
    str,
    Path(
        description="Name of the namespace isolation policy within the cluster.",
        openapi_examples=_example("policy-ssd", "a policy pinning namespaces to some brokers"),
    ),
]
FailureDomainName = Annotated[
    str,
    Path(
        description="Name of the failure domain within the cluster.",
        openapi_examples=_example("zone-a", "the brokers of one availability zone"),
    ),
]
AntiAffinityGroupName = Annotated[
    str,
    Path(
        description=(
            "Anti-affinity group name; namespaces whose group equals it (ignoring case) are listed."
        ),
        openapi_examples=_example("grp1", "a group shared by namespaces to spread apart"),
    ),
]
TopicDomain = Annotated[
    str,
    Path(
        description="`persistent` or `non-persistent`.",
        openapi_examples=_example("persistent", "a persistent topic"),
    ),
]
TopicName = Annotated[
    str,
    Path(
        description="Local name of the topic within the namespace.",
        openapi_examples=_example("orders", "a topic name"),
    ),
]
AuditId = Annotated[
    str,
    Path(
        description=(
            "Id of a placement audit, as `POST /admin/v2/storage/audit` returned it (12 hex "
            "digits)."
        ),
        openapi_examples=_example("3f2a9c41d07e", "an audit started earlier"),
    ),
]
LedgerId = Annotated[
    str,
    Path(
        description=(
            "Ledger id of the message (the first part of its message id `ledgerId:entryId`); "
            "a value that is not a number answers 404."
        ),
        openapi_examples=_example("12", "a ledger of the topic"),
    ),
]
EntryId = Annotated[
    str,
    Path(
        description=(
            "Entry id of the message within its ledger (the second part of `ledgerId:entryId`); "
            "a value that is not a number answers 404."
        ),
        openapi_examples=_example("0", "the ledger's first entry"),
    ),
]
StorageBookieId = Annotated[
    str,
    Path(
        description=(
            "Bookie id in `host:port` form, as it registers under `/ledgers/available` "
            "(a supervised bookie's id is `127.0.0.1:<its port>`)."
        ),
        openapi_examples=_example("127.0.0.1:3181", "a bookie on its default port"),
    ),
]


def _jersey_boolean(value: object) -> bool:
    """`Boolean.valueOf` of a query value, as Jersey binds a `boolean` parameter: `true` in
    any case is true, anything else (`abc` included) false."""
    return (isinstance(value, str) and value.lower() == "true") or value is True


# A `boolean` query parameter of a Pulsar resource: never refused, only read.
JerseyBoolean = Annotated[bool, BeforeValidator(_jersey_boolean)]
