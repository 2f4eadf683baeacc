"""Client settings: `client.conf` (a Java properties file) overlaid by global flags.

Which file: the Java tool gets `$PULSAR_CLIENT_CONF`, else `$PULSAR_HOME/conf/client.conf`,
from its launcher script (`bin/pulsar-admin`, with PULSAR_HOME defaulting to the
installation). Without a launcher we look, in order, for the first file that exists of
`$PULSAR_CLIENT_CONF` (given but missing is an error, as in Java), `$PULSAR_HOME/conf/client.conf`,
`./conf/client.conf` (running from an installation directory) and the installation's own
`conf/client.conf` (next to the `cli` package: the repository's `conf/`). With no file at all
the admin URL is `http://localhost:8080/`, what a Pulsar installation's client.conf says.

Keys are Pulsar's: `webServiceUrl` (falling back to the legacy `serviceUrl` when blank),
`authPlugin`, `authParams`, `tlsAllowInsecureConnection`, `tlsTrustCertsFilePath`,
`tlsEnableHostnameVerification`, `webserviceTlsProvider`, and `tlsCertificateFilePath` /
`tlsKeyFilePath` (a client certificate to present, PulsarAdminBuilder's settings of those names;
the `AuthenticationTls` plugin's own files win). A flag given on the command line wins over the
file.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import NamedTuple

from cli.errors import ConfigError
from javaformats import parse_properties

CONF_ENV = "PULSAR_CLIENT_CONF"
HOME_ENV = "PULSAR_HOME"
DEFAULT_CONF = Path("conf/client.conf")
INSTALL_CONF = Path(__file__).resolve().parent.parent / DEFAULT_CONF
DEFAULT_ADMIN_URL = "http://localhost:8080/"
DEFAULT_REQUEST_TIMEOUT_SECONDS = 300  # PulsarAdminImpl.DEFAULT_REQUEST_TIMEOUT_SECONDS


class ClientConfig(NamedTuple):
    admin_url: str | None = None
    auth_plugin: str | None = None
    auth_params: str | None = None
    tls_allow_insecure: bool = False
    tls_trust_cert_path: str | None = None
    tls_enable_hostname_verification: bool = False
    tls_provider: str | None = None
    request_timeout: int = DEFAULT_REQUEST_TIMEOUT_SECONDS
    tls_cert_file: str | None = None
    tls_key_file: str | None = None


class GlobalFlags(NamedTuple):
    """The global options as typed; None means "not given" (so the file's value stays)."""

    admin_url: str | None = None
    auth_plugin: str | None = None
    auth_params: str | None = None
    tls_allow_insecure: bool | None = None
    tls_trust_cert_path: str | None = None
    tls_enable_hostname_verification: bool | None = None
    tls_provider: str | None = None
    request_timeout: int | None = None


def conf_path(
    env: Mapping[str, str], cwd: Path, install_conf: Path | None = INSTALL_CONF
) -> Path | None:
    """The client.conf to read (see the module docstring); None when there is none."""
    configured = env.get(CONF_ENV)
    if configured:
        return Path(configured)
    home = env.get(HOME_ENV)
    candidates = [Path(home) / DEFAULT_CONF] if home else []
    candidates.append(cwd / DEFAULT_CONF)
    if install_conf is not None:
        candidates.append(install_conf)
    return next((path for path in candidates if path.is_file()), None)


def read_conf(path: Path | None) -> dict[str, str]:
    if path is None:
        return {}
    try:
        return parse_properties(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{path} ({exc.strerror or exc})") from exc


def _flag(value: bool | None, properties: Mapping[str, str], key: str) -> bool:
    if value is not None:
        return value
    return properties.get(key, "false").strip().lower() == "true"


def _text(value: str | None, properties: Mapping[str, str], *keys: str) -> str | None:
    if value is not None and value.strip():
        return value
    for key in keys:
        found = properties.get(key, "").strip()
        if found:
            return found
    return None


def resolve(flags: GlobalFlags, properties: Mapping[str, str]) -> ClientConfig:
    """The settings in effect: each flag given on the command line over the file's key."""
    return ClientConfig(
        admin_url=_text(flags.admin_url, properties, "webServiceUrl", "serviceUrl"),
        auth_plugin=_text(flags.auth_plugin, properties, "authPlugin"),
        auth_params=_text(flags.auth_params, properties, "authParams"),
        tls_allow_insecure=_flag(
            flags.tls_allow_insecure, properties, "tlsAllowInsecureConnection"
        ),
        tls_trust_cert_path=_text(flags.tls_trust_cert_path, properties, "tlsTrustCertsFilePath"),
        tls_enable_hostname_verification=_flag(
            flags.tls_enable_hostname_verification, properties, "tlsEnableHostnameVerification"
        ),
        tls_provider=_text(flags.tls_provider, properties, "webserviceTlsProvider"),
        request_timeout=(
            flags.request_timeout
            if flags.request_timeout is not None
            else DEFAULT_REQUEST_TIMEOUT_SECONDS
        ),
        tls_cert_file=_text(None, properties, "tlsCertificateFilePath"),
        tls_key_file=_text(None, properties, "tlsKeyFilePath"),
    )


def load(
    flags: GlobalFlags, env: Mapping[str, str], cwd: Path, install_conf: Path | None = INSTALL_CONF
) -> ClientConfig:
    path = conf_path(env, cwd, install_conf)
    properties = {"webServiceUrl": DEFAULT_ADMIN_URL} if path is None else read_conf(path)
    return resolve(flags, properties)


__all__ = [
    "CONF_ENV",
    "DEFAULT_ADMIN_URL",
    "DEFAULT_REQUEST_TIMEOUT_SECONDS",
    "HOME_ENV",
    "INSTALL_CONF",
    "ClientConfig",
    "GlobalFlags",
    "conf_path",
    "load",
    "read_conf",
    "resolve",
]
