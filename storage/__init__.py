"""The embedded BookKeeper-like storage engine. Never imports `api`.

Its doors (import-linter holds the other packages to them):

    storage                   this package: the engine's assembly on the metadata store
                              (`build_ledger_client`, `build_managed_ledger_factory`), the local
                              bookie supervisor (`LocalBookies`, ports, `wait_registered`), the
                              runtime's GC modes, and what the service uses of a bookie server
                              (its settings check, GC request body, metrics rendering)
    storage.ledger            the broker-side ledger client and its errors
    storage.managed_ledger    topics as managed ledgers, Pulsar's message format
    storage.autorecovery      auditor, replication workers, checker, decommission, repair plans
    storage.bookie            the bookie package (`python -m storage.bookie`) and its client

Inside: `bookie/` (the bookie process: protocol, journal, entry logs, index, GC), `ledger/`,
`managed_ledger/`, `autorecovery/`, `engine.py` (assembly), `supervisor.py` (N local bookie
processes, restarted when they exit) and `runtime.py` (interpreter GC settings).

The names below are imported on first use (PEP 562), so `import storage` alone loads nothing
and a bookie process does not load the broker side.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from storage.bookie.gc import encode_force_request
    from storage.bookie.metrics import render as render_metrics
    from storage.bookie.service import FRAME_LIMIT_KEY, check_bookie_settings
    from storage.engine import build_ledger_client, build_managed_ledger_factory
    from storage.runtime import GC_DEFAULT, GC_MODES, set_gc
    from storage.supervisor import (
        FIRST_PORT,
        LocalBookie,
        LocalBookies,
        default_ports,
        free_ports,
        ports_for,
        wait_registered,
    )

# name -> (module, attribute)
_HOME = {
    "FIRST_PORT": ("storage.supervisor", "FIRST_PORT"),
    "GC_DEFAULT": ("storage.runtime", "GC_DEFAULT"),
    "GC_MODES": ("storage.runtime", "GC_MODES"),
    "LocalBookie": ("storage.supervisor", "LocalBookie"),
    "LocalBookies": ("storage.supervisor", "LocalBookies"),
    "build_ledger_client": ("storage.engine", "build_ledger_client"),
    "build_managed_ledger_factory": ("storage.engine", "build_managed_ledger_factory"),
    "check_bookie_settings": ("storage.bookie.service", "check_bookie_settings"),
    "FRAME_LIMIT_KEY": ("storage.bookie.service", "FRAME_LIMIT_KEY"),
    "default_ports": ("storage.supervisor", "default_ports"),
    "encode_force_request": ("storage.bookie.gc", "encode_force_request"),
    "free_ports": ("storage.supervisor", "free_ports"),
    "ports_for": ("storage.supervisor", "ports_for"),
    "render_metrics": ("storage.bookie.metrics", "render"),
    "set_gc": ("storage.runtime", "set_gc"),
    "wait_registered": ("storage.supervisor", "wait_registered"),
}

__all__ = [
    "FIRST_PORT",
    "FRAME_LIMIT_KEY",
    "GC_DEFAULT",
    "GC_MODES",
    "LocalBookie",
    "LocalBookies",
    "build_ledger_client",
    "build_managed_ledger_factory",
    "check_bookie_settings",
    "default_ports",
    "encode_force_request",
    "free_ports",
    "ports_for",
    "render_metrics",
    "set_gc",
    "wait_registered",
]


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'storage' has no attribute {name!r}")
    module, attribute = home
    return getattr(importlib.import_module(module), attribute)
