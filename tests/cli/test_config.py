"""client.conf parsing and precedence (file < flags), and auth headers."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from cli.auth import auth_headers
from cli.config import (
    INSTALL_CONF,
    ClientConfig,
    GlobalFlags,
    conf_path,
    load,
    resolve,
)
from cli.errors import ConfigError

TOKEN = "org.apache.pulsar.client.impl.auth.AuthenticationToken"


def test_file_values_apply_when_no_flag() -> None:
    config = resolve(GlobalFlags(), {
        "webServiceUrl": "http://conf:8080/", "authPlugin": TOKEN, "authParams": "token:t",
        "tlsAllowInsecureConnection": "true", "tlsTrustCertsFilePath": "/ca.pem",
        "tlsEnableHostnameVerification": "TRUE"})  # fmt: skip
    assert config == ClientConfig(
        admin_url="http://conf:8080/", auth_plugin=TOKEN, auth_params="token:t",
        tls_allow_insecure=True, tls_trust_cert_path="/ca.pem",
        tls_enable_hostname_verification=True)  # fmt: skip


def test_flags_win_over_file() -> None:
    flags = GlobalFlags(admin_url="http://flag:1/", auth_params="token:f", request_timeout=7,
                        tls_allow_insecure=False)  # fmt: skip
    config = resolve(flags, {"webServiceUrl": "http://conf/", "authParams": "token:c",
                             "tlsAllowInsecureConnection": "true"})  # fmt: skip
    assert config.admin_url == "http://flag:1/"
    assert config.auth_params == "token:f"
    assert config.request_timeout == 7
    assert config.tls_allow_insecure is False


def test_legacy_service_url_fallback_and_defaults() -> None:
    assert resolve(GlobalFlags(), {"webServiceUrl": " ", "serviceUrl": "http://old/"}).admin_url \
        == "http://old/"  # fmt: skip
    assert resolve(GlobalFlags(), {}) == ClientConfig()
    assert ClientConfig().request_timeout == 300


def test_conf_location(tmp_path: Path) -> None:
    """$PULSAR_CLIENT_CONF, $PULSAR_HOME/conf, ./conf, the installation's conf; else the
    default URL."""
    install = tmp_path / "install.conf"
    assert conf_path({}, tmp_path, install) is None
    assert load(GlobalFlags(), {}, tmp_path, install).admin_url == "http://localhost:8080/"
    install.write_text("webServiceUrl=http://install-conf/\n")
    assert load(GlobalFlags(), {}, tmp_path, install).admin_url == "http://install-conf/"
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "client.conf").write_text("webServiceUrl=http://default-conf/\n")
    assert load(GlobalFlags(), {}, tmp_path, install).admin_url == "http://default-conf/"
    home = tmp_path / "home"
    (home / "conf").mkdir(parents=True)
    (home / "conf" / "client.conf").write_text("webServiceUrl=http://home-conf/\n")
    env = {"PULSAR_HOME": str(home)}
    assert load(GlobalFlags(), env, tmp_path, install).admin_url == "http://home-conf/"
    other = tmp_path / "other.conf"
    other.write_text("webServiceUrl=http://env-conf/\n")
    env["PULSAR_CLIENT_CONF"] = str(other)
    assert load(GlobalFlags(), env, tmp_path, install).admin_url == "http://env-conf/"
    with pytest.raises(ConfigError, match=r"missing\.conf"):
        load(GlobalFlags(), {"PULSAR_CLIENT_CONF": str(tmp_path / "missing.conf")}, tmp_path)


def test_the_shipped_client_conf_points_at_make_run() -> None:
    assert INSTALL_CONF.is_file()
    assert load(GlobalFlags(), {}, INSTALL_CONF.parent).admin_url == "http://localhost:8080/"


def test_token_auth_headers(tmp_path: Path) -> None:
    assert auth_headers(TOKEN, "token:abc.def") == {"Authorization": "Bearer abc.def"}
    token_file = tmp_path / "token.jwt"
    token_file.write_text("  from.file.jwt\n")
    assert auth_headers(TOKEN, f"file://{token_file}") == {"Authorization": "Bearer from.file.jwt"}
    assert auth_headers(TOKEN, '{"token":"json.jwt"}') == {"Authorization": "Bearer json.jwt"}
    assert auth_headers("AuthenticationToken", "bare.jwt") == {"Authorization": "Bearer bare.jwt"}
    with pytest.raises(ConfigError, match="Failed to read token"):
        auth_headers(TOKEN, f"file://{tmp_path}/absent")


def test_basic_auth_and_no_auth() -> None:
    expected = "Basic " + base64.b64encode(b"alice:secret").decode()
    basic = "org.apache.pulsar.client.impl.auth.AuthenticationBasic"
    assert auth_headers(basic, '{"userId":"alice","password":"secret"}') == {
        "Authorization": expected
    }
    assert auth_headers(None, "token:ignored") == {}
    with pytest.raises(ConfigError, match="Unsupported authentication plugin"):
        auth_headers("com.example.Kerberos", "x")
