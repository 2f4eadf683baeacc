import pytest

from placement import InvalidPlacementRequest, PlacementConfig, PlacementMode


def test_from_broker_conf_reads_pulsar_keys() -> None:
    cfg = PlacementConfig.from_broker_conf({
        "bookkeeperClientRackawarePolicyEnabled": "true",
        "bookkeeperClientRegionawarePolicyEnabled": "true",
        "bookkeeperClientMinNumRacksPerWriteQuorum": "3",
        "bookkeeperClientEnforceMinNumRacksPerWriteQuorum": "true",
        "bookkeeperDiskWeightBasedPlacementEnabled": True,
        "bookkeeperClientIsolationGroups": "a, b",
        "bookkeeperClientSecondaryIsolationGroups": "c",
        "strictBookieAffinityEnabled": "false",
        "managedLedgerDefaultEnsembleSize": "3",
        "managedLedgerDefaultWriteQuorum": "3",
        "managedLedgerDefaultAckQuorum": "2",
        "unrelatedKey": "x",
    })
    assert cfg.mode is PlacementMode.REGION
    assert cfg.min_num_racks_per_write_quorum == 3 and cfg.enforce_min_num_racks_per_write_quorum
    assert cfg.disk_weight_based_placement_enabled
    assert cfg.isolation_groups == ("a", "b") and cfg.secondary_isolation_groups == ("c",)
    assert cfg.managed_ledger_default_ensemble_size == 3


def test_defaults_are_pulsars() -> None:
    cfg = PlacementConfig()
    assert cfg.mode is PlacementMode.RACK and cfg.min_num_racks_per_write_quorum == 2
    assert not cfg.enforce_min_num_racks_per_write_quorum
    assert cfg.managed_ledger_default_write_quorum == 2


def test_bad_values_raise() -> None:
    with pytest.raises(InvalidPlacementRequest):
        PlacementConfig.from_broker_conf({"bookkeeperClientMinNumRacksPerWriteQuorum": "two"})
    with pytest.raises(InvalidPlacementRequest):
        PlacementConfig.from_broker_conf({"strictBookieAffinityEnabled": "yes"})
    with pytest.raises(InvalidPlacementRequest):
        PlacementConfig(min_num_zones_per_write_quorum=4, desired_num_zones_per_write_quorum=3)
