"""`pulsar-admin`'s console script (`cli.main:run`).

Start-up time is most of what a `pulsar-admin` call costs, so this module imports almost
nothing: `-v`/`--version` alone answers at once, the most common reads run without Typer
(`cli.fastpath`), and everything else loads the Typer app (`cli.app`).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

VERSION_FLAGS = (["-v"], ["--version"])


def main(args: Sequence[str] | None = None) -> int:
    """Run pulsar-admin with `args`; return the exit status (0, or 1 on any failure)."""
    argv = list(sys.argv[1:] if args is None else args)
    if argv in VERSION_FLAGS:
        from cli.version import version_line

        sys.stdout.write(version_line() + "\n")
        return 0
    from cli.fastpath import run as run_read

    status = run_read(argv)
    if status is not None:
        return status
    from cli.app import main as run_app

    return run_app(argv)


def run() -> None:
    """Console script entry point."""
    sys.exit(main())


__all__ = ["main", "run"]
