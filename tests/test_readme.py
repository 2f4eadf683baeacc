"""The README is executable: every `$ ` line of its code blocks runs, in order, against a fresh
`make run`-style server (a real `python -m api` process with its embedded etcd, here on free
ports), and prints what the README shows under it.

How a block is read: a line starting with `$ ` is a command (a trailing `\\` continues it on the
next line); the lines after it, up to the next command or the end of the block, are its
expected output (stdout and stderr, as a terminal shows them). In expected output `<...>`
matches any text within a line and a line `...` matches any number of lines; both are used
only where the output is genuinely variable.

How a command runs: `pulsar-admin ...` runs the CLI in this process (`cli.main.main`, the same
code as the console script, minus the interpreter start) with `PULSAR_CLIENT_CONF` pointing at
the server; anything else (`curl`, `etcdctl`, `printf`, `pulsar-client`) runs in bash with
`ETCDCTL_ENDPOINTS` set to the embedded etcd and the project's console scripts on `PATH`.
`localhost:8080` in commands is the server's port, and the server's port in outputs reads as
`8080` again.

The server supervises 4 bookies (`--bookies 4`, as `make run`) on 4 consecutive free
four-digit ports (`--bookie-port`), with its data directory `data/` in the commands' working
directory: in commands `:3181`..`:3184` and `bookie-3181`..`bookie-3184` mean the real ports,
and the real ports in outputs read as 3181..3184 again. Set `README_RECORD=1` to print what
each command printed.
"""

from __future__ import annotations

import contextlib
import io
import os
import random
import re
import shlex
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from cli.main import main as pulsar_admin
from metastore.embedded import free_port
from tests.support import REPO, wait_until

README = REPO / "README.md"
FENCE = re.compile(r"^```")


@dataclass(frozen=True)
class Step:
    command: str
    expected: list[str]
    line: int


def steps(text: str) -> list[Step]:
    found: list[Step] = []
    in_block = False
    command: list[str] | None = None
    expected: list[str] = []
    start = 0

    def close() -> None:
        nonlocal command, expected
        if command is not None:
            while expected and not expected[-1].strip():
                expected.pop()
            found.append(Step(" ".join(command), expected, start))
        command, expected = None, []

    continuing = False
    for number, line in enumerate(text.splitlines(), start=1):
        if FENCE.match(line):
            if in_block:
                close()
            in_block = not in_block
            continue
        if not in_block:
            continue
        if continuing and command is not None:
            command.append(line.strip().removesuffix("\\").strip())
            continuing = line.rstrip().endswith("\\")
        elif line.startswith("$ "):
            close()
            start = number
            command = [line[2:].strip().removesuffix("\\").strip()]
            continuing = line.rstrip().endswith("\\")
        elif command is not None:
            expected.append(line.rstrip())
    return found


def matches(expected: list[str], actual: list[str]) -> bool:
    """`expected` with its `<...>` and `...` placeholders against `actual`."""
    if not expected:
        return not actual
    head, rest = expected[0], expected[1:]
    if head == "...":
        return any(matches(rest, actual[i:]) for i in range(len(actual) + 1))
    if not actual:
        return False
    pattern = ".*".join(re.escape(part) for part in head.split("<...>"))
    return re.fullmatch(pattern, actual[0]) is not None and matches(rest, actual[1:])


BOOKIES = 4
README_BOOKIE_PORT = 3181


def consecutive_free_ports(count: int) -> int:
    """The first of `count` consecutive ports free now, four digits like 3181 (so tables
    align as the README shows them) and below the ephemeral range (so no outgoing connection
    takes one meanwhile)."""
    rng = random.Random()
    for _ in range(200):
        first = rng.randrange(4000, 9990)
        sockets = []
        try:
            for port in range(first, first + count):
                sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                sockets.append(sock)
                sock.bind(("127.0.0.1", port))
        except OSError:
            continue
        finally:
            for sock in sockets:
                sock.close()
        return first
    raise RuntimeError(f"no {count} consecutive free ports")


