"""`python -m api tokens` end to end, and the server's TLS listener, with the real
`pulsar-admin` as a client: keys and tokens made by the tool, a server started with
authentication on (the token provider, then `AuthenticationProviderTls`: role = the client
certificate's CN) and `webServicePortTls`, a throwaway CA made here with `cryptography`.
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import io
import json
import ssl
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from api.auth.authentication import AuthenticationFailed, TlsAuthenticator
from api.auth.authorization import NEED_AUTHENTICATION, NEED_SUPER_USER
from api.auth.secrets import mask_text
from api.auth.tokens import run as run_tokens
from api.settings import TLS_PROVIDER, TOKEN_PROVIDER
from metastore.embedded import EmbeddedEtcd, free_port
from tests.cli.conftest import admin_error, clean_env, failed, ok, run_cli
from tests.factories import Pki, make_pki
from tests.support import REPO, RawEtcd, ServerProcess, wait_until

TOKEN_PLUGIN = "org.apache.pulsar.client.impl.auth.AuthenticationToken"
TLS_PLUGIN = "org.apache.pulsar.client.impl.auth.AuthenticationTls"
RACK = ["bookies", "set-bookie-rack", "-b", "b1:3181", "-r", "/r1"]
@dataclass(frozen=True)
class ToolRun:
    code: int
    out: str
    err: str


def tokens(*args: str) -> ToolRun:
    """The tool in-process (`python -m api tokens` is `api.auth.tokens.run`; one test runs that
    command line itself)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = run_tokens(list(args))
    return ToolRun(code, out.getvalue(), err.getvalue())


def tool_ok(*args: str) -> str:
    done = tokens(*args)
    assert done.code == 0, done.err
    return done.out.strip()


def trusting(pki: Pki) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(pki.ca))


@dataclass
class Secured:
    server: ServerProcess
    tls_url: str
    pki: Pki
    secret_file: Path
    admin_token: str


@pytest.fixture(scope="module")
def secured(etcd: EmbeddedEtcd, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    """Keys and a super-user token from the tool; the server with auth and TLS on."""
    directory = tmp_path_factory.mktemp("secured")
    secret_file = directory / "secret.key"
    tool_ok("create-secret-key", "--output", str(secret_file))
    admin_token = tool_ok("create", "--subject", "admin", "--secret-key", f"file://{secret_file}")
    pki = make_pki(directory, client_names=("client", "admin", "ops"))
    tls_port = free_port()
    conf = {
        "authenticationEnabled": "true",
        "authorizationEnabled": "true",
        "authenticationProviders": f"{TOKEN_PROVIDER},{TLS_PROVIDER}",
        "tokenSecretKey": f"file://{secret_file}",
        "superUserRoles": "admin",
        "initializeClusterMetadata": "false",
        "webServicePortTls": str(tls_port),
        "tlsCertificateFilePath": str(pki.server_cert),
        "tlsKeyFilePath": str(pki.server_key),
        "tlsTrustCertsFilePath": str(pki.ca),
    }

    class Server(ServerProcess):
        def _ready(self) -> bool:
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError((self.workdir / "server.log").read_text())
            got = httpx.get(
                f"{self.url}/admin/v2/clusters",
                headers={"Authorization": f"Bearer {admin_token}"},
                timeout=1,
            )
            return got.status_code == 200

    server = Server(etcd.url, directory / "server", extra_conf=conf).start()
    tls_url = f"https://localhost:{tls_port}"
    wait_until(
        lambda: httpx.get(f"{tls_url}/openapi.json", verify=trusting(pki)).status_code == 200
    )
    yield Secured(server, tls_url, pki, secret_file, admin_token)
    server.stop()


def test_python_m_api_tokens(tmp_path: Path) -> None:
    key = tmp_path / "secret.key"
    subprocess.run(
        [sys.executable, "-m", "api", "tokens", "create-secret-key", "--output", str(key)],
        check=True,
        cwd=REPO,
        timeout=60,
    )
    assert len(key.read_bytes()) == 32
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "api",
            "tokens",
            "create",
            "--subject",
            "ops",
            "--secret-key",
            f"file://{key}",
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
        timeout=60,
    )
    assert tool_ok("validate", "--secret-key", f"file://{key}", done.stdout.strip()) == "{sub=ops}"


