"""One module per `pulsar-admin` command group; `GROUPS` is what the root app mounts."""

from cli.commands import bookies

GROUPS = [bookies.app]

__all__ = ["GROUPS"]