class MakeRun:
    """`python -m api --bookies 4` with an embedded etcd on free ports, its bookies on free
    ports and its data directory `cwd/data`."""

    def __init__(self, workdir: Path, cwd: Path) -> None:
        self.port, self.etcd_port = free_port(), free_port()
        self.bookie_port = consecutive_free_ports(BOOKIES)
        self.log = workdir / "server.log"
        environ = {k: v for k, v in os.environ.items() if not k.startswith("PULSAR_")}
        command = [sys.executable, "-m", "api", "--host", "127.0.0.1", "--port", str(self.port),
                   "--data-dir", str(cwd / "data"), "--etcd-client-port", str(self.etcd_port),
                   "--etcd-peer-port", str(free_port()), "--bookies", str(BOOKIES),
                   "--bookie-port", str(self.bookie_port)]  # fmt: skip
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(command, cwd=REPO, env=environ, stdout=log, stderr=log)
        wait_until(lambda: "ready:" in self.log.read_text() or self.process.poll() is not None, 60)
        assert self.process.poll() is None, self.log.read_text()
        running = f"http://127.0.0.1:{self.port}/api/v1/bookie/list_bookies?type=rw"
        wait_until(lambda: len(httpx.get(running).json()) == BOOKIES, 60)

    def ports(self) -> list[tuple[int, int]]:
        """(port in the README, real port) of each bookie."""
        return [(README_BOOKIE_PORT + i, self.bookie_port + i) for i in range(BOOKIES)]

    def to_real(self, command: str) -> str:
        for shown, real in self.ports():
            command = command.replace(f":{shown}", f":{real}")
            command = command.replace(f"bookie-{shown}", f"bookie-{real}")
        return command

    def to_shown(self, text: str) -> str:
        for shown, real in self.ports():
            text = re.sub(rf"(?<=[:-]){real}(?!\d)", str(shown), text)
        return text

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=20)


@pytest.fixture
def make_run(tmp_path: Path) -> Iterator[MakeRun]:
    (tmp_path / "cwd").mkdir()
    server = MakeRun(tmp_path, tmp_path / "cwd")
    yield server
    server.stop()


def run_step(step: Step, server: MakeRun, cwd: Path) -> list[str]:
    command = server.to_real(step.command.replace("localhost:8080", f"localhost:{server.port}"))
    if command.startswith("pulsar-admin "):
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            pulsar_admin(shlex.split(command, comments=True)[1:])
        text = out.getvalue()
    else:
        env = {**os.environ, "ETCDCTL_ENDPOINTS": f"http://127.0.0.1:{server.etcd_port}",
               "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"}
        done = subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True,
                              text=True, timeout=60)  # fmt: skip
        text = done.stdout + done.stderr
    text = server.to_shown(text.replace(f":{server.port}", ":8080"))
    return text.rstrip("\n").splitlines() if text.strip() else []


def test_readme_runs_as_written(
    make_run: MakeRun, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    conf = tmp_path / "client.conf"
    conf.write_text(f"webServiceUrl=http://localhost:{make_run.port}/\n")
    for name in [name for name in os.environ if name.startswith("PULSAR_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("PULSAR_CLIENT_CONF", str(conf))
    workdir = tmp_path / "cwd"
    monkeypatch.chdir(workdir)
    found = steps(README.read_text())
    assert len(found) > 30, "the README lost its examples"
    record = os.environ.get("README_RECORD") == "1"
    failures = []
    for step in found:
        actual = run_step(step, make_run, workdir)
        if record:
            print(f"$ {step.command}", *actual, sep="\n", file=sys.__stdout__)
        if not matches(step.expected, actual):
            failures.append(
                f"README.md:{step.line}: $ {step.command}\n"
                + "expected:\n" + "\n".join(step.expected)
                + "\nactual:\n" + "\n".join(actual)
            )  # fmt: skip
    assert not failures, "\n\n".join(failures)


def test_placeholders() -> None:
    assert matches(["a <...> c", "...", "z"], ["a b c", "x", "y", "z"])
    assert matches(["..."], [])
    assert not matches(["a"], ["a", "b"])
    assert not matches(["a <...> c"], ["a b d"])
    parsed = steps("```\n$ echo a \\\n   b   # c\na b\n\n$ true\n```\n$ not code\n")
    assert parsed == [Step("echo a b   # c", ["a b"], 2), Step("true", [], 6)]
