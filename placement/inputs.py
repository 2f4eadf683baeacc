"""A ledger's sizes from a namespace's policy: persistence if set, else the broker defaults."""

from __future__ import annotations

from placement.config import PlacementConfig
from placement.model import EnsembleRequest


def default_request(
    persistence: EnsembleRequest | None, config: PlacementConfig
) -> EnsembleRequest:
    """E/Qw/Qa of a namespace's persistence policy, else `managedLedgerDefault*`."""
    if persistence is not None:
        return persistence
    return EnsembleRequest(
        config.managed_ledger_default_ensemble_size,
        config.managed_ledger_default_write_quorum,
        config.managed_ledger_default_ack_quorum,
    )


def with_sizes(
    base: EnsembleRequest,
    *,
    ensemble_size: int | None = None,
    write_quorum: int | None = None,
    ack_quorum: int | None = None,
) -> EnsembleRequest:
    """`base` with the sizes that are given replaced."""
    return EnsembleRequest(
        base.ensemble_size if ensemble_size is None else ensemble_size,
        base.write_quorum if write_quorum is None else write_quorum,
        base.ack_quorum if ack_quorum is None else ack_quorum,
        base.local_rack,
    )
