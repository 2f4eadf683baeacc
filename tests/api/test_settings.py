"""Settings: broker.conf names; file < environment < flags; bad values refused at start."""

from __future__ import annotations

from pathlib import Path

import pytest

from api.auth.secrets import MASK, mask_text, masked_config
from api.settings import SettingsError, load_settings


def write_conf(tmp_path: Path, text: str) -> Path:
    conf = tmp_path / "broker.conf"
    conf.write_text(text)
    return conf


def test_defaults_match_pulsar() -> None:
    settings = load_settings(environ={})
    assert settings.bookkeeperClientRackawarePolicyEnabled is True
    assert settings.bookkeeperClientRegionawarePolicyEnabled is False
    assert settings.managedLedgerDefaultEnsembleSize == 2
    assert settings.managedLedgerMaxEnsembleSize == 5
    assert settings.webServicePort == 8080
    assert settings.strictBookieAffinityEnabled is False


def test_file_then_environment_then_flags(tmp_path: Path) -> None:
    conf = write_conf(
        tmp_path,
        "# comment\nclusterName=from-file\nwebServicePort=9000\n"
        "bookkeeperClientRegionawarePolicyEnabled=true\nsomeUnknownKey=kept\n",
    )
    env = {"PULSAR_clusterName": "from-env", "PULSAR_WEBSERVICEPORT": "9001", "HOME": "/x"}
    settings = load_settings(conf, environ=env, flags={"clusterName": "from-flag"})
    assert settings.clusterName == "from-flag"
    assert settings.webServicePort == 9001
    assert settings.bookkeeperClientRegionawarePolicyEnabled is True
    assert settings.extra == {"someUnknownKey": "kept"}


def test_list_settings_are_comma_separated(tmp_path: Path) -> None:
    conf = write_conf(tmp_path, "superUserRoles=admin, ops ,\n")
    assert load_settings(conf, environ={}).superUserRoles == ("admin", "ops")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("webServicePort=eighty\n", "invalid value for webServicePort"),
        ("strictBookieAffinityEnabled=yes\n", "invalid value for strictBookieAffinityEnabled"),
        ("justakey\n", "expected key=value"),
        ("managedLedgerDefaultEnsembleSize=1\nmanagedLedgerDefaultWriteQuorum=2\n", ">="),
    ],
)
def test_bad_settings_are_refused(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(SettingsError, match=message):
        load_settings(write_conf(tmp_path, text), environ={})


def test_runtime_configuration_is_all_text_and_masks_secrets(tmp_path: Path) -> None:
    conf = write_conf(
        tmp_path,
        "brokerClientTlsTrustStorePassword=pw1\ntokenSecretKey=data:;base64,c2VjcmV0\n"
        "brokerClientAuthenticationParameters=token:abc\n"
        "bookkeeperClientAuthenticationParameters={\"a\":1}\nfoo=bar\n",
    )
    runtime = masked_config(load_settings(conf, environ={}).runtime_configuration())
    assert runtime["clusterName"] == "standalone"
    assert runtime["bookkeeperClientRackawarePolicyEnabled"] == "true"
    assert runtime["foo"] == "bar"
    for key in (
        "brokerClientTlsTrustStorePassword",
        "tokenSecretKey",
        "brokerClientAuthenticationParameters",
        "bookkeeperClientAuthenticationParameters",
    ):
        assert runtime[key] == MASK


def test_log_lines_mask_secrets_and_are_cut() -> None:
    line = mask_text('tokenSecretKey=abc authParams: "token:xyz" rack=/r1 ' + "x" * 5000)
    assert "abc" not in line and "xyz" not in line and "rack=/r1" in line
    assert len(line) < 1100


def test_log_masking_scans_a_long_line_in_linear_time() -> None:
    """A 300,000-character path of word characters (as a lookup of a huge broker id logs it)
    used to cost the masking regex a quadratic backtrack on the event loop; now it is cut
    before it is scanned and the scan is linear (pytest-timeout fails the quadratic one)."""
    for line in ("b" * 300_000 + "x", "token" * 60_000 + "=x", ("a=b " * 100_000)):
        masked = mask_text(line)
        assert masked.endswith("more chars)") and len(masked) < 1100
    assert mask_text("Authorization: Bearer eyJabc.def") == "Authorization: ******"


def test_auto_recovery_keys_are_read_once_with_bookkeepers_defaults() -> None:
    settings = load_settings(environ={}, flags={"lostBookieRecoveryDelay": "30"})
    assert settings.autorecovery.lostBookieRecoveryDelay == 30
    assert settings.autorecovery.auditorPeriodicBookieCheckInterval == 86400
    runtime = settings.runtime_configuration()
    assert (runtime["lostBookieRecoveryDelay"], runtime["autoRecoveryDaemonEnabled"]) == (
        "30", "false")  # fmt: skip
    with pytest.raises(SettingsError, match="rereplicationEntryBatchSize"):
        load_settings(environ={}, flags={"rereplicationEntryBatchSize": "0"})