def test_token_tool_round_trip(tmp_path: Path) -> None:
    secret = tool_ok("create-secret-key", "--base64")
    assert len(base64.b64decode(secret)) == 32
    key = f"data:;base64,{secret}"
    token = tool_ok("create", "--subject", "ops", "--secret-key", key)
    assert tool_ok("show", token) == '{"alg":"HS256"}\n---\n{"sub":"ops"}'
    assert tool_ok("validate", "--secret-key", key, token) == "{sub=ops}"
    other = tool_ok("create-secret-key", "--base64")
    refused = tokens("validate", "--secret-key", f"data:;base64,{other}", token)
    assert refused.code == 1 and token not in refused.err
    expiring = tool_ok("create", "--subject", "ops", "--expiry-time", "1h", "--secret-key", key)
    assert '"exp":' in tool_ok("show", expiring)
    for algorithm in ("RS256", "ES256"):
        private, public = tmp_path / f"{algorithm}.private", tmp_path / f"{algorithm}.public"
        tool_ok(
            "create-key-pair",
            "--signature-algorithm",
            algorithm,
            "--output-private-key",
            str(private),
            "--output-public-key",
            str(public),
        )
        serialization.load_der_public_key(public.read_bytes())  # DER, as Pulsar writes it
        signed = tool_ok("create", "--subject", "ops", "--private-key", f"file://{private}")
        assert tool_ok("show", signed).startswith(f'{{"alg":"{algorithm}"}}')
        assert tool_ok("validate", "--public-key", f"file://{public}", signed) == "{sub=ops}"


def test_cli_with_token_over_http_and_tls(secured: Secured, raw_etcd: RawEtcd) -> None:
    raw_etcd.wipe()
    auth = ["--auth-plugin", TOKEN_PLUGIN, "--auth-params", f"token:{secured.admin_token}"]
    tls = ["--tls-trust-cert-path", str(secured.pki.ca)]
    rack = ["bookies", "set-bookie-rack", "-b", "b1:3181", "-r", "/r1"]
    ok(run_cli("--admin-url", secured.server.url, *auth, *rack))
    ok(
        run_cli(
            "--admin-url",
            secured.tls_url,
            *auth,
            *tls,
            "bookies",
            "set-bookie-rack",
            "-b",
            "b2:3181",
            "-r",
            "/r2",
        )
    )
    assert raw_etcd.get_json("/bookies") == {
        "default": {"b1:3181": {"rack": "/r1"}, "b2:3181": {"rack": "/r2"}}
    }
    got = ok(
        run_cli(
            "--admin-url",
            secured.tls_url,
            *auth,
            *tls,
            "bookies",
            "get-bookie-rack",
            "-b",
            "b2:3181",
        )
    )
    assert '"rack" : "/r2"' in got
    # no token, and a token of a role that is not a super-user
    assert failed(run_cli("--admin-url", secured.tls_url, *tls, *rack)) == admin_error(
        NEED_AUTHENTICATION
    )
    ops = tool_ok("create", "--subject", "ops", "--secret-key", f"file://{secured.secret_file}")
    refused = failed(
        run_cli(
            "--admin-url",
            secured.tls_url,
            *tls,
            "--auth-plugin",
            TOKEN_PLUGIN,
            "--auth-params",
            f"token:{ops}",
            *rack,
        )
    )
    assert refused == admin_error("This operation requires super-user access")
    # a CA the client does not trust: the TLS handshake fails, nothing is sent
    untrusted = failed(run_cli("--admin-url", secured.tls_url, *auth, *rack))
    assert "certificate" in untrusted.lower()


def test_client_certificates_are_checked(secured: Secured) -> None:
    url = f"{secured.tls_url}/admin/v2/clusters"
    headers = {"Authorization": f"Bearer {secured.admin_token}"}
    context = ssl.create_default_context(cafile=str(secured.pki.ca))
    context.load_cert_chain(str(secured.pki.client_cert), str(secured.pki.client_key))
    assert httpx.get(url, headers=headers, verify=context).status_code == 200
    # a client certificate from another CA is refused in the handshake
    directory = secured.pki.ca.parent / "stranger"
    directory.mkdir(exist_ok=True)
    stranger = make_pki(directory)
    context = ssl.create_default_context(cafile=str(secured.pki.ca))
    context.load_cert_chain(str(stranger.client_cert), str(stranger.client_key))
    with pytest.raises(httpx.HTTPError):
        httpx.get(url, headers=headers, verify=context).raise_for_status()


def test_tokens_never_leave_the_server(secured: Secured) -> None:
    """Good and bad tokens, over HTTP and TLS, in paths that fail: none is in a log line or
    a response."""
    head, claims, signature = secured.admin_token.split(".")
    forged = f"{head}.{claims}.{signature[::-1]}"
    seen = []
    verify: ssl.SSLContext | bool
    for base, verify in ((secured.server.url, True), (secured.tls_url, trusting(secured.pki))):
        for token in (secured.admin_token, forged):
            for path in (
                "/admin/v2/clusters",
                "/admin/v2/bookies/racks-info/x:1?group=g",
                "/admin/v2/nothing-here",
            ):
                response = httpx.post(
                    f"{base}{path}",
                    headers={"Authorization": f"Bearer {token}"},
                    content=b"{not json",
                    verify=verify,
                )
                seen.append(response.text + str(response.headers))
    log = (secured.server.workdir / "server.log").read_text()
    assert "POST /admin/v2/clusters" in log  # the access log saw the requests
    for token in (secured.admin_token, forged):
        signature = token.rsplit(".", 1)[1]
        assert signature not in log
        assert all(signature not in text for text in seen)


