"""`pulsar-admin --version`: the installed distribution's version.

Read from the name of the distribution's `.dist-info` directory on `sys.path` (what pip
installs, editable installs included): importing `importlib.metadata` to ask would cost as
much as the interpreter's own start-up. `importlib.metadata` remains the fallback.
"""

from __future__ import annotations

import os
import sys

DISTRIBUTION = "pulsar-isolation"
_PREFIX = DISTRIBUTION.replace("-", "_") + "-"
_SUFFIX = ".dist-info"


def package_version() -> str:
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        for name in names:
            if name.startswith(_PREFIX) and name.endswith(_SUFFIX):
                return name[len(_PREFIX) : -len(_SUFFIX)]
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:
        return "unknown"


def version_line() -> str:
    return f"Current version of pulsar admin client is: {package_version()}"


__all__ = ["package_version", "version_line"]
