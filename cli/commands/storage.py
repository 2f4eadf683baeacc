"""`pulsar-admin storage`: the storage engine's bookies and the placement audit of the live
cluster (extension paths under `/admin/v2/storage/...`), and its auto-recovery over BookKeeper's
own HTTP admin paths (`/api/v1/autorecovery/...`): under-replicated ledgers, audit trigger, the
elected auditor; and the bookies' forced garbage collection (`/api/v1/bookie/gc`).

One command per function; other storage commands join this group the same way."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Annotated, Any

import typer

from cli.client import V2, path
from cli.context import admin
from cli.errors import AdminError, CliError
from cli.framework import Output, command, new_group, positional
from cli.output import JsonResult, LinesResult, TextResult

app = new_group(
    "storage", "Extension: the storage engine's bookies, auto-recovery and placement audit"
)

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


def bar(share: float) -> str:
    share = min(max(share, 0.0), 1.0)
    filled = int(share * _BAR)
    return f"[{'#' * filled}{'.' * (_BAR - filled)}] {share * 100:3.0f}%"


def wait_for(fetch: Callable[[], dict[str, Any]], status: dict[str, Any],
             line: Callable[[dict[str, Any]], str], finished: Callable[[dict[str, Any]], bool],
             timeout: float, what: str) -> dict[str, Any]:
    """Poll until `finished`, a progress line on stderr (rewritten in place on a terminal)."""
    tty = sys.stderr.isatty()
    deadline = time.monotonic() + timeout
    last = ""
    while not finished(status):
        shown = line(status)
        if shown != last:
            sys.stderr.write(f"\r{shown}" if tty else shown + "\n")
            sys.stderr.flush()
            last = shown
        if time.monotonic() > deadline:
            raise CliError(f"{what} still {status.get('state')} after {timeout:g}s")
        time.sleep(0.5)
        status = fetch()
    sys.stderr.write(("\r" if tty else "") + line(status) + "\n")
    return status


def decommission_line(status: dict[str, Any]) -> str:
    """`[######......] 40% RUNNING: moving ledgers (4/10 ledgers moved, 1 stuck)`."""
    total = int(status.get("ledgersTotal") or 0)
    moved = int(status.get("ledgersMoved") or 0)
    share = 1.0 if status.get("state") == "DONE" else (moved / total if total else 0.0)
    stuck = len(status.get("stuck") or {})
    return (f"{bar(share)} {status.get('state')}: {status.get('stage')} "
            f"({moved}/{total} ledgers moved, {stuck} stuck)")


@command(app, "decommission")
def decommission(
    ctx: typer.Context,
    bookie: Annotated[str, positional("bookie-id")],
    wait: Annotated[bool, typer.Option("--wait", help="Wait until the bookie is removed, "
                                                      "with a progress bar on stderr; exit "
                                                      "1 if ledgers cannot move")] = False,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds to wait at most with "
                                                             "--wait")] = 3600.0,
    output: Output = None,
) -> JsonResult:  # fmt: skip
    """Extension: decommission a bookie (BookKeeper's `decommissionbookie`): read-only, every
    ledger fragment copied to bookies its recorded policy accepts, then removed. Prints the
    decommission's state, or with --wait its final state (exit 1 when BLOCKED: some ledger
    cannot move, each with its reason)."""
    client = admin(ctx)
    status = client.request("DELETE", BOOKIES + path(bookie)).json()
    if not wait:
        return JsonResult(status)
    progress = BOOKIES + path(bookie) + "/decommission"
    status = wait_for(lambda: client.get_json(progress), status, decommission_line,
                      lambda s: s.get("state") in ("DONE", "BLOCKED"), timeout,
                      f"Decommission of {bookie}")
    if status["state"] == "BLOCKED":
        reasons = "; ".join(f"ledger {k}: {v}" for k, v in (status.get("stuck") or {}).items())
        raise CliError(f"Decommission of {bookie} is blocked: {reasons}")
    return JsonResult(status)


@command(app, "decommission-status")
def decommission_status(ctx: typer.Context, bookie: Annotated[str, positional("bookie-id")],
                        output: Output = None) -> JsonResult:
    """Extension: progress of a bookie's decommission, with the reason for each ledger that
    cannot move."""
    return JsonResult(admin(ctx).get_json(BOOKIES + path(bookie) + "/decommission"))


def progress_line(status: dict[str, Any]) -> str:
    """`[######......] 40% AUDIT: judging fragments (1200 ledgers read)`."""
    return (f"{bar(float(status.get('progress') or 0.0))} "
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


def repair_line(repair: dict[str, Any]) -> str:
    """`[######......] 40% RUNNING: 4/10 moves (3 applied, 1 skipped, 0 failed)`."""
    moves = int(repair.get("moves") or 0)
    applied = int(repair.get("applied") or 0)
    skipped, failed = len(repair.get("skipped") or []), len(repair.get("failed") or [])
    done = applied + skipped + failed
    share = 1.0 if repair.get("state") == "DONE" else (done / moves if moves else 0.0)
    return (f"{bar(share)} {repair.get('state')}: {done}/{moves} moves ({applied} applied, "
            f"{skipped} skipped, {failed} failed)")


@command(app, "audit-repair")
def audit_repair(
    ctx: typer.Context,
    audit_id: Annotated[str, positional("audit-id")],
    wait: Annotated[bool, typer.Option("--wait", help="Wait for the repair to finish, with "
                                                      "a progress bar on stderr; exit 1 if "
                                                      "a move failed")] = False,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds to wait at most with "
                                                             "--wait")] = 3600.0,
    output: Output = None,
) -> JsonResult:  # fmt: skip
    """Extension: hand a finished audit's repair plan to the replication workers (each move
    re-checked against the live cluster and the ledger's recorded policy; stale ones skipped
    with a reason). Prints the repair's counts, or with --wait its final state."""
    client = admin(ctx)
    url = AUDITS + path(audit_id)
    repair = client.request("POST", url + "/repair").json()
    if not wait:
        return JsonResult(repair)
    repair = wait_for(lambda: client.get_json(url).get("repair") or {}, repair, repair_line,
                      lambda r: r.get("state") == "DONE", timeout,
                      f"Repair of audit {audit_id}")
    if repair.get("failed"):
        reasons = "; ".join(f"ledger {f['ledgerId']} segment {f['segment']}: {f['reason']}"
                            for f in repair["failed"])
        raise CliError(f"Repair of audit {audit_id}: moves failed: {reasons}")
    return JsonResult(repair)


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