def test_credentials_are_masked_in_log_text() -> None:
    jwt_text = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJvcHMifQ.c2lnbmF0dXJl-_x"
    for line in (
        f"Authorization: Bearer {jwt_text}",
        f"headers {{'authorization': 'bearer {jwt_text}'}}",
    ):
        masked = mask_text(line)
        assert jwt_text not in masked and "******" in masked




def cert_auth(pki: Pki, name: str) -> list[str]:
    cert, key = pki.clients[name]
    return ["--auth-plugin", TLS_PLUGIN, "--auth-params", f"tlsCertFile:{cert},tlsKeyFile:{key}"]


def test_the_role_is_the_client_certificates_common_name(
    secured: Secured, raw_etcd: RawEtcd, tmp_path: Path
) -> None:
    raw_etcd.wipe()
    trust = ["--tls-trust-cert-path", str(secured.pki.ca)]
    tls = ["--admin-url", secured.tls_url, *trust]
    ok(run_cli(*tls, *cert_auth(secured.pki, "admin"), *RACK))  # CN=admin: a super-user
    assert raw_etcd.get_json("/bookies") == {"default": {"b1:3181": {"rack": "/r1"}}}
    got = ok(run_cli(*tls, *cert_auth(secured.pki, "admin"), "bookies", "get-bookie-rack",
                     "-b", "b1:3181"))  # fmt: skip
    assert '"rack" : "/r1"' in got
    # CN=ops is authenticated but not a super-user; no certificate is not authenticated
    refused = failed(run_cli(*tls, *cert_auth(secured.pki, "ops"), *RACK))
    assert refused == admin_error(NEED_SUPER_USER)
    assert failed(run_cli(*tls, *RACK)) == admin_error(NEED_AUTHENTICATION)
    # over plain HTTP there is no handshake to present the certificate in
    plain = ["--admin-url", secured.server.url, *cert_auth(secured.pki, "admin")]
    assert failed(run_cli(*plain, *RACK)) == admin_error(NEED_AUTHENTICATION)
    # the token provider still works next to it
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        secret = f"file://{secured.secret_file}"
        assert run_tokens(["create", "--subject", "admin", "--secret-key", secret]) == 0
    token = ["--auth-plugin", TOKEN_PLUGIN, "--auth-params", f"token:{printed.getvalue().strip()}"]
    ok(run_cli(*tls, *token, "bookies", "get-bookie-rack", "-b", "b1:3181"))
    # a certificate from a CA the server does not trust fails the handshake
    stranger_dir = tmp_path / "stranger"
    stranger_dir.mkdir()
    stranger = make_pki(stranger_dir, client_names=("admin",))
    assert "certificate" in failed(run_cli(*tls, *cert_auth(stranger, "admin"), *RACK)).lower()


def test_client_conf_carries_the_tls_settings(secured: Secured, tmp_path: Path) -> None:
    cert, key = secured.pki.clients["admin"]
    conf = tmp_path / "client.conf"

    env = clean_env(PULSAR_CLIENT_CONF=str(conf))

    def run(**keys: str) -> str:
        conf.write_text("".join(f"{k}={v}\n" for k, v in keys.items()))
        return ok(run_cli("bookies", "racks-placement", env=env))

    params = json.dumps({"tlsCertFile": str(cert), "tlsKeyFile": str(key)})
    base = {"webServiceUrl": secured.tls_url, "authPlugin": TLS_PLUGIN, "authParams": params}
    run(**base, tlsTrustCertsFilePath=str(secured.pki.ca), tlsEnableHostnameVerification="true")
    run(**base, tlsAllowInsecureConnection="true")  # the server's CA not trusted, allowed
    # PulsarAdminBuilder's tlsCertificateFilePath / tlsKeyFilePath, without the plugin
    run(webServiceUrl=secured.tls_url, tlsTrustCertsFilePath=str(secured.pki.ca),
        tlsCertificateFilePath=str(cert), tlsKeyFilePath=str(key))  # fmt: skip
    conf.write_text(f"webServiceUrl={secured.tls_url}\nauthPlugin={TLS_PLUGIN}\nauthParams={params}\n")
    untrusted = failed(run_cli("bookies", "racks-placement", env=env))
    assert "certificate" in untrusted.lower()


def self_signed(*attributes: tuple[x509.ObjectIdentifier, str]) -> str:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(oid, value) for oid, value in attributes])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM).decode()


def test_tls_role_is_the_most_specific_common_name() -> None:
    provider = TlsAuthenticator()
    subject = [(NameOID.COUNTRY_NAME, "US"), (NameOID.ORGANIZATION_NAME, "Org")]
    assert provider.authenticate({}, self_signed(*subject, (NameOID.COMMON_NAME, "ops"))) == "ops"
    with pytest.raises(AuthenticationFailed):  # no CN
        provider.authenticate({}, self_signed(*subject))
    with pytest.raises(AuthenticationFailed):  # no certificate
        provider.authenticate({"authorization": "Bearer x"}, None)
