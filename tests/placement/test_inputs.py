from placement import EnsembleRequest, PlacementConfig, default_request, with_sizes


def test_persistence_wins_over_the_broker_defaults() -> None:
    cfg = PlacementConfig(managed_ledger_default_ensemble_size=4,
                          managed_ledger_default_write_quorum=3,
                          managed_ledger_default_ack_quorum=2)  # fmt: skip
    assert default_request(None, cfg) == EnsembleRequest(4, 3, 2)
    assert default_request(EnsembleRequest(5, 5, 3), cfg) == EnsembleRequest(5, 5, 3)


def test_with_sizes_replaces_only_what_is_given() -> None:
    base = EnsembleRequest(5, 3, 2)
    assert with_sizes(base) == base
    assert with_sizes(base, write_quorum=2, ack_quorum=1) == EnsembleRequest(5, 2, 1)
