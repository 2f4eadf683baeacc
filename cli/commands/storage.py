"""`pulsar-admin storage`: the storage engine's bookies and the placement audit of the live
cluster (extension paths under `/admin/v2/storage/...`).

One command per function; other storage commands join this group the same way."""

from __future__ import annotations

import sys
import time
from typing import Annotated, Any

import typer

from cli.client import V2, path
from cli.context import admin
from cli.errors import CliError
from cli.framework import Output, command, new_group, positional
from cli.output import JsonResult, TextResult

app = new_group("storage", "Extension: the storage engine's bookies and the placement audit")

BOOKIES = f"{V2}/storage/bookies"

Bookie = Annotated[
    str,
    typer.Option(
        "-b", "--bookie", show_default=False,
        help="Bookie id, format `address:port` (e.g. 127.0.0.1:3181). Required.",
    ),
]  # fmt: skip


@command(app, "bookies")
def bookies(ctx: typer.Context, output: Output = None) -> JsonResult:
    """Extension: every bookie known from registrations, the rack map or the local
    supervisor, with its state (writable, read-only, stopped), rack, group, disk used and
    capacity in bytes (supervised bookies only) and ledger count; `-o table` for a table."""
    return JsonResult(admin(ctx).get_json(BOOKIES) or [])


@command(app, "start")
def start(ctx: typer.Context, bookie: Bookie, output: Output = None) -> None:
    """Extension: start a supervised bookie that was stopped (waits for its registration)."""
    admin(ctx).put(BOOKIES + path(bookie))


@command(app, "stop")
def stop(ctx: typer.Context, bookie: Bookie, output: Output = None) -> None:
    """Extension: stop a supervised bookie uncleanly (SIGKILL, lease revoked, files as they
    are); it stays down until `storage start`."""
    admin(ctx).post(BOOKIES + path(bookie) + "/stop")


@command(app, "readonly")
def readonly(ctx: typer.Context, bookie: Bookie, output: Output = None) -> None:
    """Extension: switch a supervised bookie to read-only (the `force-readonly` flag file in
    its data directory; waits until it registers as read-only)."""
    admin(ctx).post(BOOKIES + path(bookie) + "/readonly")


AUDITS = f"{V2}/storage/audit"
_BAR = 30


def progress_line(status: dict[str, Any]) -> str:
    """`[######......] 40% AUDIT: judging fragments (1200 ledgers read)`."""
    share = min(max(float(status.get("progress") or 0.0), 0.0), 1.0)
    filled = int(share * _BAR)
    return (f"[{'#' * filled}{'.' * (_BAR - filled)}] {share * 100:3.0f}% "
            f"{status.get('state')}: {status.get('stage')} "
            f"({status.get('ledgersRead', 0)} ledgers read)")


@command(app, "audit")
def audit(
    ctx: typer.Context,
    wait: Annotated[bool, typer.Option("--wait", help="Wait for the audit to finish, with a "
                                                      "progress bar on stderr")] = False,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds to wait at most with "
                                                             "--wait")] = 3600.0,
    output: Output = None,
) -> JsonResult:  # fmt: skip
    """Start a placement audit of every ledger (snapshot of the metadata store, then the Spark
    audit, on the server); prints its id and state, or with --wait its final status."""
    client = admin(ctx)
    status = client.request("POST", AUDITS).json()
    if not wait:
        return JsonResult(status)
    tty = sys.stderr.isatty()
    deadline = time.monotonic() + timeout
    last = ""
    while status["state"] not in ("DONE", "FAILED"):
        line = progress_line(status)
        if line != last:
            sys.stderr.write(f"\r{line}" if tty else line + "\n")
            sys.stderr.flush()
            last = line
        if time.monotonic() > deadline:
            raise CliError(f"Audit {status['id']} still {status['state']} after {timeout:g}s")
        time.sleep(0.5)
        status = client.get_json(f"{AUDITS}" + path(status["id"]))
    sys.stderr.write(("\r" if tty else "") + progress_line(status) + "\n")
    if status["state"] == "FAILED":
        raise CliError(f"Audit {status['id']} failed: {status.get('error')}")
    return JsonResult(status)


@command(app, "audit-status")
def audit_status(ctx: typer.Context, audit_id: Annotated[str, positional("audit-id")],
                 output: Output = None) -> JsonResult:
    """State, progress and summary of a placement audit."""
    return JsonResult(admin(ctx).get_json(AUDITS + path(audit_id)))


@command(app, "audit-report")
def audit_report(ctx: typer.Context, audit_id: Annotated[str, positional("audit-id")],
                 output: Output = None) -> TextResult:
    """The HTML report of a finished audit (redirect it to a file and open it in a browser)."""
    return TextResult(admin(ctx).get_text(AUDITS + path(audit_id) + "/report"))
