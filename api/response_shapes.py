"""Inline response shapes (lists of names, maps by name), each with the description and
example the OpenAPI document shows. The JSON on the wire is the plain list or map."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from api.models import (
    EXAMPLE_BROKER_ISOLATION,
    EXAMPLE_ISOLATION,
    BookieInfo,
    BrokerNamespaceIsolationData,
    FailureDomain,
    NamespaceIsolationData,
)

RackMap = Annotated[
    dict[str, dict[str, BookieInfo]],
    Field(
        description="Bookie group -> bookie id -> rack info, both levels sorted by key",
        examples=[
            {
                "default": {"127.0.0.1:3181": {"rack": "/rack1", "hostname": "127.0.0.1"}},
                "group-ssd": {"10.0.0.7:3181": {"rack": "/rack2"}},
            }
        ],
    ),
]
RuntimeConfiguration = Annotated[
    dict[str, str],
    Field(
        description="Setting name -> value, as strings",
        examples=[{"clusterName": "standalone", "webServicePort": "8080"}],
    ),
]
BrokerIds = Annotated[
    list[str],
    Field(
        description="Broker ids, host:webServicePort",
        examples=[["broker-1.example.com:8080", "broker-2.example.com:8080"]],
    ),
]
ClusterNames = Annotated[
    list[str], Field(description="Cluster names", examples=[["standalone", "us-west"]])
]
TenantNames = Annotated[list[str], Field(description="Tenant names", examples=[["public", "ops"]])]
NamespaceNames = Annotated[
    list[str],
    Field(
        description="Namespaces as tenant/namespace",
        examples=[["public/default", "public/orders"]],
    ),
]
FailureDomains = Annotated[
    dict[str, FailureDomain],
    Field(
        description="Failure domain name -> its brokers",
        examples=[{"zone-a": {"brokers": ["broker-1.example.com:8080"]}}],
    ),
]
IsolationPolicies = Annotated[
    dict[str, NamespaceIsolationData],
    Field(
        description="Isolation policy name -> policy",
        examples=[{"policy-ssd": EXAMPLE_ISOLATION}],
    ),
]
BrokersIsolation = Annotated[
    list[BrokerNamespaceIsolationData],
    Field(
        description="Every registered broker with the isolation policy naming it",
        examples=[
            [
                EXAMPLE_BROKER_ISOLATION,
                {"brokerName": "broker-9.example.com:8080", "primary": False, "namespaceRegex": []},
            ]
        ],
    ),
]
