"""`pulsar-admin ns-isolation-policy`: namespace isolation policies, which place namespaces
on brokers (`/admin/v2/clusters/{cluster}/namespaceIsolationPolicies`)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from cli.client import V2, path
from cli.context import admin
from cli.errors import ParameterError
from cli.framework import Output, command, new_group, positional
from cli.javafmt import NAMESPACE_ISOLATION_DATA
from cli.output import JsonResult, LinesResult, MapResult
from javaformats import java_to_string

app = new_group("ns-isolation-policy", "Operations about namespace isolation policy")

STRICT_IS_FOR_BOOKIES = (
    "--strict is not an option of ns-isolation-policy: namespace isolation policies choose "
    "brokers, not bookies. Strict bookie affinity is set per namespace with: pulsar-admin "
    "namespaces set-bookie-affinity-group <tenant/namespace> --primary-group <group> "
    "--strict true"
)
UNLOAD_SCOPES = ("all_matching", "none", "changed")

Cluster = Annotated[str, positional("cluster-name")]
Policy = Annotated[str, positional("policy-name")]


def policies_path(cluster: str, *rest: str) -> str:
    return f"{V2}/clusters{path(cluster, 'namespaceIsolationPolicies', *rest)}"


def split(option: str | None) -> list[str]:
    return [item for item in (option or "").split(",") if item]


def parse_params(option: str) -> dict[str, str]:
    """`k=v,k2=v2` (picocli's Map option with split=",")."""
    params: dict[str, str] = {}
    for item in option.split(","):
        key, sep, value = item.partition("=")
        if not sep:
            raise ParameterError(
                "Value for option '--auto-failover-policy-params' should be in KEY=VALUE "
                f"format but was {item}"
            )
        params[key] = value
    return params


def isolation_data(
    namespaces: str,
    primary: str,
    secondary: str | None,
    policy_type: str,
    policy_params: str,
    unload_scope: str | None,
) -> dict[str, Any]:
    """The policy the Java CLI builds, with its client-side checks in its order."""
    namespace_list = split(namespaces)
    if not namespace_list:
        raise ParameterError(
            f"unable to parse namespaces parameter list: {java_to_string(namespace_list)}"
        )
    primary_list = split(primary)
    if not primary_list:  # upstream prints the namespaces list here too
        raise ParameterError(
            f"unable to parse primary parameter list: {java_to_string(namespace_list)}"
        )
    params = parse_params(policy_params)
    if policy_type != "min_available":
        raise ParameterError(f"Unknown auto failover policy type specified : {policy_type}")
    if len(params) != 2:
        raise ParameterError(
            f"Unknown auto failover policy params specified : {java_to_string(params)}"
        )
    if unload_scope is not None and unload_scope not in UNLOAD_SCOPES:
        raise ParameterError(
            f"Invalid value for option '--unload-scope': expected one of "
            f"[{', '.join(UNLOAD_SCOPES)}] (case-sensitive) but was '{unload_scope}'"
        )
    data: dict[str, Any] = {
        "namespaces": namespace_list,
        "primary": primary_list,
        "secondary": split(secondary),
        "auto_failover_policy": {"policy_type": policy_type, "parameters": params},
    }
    if unload_scope is not None:
        data["unload_scope"] = unload_scope
    return data


@command(app, "set")
def set_policy(
    ctx: typer.Context,
    cluster: Cluster,
    policy: Policy,
    namespaces: Annotated[str, typer.Option(
        "--namespaces", show_default=False,
        help="comma separated namespaces-regex list, matched against tenant/namespace. "
             "Required.")],
    primary: Annotated[str, typer.Option(
        "--primary", show_default=False,
        help="comma separated primary-broker-regex list: the brokers these namespaces are "
             "assigned to. Required.")],
    auto_failover_policy_type: Annotated[str, typer.Option(
        "--auto-failover-policy-type", show_default=False,
        help="auto failover policy type name ['min_available']. Required.")],
    auto_failover_policy_params: Annotated[str, typer.Option(
        "--auto-failover-policy-params", show_default=False,
        help="comma separated name=value auto failover policy parameters, e.g. "
             "min_limit=1,usage_threshold=80. Required.")],
    secondary: Annotated[str | None, typer.Option(
        "--secondary", show_default=False,
        help="comma separated secondary-broker-regex list, used when fewer than min_limit "
             "primary brokers are available. Default: empty.")] = None,
    unload_scope: Annotated[str | None, typer.Option(
        "--unload-scope", show_default=False,
        help="configure the type of unload to do - ['all_matching', 'none', 'changed'] "
             "namespaces. Default: changed (only namespaces whose placement changes).")] = None,
    strict: Annotated[str | None, typer.Option(
        "--strict", hidden=True,
        help="Not an option here: strict mode is for bookie affinity.")] = None,
    output: Output = None,
) -> None:  # fmt: skip
    """Create/Update a namespace isolation policy for a cluster. This operation requires
    Pulsar super-user privileges"""
    if strict is not None:
        raise ParameterError(STRICT_IS_FOR_BOOKIES)
    data = isolation_data(namespaces, primary, secondary, auto_failover_policy_type,
                          auto_failover_policy_params, unload_scope)  # fmt: skip
    admin(ctx).post(policies_path(cluster, policy), data)


@command(app, "get")
def get_policy(
    ctx: typer.Context, cluster: Cluster, policy: Policy, output: Output = None
) -> JsonResult:
    """Get namespace isolation policy of a cluster, as JSON. This operation requires Pulsar
    super-user privileges"""
    return JsonResult(admin(ctx).get_json(policies_path(cluster, policy)))


@command(app, "list")
def list_policies(ctx: typer.Context, cluster: Cluster, output: Output = None) -> MapResult:
    """List all namespace isolation policies of a cluster: one line per policy,
    `<policy>    NamespaceIsolationDataImpl(...)`. This operation requires Pulsar super-user
    privileges"""
    return MapResult(admin(ctx).get_json(policies_path(cluster)) or {}, NAMESPACE_ISOLATION_DATA)


@command(app, "delete")
def delete_policy(
    ctx: typer.Context, cluster: Cluster, policy: Policy, output: Output = None
) -> None:
    """Delete namespace isolation policy of a cluster. This operation requires Pulsar
    super-user privileges"""
    admin(ctx).delete(policies_path(cluster, policy))


@command(app, "brokers")
def list_brokers(ctx: typer.Context, cluster: Cluster, output: Output = None) -> LinesResult:
    """List all brokers with namespace-isolation policies attached to it, each as its own
    JSON object. This operation requires Pulsar super-user privileges"""
    return LinesResult(admin(ctx).get_json(policies_path(cluster, "brokers")) or [])


@command(app, "broker")
def get_broker(
    ctx: typer.Context,
    cluster: Cluster,
    broker: Annotated[str, typer.Option(
        "--broker", show_default=False,
        help="Broker-name to get namespace-isolation policies attached to it, as "
             "`host:port` (e.g. broker-1:8080). Required.")],
    output: Output = None,
) -> JsonResult:  # fmt: skip
    """Get broker with namespace-isolation policies attached to it, as JSON. This operation
    requires Pulsar super-user privileges"""
    return JsonResult(admin(ctx).get_json(policies_path(cluster, "brokers", broker)))
