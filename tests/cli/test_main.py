"""The root app as a subprocess: global options, client.conf, auth headers, exit codes,
connection errors and shell completion."""

from __future__ import annotations

import ast
import importlib.metadata
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from metastore.embedded import free_port
from tests.cli.conftest import clean_env, failed, ok, run_cli
from tests.support import ServerProcess, parse_source

CLI_DIR = Path(__file__).resolve().parents[2] / "cli"
TOKEN_PLUGIN = "org.apache.pulsar.client.impl.auth.AuthenticationToken"


class Recorder(ThreadingHTTPServer):
    """A tiny admin endpoint that records each request's headers and answers `/bookies/all`."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), RecordingHandler)
        self.requests: list[dict[str, str]] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class RecordingHandler(BaseHTTPRequestHandler):
    server: Recorder

    def do_GET(self) -> None:
        self.server.requests.append({"path": self.path, **dict(self.headers.items())})
        body = json.dumps({"bookies": []}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    server = Recorder()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join()


# -- pure client ------------------------------------------------------------------------------


def test_cli_imports_nothing_from_the_service_side() -> None:
    forbidden = {"api", "storage", "metastore", "placement", "pipeline"}
    for source in CLI_DIR.rglob("*.py"):
        tree = parse_source(source)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            else:
                continue
            for name in names:
                assert name.split(".")[0] not in forbidden, f"{source}: imports {name}"


def test_package_declares_its_public_surface() -> None:
    import cli
    import cli.commands

    assert cli.__all__ == []
    assert cli.commands.__all__ == ["GROUPS"]


# -- global options and exit codes --------------------------------------------------------------


def test_version(tmp_path: Path) -> None:
    installed = importlib.metadata.version("pulsar-isolation")
    for flag in ("-v", "--version"):
        out = ok(run_cli(flag, cwd=tmp_path))
        assert out == f"Current version of pulsar admin client is: {installed}\n"


def test_help_exits_0_and_no_command_exits_1(tmp_path: Path) -> None:
    assert "Usage: pulsar-admin [OPTIONS] COMMAND [ARGS]..." in ok(run_cli("-h", cwd=tmp_path))
    assert "--admin-url" in ok(run_cli("--help", cwd=tmp_path))
    bare = run_cli(cwd=tmp_path)
    assert bare.code == 1 and "Usage: pulsar-admin" in bare.out
    group = run_cli("bookies", cwd=tmp_path)
    assert group.code == 1 and "set-bookie-rack" in group.out
    sub_help = ok(run_cli("bookies", "set-bookie-rack", "-h", cwd=tmp_path))
    assert "-hn, --hostname" in sub_help and "[default: default]" in sub_help


def test_usage_errors_exit_1(tmp_path: Path) -> None:
    assert "No such command 'nope'" in failed(run_cli("nope", cwd=tmp_path))
    err = failed(run_cli("bookies", "list-bookies", "--bogus", cwd=tmp_path))
    assert "No such option: --bogus" in err
    err = failed(run_cli("--request-timeout", "x", "bookies", "list-bookies", cwd=tmp_path))
    assert "Invalid value for '--request-timeout'" in err


def test_no_admin_url(tmp_path: Path) -> None:
    conf = tmp_path / "client.conf"
    conf.write_text("webServiceUrl=\nserviceUrl=\n")
    env = clean_env(PULSAR_CLIENT_CONF=str(conf))
    assert failed(run_cli("bookies", "list-bookies", env=env, cwd=tmp_path)) == (
        "Can't find any admin url to use\n"
    )


def test_connection_refused(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    err = failed(run_cli("--admin-url", url, "bookies", "list-bookies", cwd=tmp_path))
    message, blank, last, end = err.split("\n")
    assert message and blank == "" and last == "Error connecting to Pulsar" and end == ""


# -- client.conf and precedence ------------------------------------------------------------------


def test_client_conf_from_env_and_default_location(server: ServerProcess, tmp_path: Path) -> None:
    conf = tmp_path / "client.conf"
    conf.write_text(f"webServiceUrl={server.url}/\n")
    env = clean_env(PULSAR_CLIENT_CONF=str(conf))
    assert ok(run_cli("bookies", "list-bookies", env=env, cwd=tmp_path)).startswith("{")
    workdir = tmp_path / "home"
    (workdir / "conf").mkdir(parents=True)
    (workdir / "conf" / "client.conf").write_text(f"serviceUrl={server.url}\n")
    assert ok(run_cli("bookies", "list-bookies", cwd=workdir)).startswith("{")


def test_flag_wins_over_client_conf(server: ServerProcess, tmp_path: Path) -> None:
    conf = tmp_path / "client.conf"
    conf.write_text(f"webServiceUrl=http://127.0.0.1:{free_port()}/\n")
    env = clean_env(PULSAR_CLIENT_CONF=str(conf))
    assert failed(run_cli("bookies", "list-bookies", env=env, cwd=tmp_path)).endswith(
        "Error connecting to Pulsar\n"
    )
    out = ok(run_cli("--admin-url", server.url, "bookies", "list-bookies", env=env, cwd=tmp_path))
    assert out.startswith("{")


def test_missing_client_conf_is_an_error(tmp_path: Path) -> None:
    env = clean_env(PULSAR_CLIENT_CONF=str(tmp_path / "absent.conf"))
    assert "absent.conf" in failed(run_cli("bookies", "list-bookies", env=env, cwd=tmp_path))


# -- authentication headers ---------------------------------------------------------------------


def test_token_auth_from_flags_sends_bearer(recorder: Recorder, tmp_path: Path) -> None:
    ok(run_cli("--admin-url", recorder.url, "--auth-plugin", TOKEN_PLUGIN,
               "--auth-params", "token:eyJhbGciOi.flag.sig", "bookies", "list-bookies",
               cwd=tmp_path))  # fmt: skip
    assert recorder.requests[-1]["path"] == "/admin/v2/bookies/all"
    assert recorder.requests[-1]["Authorization"] == "Bearer eyJhbGciOi.flag.sig"


def test_token_file_from_client_conf(recorder: Recorder, tmp_path: Path) -> None:
    token = tmp_path / "admin.jwt"
    token.write_text("eyJhbGciOi.file.sig\n")
    conf = tmp_path / "client.conf"
    conf.write_text(f"webServiceUrl={recorder.url}/\nauthPlugin={TOKEN_PLUGIN}\n"
                    f"authParams=file://{token}\n")  # fmt: skip
    env = clean_env(PULSAR_CLIENT_CONF=str(conf))
    ok(run_cli("bookies", "list-bookies", env=env, cwd=tmp_path))
    assert recorder.requests[-1]["Authorization"] == "Bearer eyJhbGciOi.file.sig"
    ok(run_cli("--auth-params", "token:override", "bookies", "list-bookies", env=env,
               cwd=tmp_path))  # fmt: skip
    assert recorder.requests[-1]["Authorization"] == "Bearer override"


def test_no_plugin_sends_no_authorization(recorder: Recorder, tmp_path: Path) -> None:
    ok(run_cli("--admin-url", recorder.url, "bookies", "list-bookies", cwd=tmp_path))
    assert "Authorization" not in recorder.requests[-1]


# -- shell completion ---------------------------------------------------------------------------


def completion_env(home: Path) -> dict[str, str]:
    return clean_env(HOME=str(home), _TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION="1")


@pytest.mark.parametrize(
    ("shell", "marker"),
    [("bash", "complete -o default -F"), ("zsh", "compdef"), ("fish", "complete --command")],
)
def test_show_completion_scripts(tmp_path: Path, shell: str, marker: str) -> None:
    out = ok(run_cli("--show-completion", shell, env=completion_env(tmp_path), cwd=tmp_path))
    assert marker in out
    assert "_PULSAR_ADMIN_COMPLETE" in out


def test_install_completion_for_bash(tmp_path: Path) -> None:
    out = ok(run_cli("--install-completion", "bash", env=completion_env(tmp_path), cwd=tmp_path))
    assert "bash completion installed in" in out
    assert "pulsar-admin" in (tmp_path / ".bashrc").read_text()


def test_completion_completes_groups_and_options(tmp_path: Path) -> None:
    env = clean_env(_PULSAR_ADMIN_COMPLETE="complete_bash", COMP_WORDS="pulsar-admin boo",
                    COMP_CWORD="1")  # fmt: skip
    assert ok(run_cli(env=env, cwd=tmp_path)).split() == ["bookies"]
    env.update(COMP_WORDS="pulsar-admin bookies set-bookie-rack -", COMP_CWORD="3")
    words = ok(run_cli(env=env, cwd=tmp_path)).split()
    assert {"-b", "--bookie", "-r", "--rack", "-hn", "--hostname", "-g"} <= set(words)
