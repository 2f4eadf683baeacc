"""`pulsar-admin brokers`: the active brokers of a cluster (`/admin/v2/brokers`)."""

from __future__ import annotations

from typing import Annotated

import typer

from cli import reads
from cli.context import admin
from cli.framework import Output, command, new_group, positional
from cli.output import LinesResult

app = new_group("brokers", "Operations about brokers")

Cluster = Annotated[str, positional("cluster-name")]


@command(app, "list")
def list_brokers(ctx: typer.Context, cluster: Cluster, output: Output = None) -> LinesResult:
    """List active brokers of the cluster, one `host:port` web-service address per line."""
    return reads.list_brokers(admin(ctx), cluster)
