"""`pulsar-admin changes`: the change history of admin writes (extension path
`/admin/v2/changes`; super-user when authorization is on)."""

from __future__ import annotations

from typing import Annotated

import typer

from cli.client import V2
from cli.context import admin
from cli.framework import Output, command, new_group
from cli.output import JsonResult

app = new_group("changes", "Extension: the change history of admin writes")

Since = Annotated[
    int,
    typer.Option(
        "--since", min=0,
        help="Only changes at etcd revisions after this one (the last `revision` seen).",
    ),
]  # fmt: skip
Prefix = Annotated[
    str,
    typer.Option(
        "--prefix",
        help="Only changes whose request path or a changed metadata key starts with it, "
        "e.g. /bookies or /admin/clusters/c1.",
    ),
]  # fmt: skip
Limit = Annotated[int, typer.Option("--limit", min=1, max=10000, help="At most this many.")]


@command(app, "list")
def list_changes(
    ctx: typer.Context,
    since: Since = 0,
    prefix: Prefix = "",
    limit: Limit = 1000,
    output: Output = None,
) -> JsonResult:
    """Extension: the recorded admin writes, oldest first: etcd revision, time (ms since the
    epoch), role, client address, method, path and each stored document before and after."""
    params: dict[str, str] = {"since": str(since), "limit": str(limit)}
    if prefix:
        params["prefix"] = prefix
    return JsonResult(admin(ctx).get_json(f"{V2}/changes", params=params) or [])
