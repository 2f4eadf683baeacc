"""`pulsar-admin storage`: the storage engine's bookies (`/admin/v2/storage/...`, extensions).

One command per function; other storage commands join this group the same way."""

from __future__ import annotations

from typing import Annotated

import typer

from cli.client import V2, path
from cli.context import admin
from cli.framework import Output, command, new_group
from cli.output import JsonResult

app = new_group("storage", "Extension: the storage engine's bookies (state, start, stop)")

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
