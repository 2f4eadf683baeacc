"""`pulsar-admin storage`: the storage engine's auto-recovery, over BookKeeper's own HTTP admin
paths (`/api/v1/autorecovery/...`) that the service serves: under-replicated ledgers, audit
trigger, the elected auditor."""

from __future__ import annotations

from typing import Annotated

import typer

from cli.context import admin
from cli.errors import AdminError
from cli.framework import Output, command, new_group
from cli.output import JsonResult, LinesResult, TextResult

app = new_group("storage", "Operations about the storage engine's auto-recovery")

AUTORECOVERY = "/api/v1/autorecovery"


@command(app, "under-replicated")
def under_replicated(
    ctx: typer.Context,
    missing_replica: Annotated[str | None, typer.Option(
        "--missing-replica", help="Only ledgers missing a copy on this bookie")] = None,
    excluding_missing_replica: Annotated[str | None, typer.Option(
        "--excluding-missing-replica",
        help="Only ledgers not missing a copy on this bookie")] = None,
    print_missing_replica: Annotated[bool, typer.Option(
        "--print-missing-replica",
        help="Print each ledger with the bookies missing its copies")] = False,
    output: Output = None,
) -> LinesResult | JsonResult | TextResult:  # fmt: skip
    """List the ledgers marked under-replicated (one id a line), or with
    --print-missing-replica each ledger's missing bookies as JSON."""
    params: dict[str, str] = {}
    if missing_replica:
        params["missingreplica"] = missing_replica
    if excluding_missing_replica:
        params["excludingmissingreplica"] = excluding_missing_replica
    if print_missing_replica:
        params["printmissingreplica"] = "true"
    try:
        found = admin(ctx).get_json(f"{AUTORECOVERY}/list_under_replicated_ledger/", params)
    except AdminError as exc:
        if exc.status == 404:
            return TextResult("No under replicated ledgers found")
        raise
    if print_missing_replica:
        return JsonResult(found)
    return LinesResult(list(found or []))


@command(app, "trigger-audit")
def trigger_audit(ctx: typer.Context, output: Output = None) -> TextResult:
    """Ask the elected auditor for an audit now (lost bookies and placement)."""
    response = admin(ctx).request("PUT", f"{AUTORECOVERY}/trigger_audit")
    return TextResult(response.text)


@command(app, "who-is-auditor")
def who_is_auditor(ctx: typer.Context, output: Output = None) -> TextResult:
    """Print the elected auditor (`Auditor: <id>`)."""
    return TextResult(admin(ctx).get_text(f"{AUTORECOVERY}/who_is_auditor/"))
