"""CLI fixtures: the installed `pulsar-admin` run as a subprocess against the real server."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support import RawEtcd, ServerProcess

PULSAR_ADMIN = str(Path(sys.executable).parent / "pulsar-admin")


@dataclass(frozen=True)
class Run:
    code: int
    out: str
    err: str


def clean_env(**extra: str) -> dict[str, str]:
    """The environment without any PULSAR_* variable, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PULSAR_")}
    env.update(extra)
    return env


def run_cli(
    *args: str, env: dict[str, str] | None = None, cwd: Path | None = None, timeout: float = 60
) -> Run:
    done = subprocess.run(
        [PULSAR_ADMIN, *args],
        capture_output=True,
        text=True,
        env=clean_env() if env is None else env,
        cwd=cwd,
        timeout=timeout,
    )
    return Run(done.returncode, done.stdout, done.stderr)


CliRunner = Callable[..., Run]


@pytest.fixture
def cli(server: ServerProcess, clean_store: RawEtcd, tmp_path: Path) -> CliRunner:
    """`cli("bookies", "list-bookies")` runs pulsar-admin --admin-url <server> on an empty
    store, from an empty directory (the flag wins over any client.conf)."""

    def run(*args: str, env: dict[str, str] | None = None) -> Run:
        return run_cli("--admin-url", server.url, *args, env=env, cwd=tmp_path)

    return run


def ok(result: Run) -> str:
    """The stdout of a successful run (fails the test with stderr otherwise)."""
    assert result.code == 0, f"exit {result.code}\nstdout:\n{result.out}\nstderr:\n{result.err}"
    assert result.err == ""
    return result.out


def failed(result: Run) -> str:
    """The stderr of a failed run, after checking exit status 1 and nothing on stdout."""
    assert result.code == 1, f"exit {result.code}\nstdout:\n{result.out}\nstderr:\n{result.err}"
    assert result.out == ""
    return result.err


def admin_error(reason: str) -> str:
    return f"{reason}\n\nReason: {reason}\n"
