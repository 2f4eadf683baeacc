"""The common reads without Typer: `pulsar-admin [--admin-url URL] <group> <command> [args]`
for the commands of `READS`, given exactly their positional arguments and no option.

Importing Typer alone costs about twice the start-up of the interpreter itself, so a script
that calls `pulsar-admin clusters list` in a loop would spend most of its time there. Such a
command line is recognised here and run with the same bodies (`cli.reads`), the same client,
the same output writer and the same error report as the Typer command; anything else (help,
another option, a wrong argument count, an argument that looks like an option, a parameter
error that prints usage) is left to the Typer app, which stays the one definition of the
command line. `tests/cli/test_fastpath.py` checks both paths print the same bytes.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from cli import reads
from cli.client import AdminClient
from cli.config import GlobalFlags, load
from cli.errors import ParameterError, report
from cli.output import OutputFormat, Result, write

ADMIN_URL = "--admin-url"

# (group, command) -> (number of positional arguments, body)
READS: dict[tuple[str, str], tuple[int, Callable[..., Result]]] = {
    ("bookies", "list-bookies"): (0, reads.list_bookies),
    ("bookies", "racks-placement"): (0, reads.racks_placement),
    ("brokers", "list"): (1, reads.list_brokers),
    ("clusters", "get"): (1, reads.get_cluster),
    ("clusters", "list"): (0, reads.list_clusters),
    ("namespaces", "get-clusters"): (1, reads.namespace_clusters),
    ("namespaces", "list"): (1, reads.list_namespaces),
    ("namespaces", "policies"): (1, reads.namespace_policies),
    ("tenants", "get"): (1, reads.get_tenant),
    ("tenants", "list"): (0, reads.list_tenants),
}


def parse(argv: Sequence[str]) -> tuple[str | None, Callable[..., Result], list[str]] | None:
    """(admin URL flag, body, positional arguments), or None for the Typer app."""
    rest = list(argv)
    admin_url = None
    if rest[:1] == [ADMIN_URL] and len(rest) >= 2:
        admin_url, rest = rest[1], rest[2:]
    elif rest and rest[0].startswith(ADMIN_URL + "="):
        admin_url, rest = rest[0].partition("=")[2], rest[1:]
    if len(rest) < 2 or (rest[0], rest[1]) not in READS:
        return None
    count, body = READS[(rest[0], rest[1])]
    args = rest[2:]
    if len(args) != count or any(arg.startswith("-") or not arg for arg in args):
        return None
    return admin_url, body, args


def run(argv: Sequence[str]) -> int | None:
    """Run `argv` if it is one of the reads; the exit status, or None to use the Typer app."""
    parsed = parse(argv)
    if parsed is None:
        return None
    admin_url, body, args = parsed
    try:
        client = AdminClient(load(GlobalFlags(admin_url=admin_url), os.environ, Path.cwd()))
        result = body(client, *args)
    except ParameterError:
        return None  # the Typer app prints it with the command's usage
    except Exception as exc:
        return report(exc, sys.stderr)
    write(result, OutputFormat.pulsar, sys.stdout)
    return 0


__all__ = ["READS", "parse", "run"]
