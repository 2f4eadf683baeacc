"""`pulsar-admin namespaces`: create/list/delete, replication clusters, anti-affinity, bookie
affinity (with the `--strict` extension) and persistence (`/admin/v2/namespaces`, plus the one
v1 path the Java CLI uses for `get-anti-affinity-namespaces`)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from cli import reads
from cli.client import path
from cli.context import admin
from cli.errors import ParameterError
from cli.framework import Output, command, new_group, positional
from cli.output import JsonResult, LinesResult, TextResult
from javaformats import hash_set_order, java_split

app = new_group("namespaces", "Operations about namespaces")

MAX_BUNDLES = 1 << 32
INVALID_BUNDLES = (
    "Invalid number of bundles. Number of bundles has to be in the range of (0, 2^32]."
)
QUORUMS_POSITIVE = (
    "[--bookkeeper-ensemble], [--bookkeeper-write-quorum] and [--bookkeeper-ack-quorum] "
    "must greater than 0."
)
RATE_NOT_NEGATIVE = "[--ml-mark-delete-max-rate] cannot less than 0."

Tenant = Annotated[str, positional("tenant-name")]
Namespace = Annotated[
    str,
    positional("tenant/namespace", "tenant/namespace, e.g. my-tenant/my-ns"),
]


ns_path = reads.ns_path
as_read_policies = reads.as_read_policies


def as_read_persistence(persistence: dict[str, Any] | None) -> dict[str, Any] | None:
    """PersistencePolicies as Java prints them: the mark-delete rate is a double."""
    rate = "managedLedgerMaxMarkDeleteRate"
    if persistence is None or not isinstance(persistence.get(rate), int | float):
        return persistence
    return {**persistence, rate: float(persistence[rate])}


# -- create / list / delete / policies --------------------------------------------------------


@command(app, "list")
def list_namespaces(ctx: typer.Context, tenant: Tenant, output: Output = None) -> LinesResult:
    """Get the namespaces for a tenant, one `tenant/namespace` per line."""
    return reads.list_namespaces(admin(ctx), tenant)


@command(app, "create")
def create_namespace(
    ctx: typer.Context,
    namespace: Namespace,
    clusters: Annotated[str | None, typer.Option(
        "-c", "--clusters", show_default=False,
        help="List of clusters this namespace will be assigned (comma separated). "
             "Default: the service's own cluster.")] = None,
    bundles: Annotated[int, typer.Option(
        "-b", "--bundles",
        help="number of bundles to activate; 0 means the broker's default "
             "(defaultNumberOfNamespaceBundles).")] = 0,
    output: Output = None,
) -> None:  # fmt: skip
    """Creates a new namespace."""
    if bundles < 0 or bundles > MAX_BUNDLES:
        raise ParameterError(INVALID_BUNDLES)
    policies: dict[str, Any] = {}
    if clusters is not None:
        policies["replication_clusters"] = hash_set_order(
            [c for c in clusters.split(",") if c], copied=True
        )
    if bundles:
        policies["bundles"] = {"numBundles": bundles}
    admin(ctx).put(ns_path(namespace), policies)


@command(app, "delete")
def delete_namespace(
    ctx: typer.Context,
    namespace: Namespace,
    force: Annotated[bool, typer.Option(
        "-f", "--force",
        help="Delete namespace forcefully by force deleting all topics under it")] = False,
    output: Output = None,
) -> None:  # fmt: skip
    """Deletes a namespace."""
    admin(ctx).delete(ns_path(namespace), params={"force": str(force).lower()})


@command(app, "policies")
def get_policies(ctx: typer.Context, namespace: Namespace, output: Output = None) -> JsonResult:
    """Get the configuration policies of a namespace, as JSON (Policies)."""
    return reads.namespace_policies(admin(ctx), namespace)


# -- replication clusters -----------------------------------------------------------------------


@command(app, "set-clusters")
def set_clusters(
    ctx: typer.Context,
    namespace: Namespace,
    clusters: Annotated[str, typer.Option(
        "-c", "--clusters", show_default=False,
        help="Replication Cluster Ids list (comma separated values)")],
    output: Output = None,
) -> None:  # fmt: skip
    """Set replication clusters for a namespace."""
    body = hash_set_order(java_split(clusters, ","), copied=True)
    admin(ctx).post(ns_path(namespace, "replication"), body)


@command(app, "get-clusters")
def get_clusters(ctx: typer.Context, namespace: Namespace, output: Output = None) -> LinesResult:
    """Get replication clusters for a namespace, one per line."""
    return reads.namespace_clusters(admin(ctx), namespace)


# -- anti-affinity ------------------------------------------------------------------------------


@command(app, "set-anti-affinity-group")
def set_anti_affinity_group(
    ctx: typer.Context,
    namespace: Namespace,
    group: Annotated[str, typer.Option(
        "-g", "--group", help="Anti-affinity group name. Required.", show_default=False)],
    output: Output = None,
) -> None:  # fmt: skip
    """Set Anti-affinity group name for a namespace: namespaces of one group are spread over
    different failure domains."""
    admin(ctx).post_text(ns_path(namespace, "antiAffinity"), group)


@command(app, "get-anti-affinity-group")
def get_anti_affinity_group(
    ctx: typer.Context, namespace: Namespace, output: Output = None
) -> TextResult:
    """Get Anti-affinity group name for a namespace (an empty line when none is set: the
    Java client reads the broker's 204 as an empty string)."""
    return TextResult(admin(ctx).get_text(ns_path(namespace, "antiAffinity")) or "")


@command(app, "delete-anti-affinity-group")
def delete_anti_affinity_group(
    ctx: typer.Context, namespace: Namespace, output: Output = None
) -> None:
    """Remove Anti-affinity group name for a namespace."""
    admin(ctx).delete(ns_path(namespace, "antiAffinity"))


@command(app, "get-anti-affinity-namespaces")
def get_anti_affinity_namespaces(
    ctx: typer.Context,
    cluster: Annotated[str, typer.Option(
        "-c", "--cluster", help="Cluster name. Required.", show_default=False)],
    group: Annotated[str, typer.Option(
        "-g", "--group", help="Anti-affinity group name. Required.", show_default=False)],
    tenant: Annotated[str | None, typer.Option(
        "-p", "--tenant", show_default=False,
        help="Tenant whose namespaces are listed (the service requires it).")] = None,
    output: Output = None,
) -> LinesResult:  # fmt: skip
    """Get Anti-affinity namespaces grouped with the given anti-affinity group name, one
    `tenant/namespace` per line."""
    params = {} if tenant is None else {"property": tenant}
    url = f"/admin/namespaces{path(cluster, 'antiAffinity', group)}"
    return LinesResult(admin(ctx).get_json(url, params=params) or [])


# -- bookie affinity ----------------------------------------------------------------------------


def parse_strict(value: str | None) -> bool | None:
    if value is None:
        return None
    lowered = value.strip().lower()
    if lowered not in ("true", "false"):
        raise ParameterError(f"Invalid value for option '--strict': '{value}' is not a boolean "
                             "(use true or false)")  # fmt: skip
    return lowered == "true"


@command(app, "set-bookie-affinity-group")
def set_bookie_affinity_group(
    ctx: typer.Context,
    namespace: Namespace,
    primary_group: Annotated[str, typer.Option(
        "-pg", "--primary-group", show_default=False,
        help="Bookie-affinity primary-groups (comma separated) name where namespace messages "
             "should be written. Required.")],
    secondary_group: Annotated[str | None, typer.Option(
        "-sg", "--secondary-group", show_default=False,
        help="Bookie-affinity secondary-group (comma separated) name where namespace messages "
             "should be written when the primary groups have too few bookies. Optional.")] = None,
    strict: Annotated[str | None, typer.Option(
        "--strict", metavar="true|false", show_default=False,
        help="Extension (not in upstream Pulsar): true never places this namespace's ledgers "
             "on bookies outside the primary and secondary groups (no fallback to bookies "
             "without a group); too few bookies is an error. Sent as "
             "bookkeeperAffinityGroupStrict. Default: not sent (upstream behaviour).")] = None,
    output: Output = None,
) -> None:  # fmt: skip
    """Set the bookie-affinity group name."""
    body: dict[str, Any] = {"bookkeeperAffinityGroupPrimary": primary_group}
    if secondary_group is not None:
        body["bookkeeperAffinityGroupSecondary"] = secondary_group
    strict_mode = parse_strict(strict)
    if strict_mode is not None:
        body["bookkeeperAffinityGroupStrict"] = strict_mode
    admin(ctx).post(ns_path(namespace, "persistence", "bookieAffinity"), body)


@command(app, "get-bookie-affinity-group")
def get_bookie_affinity_group(
    ctx: typer.Context, namespace: Namespace, output: Output = None
) -> JsonResult:
    """Get the bookie-affinity group name, as JSON (`null` when none is set)."""
    return JsonResult(admin(ctx).get_json(ns_path(namespace, "persistence", "bookieAffinity")))


@command(app, "delete-bookie-affinity-group")
def delete_bookie_affinity_group(
    ctx: typer.Context, namespace: Namespace, output: Output = None
) -> None:
    """Delete the bookie-affinity group name."""
    admin(ctx).delete(ns_path(namespace, "persistence", "bookieAffinity"))


# -- persistence --------------------------------------------------------------------------------


@command(app, "set-persistence")
def set_persistence(
    ctx: typer.Context,
    namespace: Namespace,
    ensemble: Annotated[int, typer.Option(
        "-e", "--bookkeeper-ensemble",
        help="Number of bookies to use for a topic (ensemble size E).")] = 2,
    write_quorum: Annotated[int, typer.Option(
        "-w", "--bookkeeper-write-quorum",
        help="How many writes to make of each entry (W <= E).")] = 2,
    ack_quorum: Annotated[int, typer.Option(
        "-a", "--bookkeeper-ack-quorum",
        help="Number of acks (guaranteed copies) to wait for each entry (A <= W).")] = 2,
    mark_delete_rate: Annotated[float, typer.Option(
        "-r", "--ml-mark-delete-max-rate",
        help="Throttling rate of mark-delete operation (0 means no throttle).")] = 0.0,
    storage_class: Annotated[str | None, typer.Option(
        "-c", "--ml-storage-class", show_default=False,
        help="Managed ledger storage class name. Default: not set.")] = None,
    output: Output = None,
) -> None:  # fmt: skip
    """Set the persistence policies for a namespace."""
    if ensemble <= 0 or write_quorum <= 0 or ack_quorum <= 0:
        raise ParameterError(QUORUMS_POSITIVE)
    if mark_delete_rate < 0:
        raise ParameterError(RATE_NOT_NEGATIVE)
    body: dict[str, Any] = {
        "bookkeeperEnsemble": ensemble,
        "bookkeeperWriteQuorum": write_quorum,
        "bookkeeperAckQuorum": ack_quorum,
        "managedLedgerMaxMarkDeleteRate": mark_delete_rate,
    }
    if storage_class is not None:
        body["managedLedgerStorageClassName"] = storage_class
    admin(ctx).post(ns_path(namespace, "persistence"), body)


@command(app, "get-persistence")
def get_persistence(ctx: typer.Context, namespace: Namespace, output: Output = None) -> JsonResult:
    """Get the persistence policies for a namespace, as JSON (`null` when never set)."""
    return JsonResult(as_read_persistence(admin(ctx).get_json(ns_path(namespace, "persistence"))))


@command(app, "remove-persistence")
def remove_persistence(ctx: typer.Context, namespace: Namespace, output: Output = None) -> None:
    """Remove the persistence policies for a namespace."""
    admin(ctx).delete(ns_path(namespace, "persistence"))


# -- placement preview (extension) and unload ------------------------------------------------


@command(app, "placement-preview")
def placement_preview(
    ctx: typer.Context,
    namespace: Namespace,
    ensemble: Annotated[int | None, typer.Option(
        "-e", "--bookkeeper-ensemble", show_default=False,
        help="Ensemble size. Default: the namespace's persistence policy, else the broker's "
             "managedLedgerDefaultEnsembleSize.")] = None,
    write_quorum: Annotated[int | None, typer.Option(
        "-w", "--bookkeeper-write-quorum", show_default=False,
        help="Write quorum. Default: as for the ensemble size.")] = None,
    ack_quorum: Annotated[int | None, typer.Option(
        "-a", "--bookkeeper-ack-quorum", show_default=False,
        help="Ack quorum. Default: as for the ensemble size.")] = None,
    output: Output = None,
) -> JsonResult:  # fmt: skip
    """Extension: preview where a new ledger of the namespace would be placed (bookies with
    group, rack and source, adherence, every excluded bookie with the reason), as JSON."""
    sizes = {"ensembleSize": ensemble, "writeQuorum": write_quorum, "ackQuorum": ack_quorum}
    params = {key: value for key, value in sizes.items() if value is not None}
    return JsonResult(admin(ctx).get_json(ns_path(namespace, "placement"), params))


@command(app, "unload")
def unload(ctx: typer.Context, namespace: Namespace, output: Output = None) -> None:
    """Unload a namespace from the current serving broker (its bundles are assigned again on
    the next lookup)."""
    admin(ctx).put(ns_path(namespace, "unload"))