GC = "/api/v1/bookie/gc"


@command(app, "gc")
def gc(
    ctx: typer.Context,
    force_major: Annotated[bool | None, typer.Option(
        "--force-major/--no-force-major",
        help="Run (or skip) major compaction; give both flags or neither")] = None,
    force_minor: Annotated[bool | None, typer.Option(
        "--force-minor/--no-force-minor",
        help="Run (or skip) minor compaction; give both flags or neither")] = None,
    output: Output = None,
) -> TextResult:  # fmt: skip
    """Force a garbage collection on every bookie (BookKeeper's `PUT /api/v1/bookie/gc`):
    deleted ledgers dropped, entry logs with nothing live deleted, compaction now. Without
    flags the bookies' disk-pressure suspensions hold."""
    if (force_major is None) != (force_minor is None):
        raise CliError("Give both --[no-]force-major and --[no-]force-minor, or neither")
    body = None if force_major is None else {"forceMajor": force_major,
                                             "forceMinor": force_minor}
    response = admin(ctx).request("PUT", GC, json_body=body)
    return TextResult(response.text)


@command(app, "gc-status")
def gc_status(ctx: typer.Context, output: Output = None) -> JsonResult:
    """Whether a forced garbage collection is running on any bookie (`is_in_force_gc`)."""
    return JsonResult(admin(ctx).get_json(GC))
