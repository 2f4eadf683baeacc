"""`pulsar-admin bookies`: bookie rack placement (`/admin/v2/bookies`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from cli import reads
from cli.client import V2, path
from cli.context import admin
from cli.errors import CliError, ParameterError
from cli.framework import Output, command, new_group
from cli.output import JsonResult
from cli.watch import Watcher
from javaformats import jackson_pretty

app = new_group("bookies", "Operations about bookies rack placement")

INVALID_RACK = "rack name is invalid, it should not be null, empty or '/'"
RACKS = f"{V2}/bookies/racks-info"

Bookie = Annotated[
    str,
    typer.Option(
        "-b",
        "--bookie",
        show_default=False,
        help="Bookie address, format `address:port` (e.g. 127.0.0.1:3181). Required.",
    ),
]
Rack = Annotated[
    str,
    typer.Option(
        "-r",
        "--rack",
        show_default=False,
        help="Bookie rack name, e.g. /rack1 (or /region1/rack1 when region-aware placement "
        "is enabled). Must not be empty or '/'. With rack-aware placement the name may not "
        "contain a slash except at its beginning and end. Required.",
    ),
]
Group = Annotated[
    str,
    typer.Option(
        "-g", "--group", help="Bookie group name (the isolation group namespaces affine to)."
    ),
]
Hostname = Annotated[
    str | None,
    typer.Option(
        "-hn",
        "--hostname",
        show_default=False,
        help="Bookie host name. Optional; not stored when not given.",
    ),
]


@command(app, "racks-placement")
def racks_placement(ctx: typer.Context, output: Output = None) -> JsonResult:
    """Gets the rack placement information for all the bookies in the cluster, as JSON
    `{group : {bookie : {"rack" : ..., "hostname" : ...}}}`."""
    return reads.racks_placement(admin(ctx))


@command(app, "list-bookies")
def list_bookies(ctx: typer.Context, output: Output = None) -> JsonResult:
    """List bookies: every bookie registered with the metadata store (writable and
    read-only), as JSON `{"bookies" : [ {"bookieId" : "host:port"} ]}`."""
    return reads.list_bookies(admin(ctx))


@command(app, "get-bookie-rack")
def get_bookie_rack(ctx: typer.Context, bookie: Bookie, output: Output = None) -> JsonResult:
    """Gets the rack placement information for a specific bookie in the cluster, as JSON
    `{"rack" : ..., "hostname" : ...}`."""
    return reads.get_bookie_rack(admin(ctx), bookie)


@command(app, "delete-bookie-rack")
def delete_bookie_rack(ctx: typer.Context, bookie: Bookie, output: Output = None) -> None:
    """Remove rack placement information for a specific bookie in the cluster."""
    admin(ctx).delete(RACKS + path(bookie))


@command(app, "set-bookie-rack")
def set_bookie_rack(
    ctx: typer.Context,
    bookie: Bookie,
    rack: Rack,
    group: Group = "default",
    hostname: Hostname = None,
    output: Output = None,
) -> None:
    """Updates the rack placement information for a specific bookie in the cluster (note.
    bookie address format:`address:port`). The bookie leaves any other group."""
    if not rack or rack.strip() == "/":
        raise ParameterError(INVALID_RACK)
    body = {"rack": rack} if hostname is None else {"rack": rack, "hostname": hostname}
    admin(ctx).post(RACKS + path(bookie), body, params={"group": group})


@command(app, "lint")
def lint(
    ctx: typer.Context,
    fail_on_warning: Annotated[bool, typer.Option(
        "--fail-on-warning",
        help="Exit with status 1 when there are warnings (they go to stderr then).")] = False,
    output: Output = None,
) -> JsonResult:  # fmt: skip
    """Extension: warnings about bookie rack and group configuration (unracked or stale
    bookies, bad ids, rack depth, small or empty affinity groups, too few racks, default
    rack), as JSON `{"warnings" : [ ... ]}`."""
    report = admin(ctx).get_json(f"{V2}/bookies/lint") or {"warnings": []}
    found = report.get("warnings") or []
    if fail_on_warning and found:
        raise CliError(f"{len(found)} warning(s):\n{jackson_pretty(report)}")
    return JsonResult(report)


@command(app, "export")
def export(ctx: typer.Context, output: Output = None) -> JsonResult:
    """Extension: the whole rack map as JSON (a BookiesRackConfiguration), for `bookies
    import`: `pulsar-admin bookies export > racks.json`."""
    return JsonResult(admin(ctx).get_json(RACKS) or {})


@command(app, "import")
def import_racks(
    ctx: typer.Context,
    file: Annotated[Path, typer.Argument(help="JSON file with a whole rack map (as `export`)")],
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="Print what would change; change nothing.")] = False,
    prune: Annotated[bool, typer.Option(
        "--prune", help="Remove the rack entries the file does not list.")] = False,
    output: Output = None,
) -> JsonResult:  # fmt: skip
    """Extension: apply a whole rack map at once (validated as a whole, written in one
    compare-and-swap); prints the diff as JSON (`added`, `changed`, `removed`)."""
    try:
        document = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ParameterError(f"Cannot read rack map from {file}: {exc}") from exc
    params = {"dryRun": str(dry_run).lower(), "prune": str(prune).lower()}
    response = admin(ctx).request("PUT", RACKS, params=params, json_body=document)
    return JsonResult(response.json())


@command(app, "watch")
def watch(
    ctx: typer.Context,
    since: Annotated[int | None, typer.Option(
        "--since", min=1, show_default=False,
        help="First etcd revision to print (a previous watch's last revision + 1). "
        "Default: changes from now on.")] = None,
    output: Output = None,
) -> None:  # fmt: skip
    """Extension: print every change of the rack map and of the bookie registrations as it
    happens, one line each: `<revision> put <key> <JSON>` or `<revision> delete <key>`.
    Reconnects by itself after a dropped connection, from the revision after the last one
    printed (no change missed or printed twice). Ends with a `resync ...` line and exit
    status 1 when that is impossible (etcd compacted the revision, or this client fell too
    far behind): re-read the state, then watch again from the revision it names + 1."""
    Watcher(admin(ctx), "bookies", since).run()
