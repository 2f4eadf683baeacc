"""`dying_with_parent`: the command runs under the pid `Popen` reports, dies when the process
that started it is killed -9, never runs if that process is already gone, and starts
reliably while another thread is inside gRPC (the etcd client)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from metastore.embedded import EmbeddedEtcd, dying_with_parent
from metastore.store import MetadataStore
from tests.support import REPO, wait_until

SLEEPER = [sys.executable, "-c", "import time; time.sleep(120)"]


def _running(pid: int) -> bool:
    """True while `pid` exists and is not a zombie (an orphan's reaper may be slow to reap)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _runs(pid: int, argv: list[str]) -> bool:
    """True once `pid` runs `argv` itself (the launcher has exec'd it)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except FileNotFoundError:
        return False
    return cmdline.split(b"\0")[:-1] == [os.fsencode(arg) for arg in argv]


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def test_the_command_runs_under_the_reported_pid() -> None:
    code = "import os; print(os.getpid(), os.getppid())"
    process = subprocess.Popen(dying_with_parent([sys.executable, "-c", code]),
                               stdout=subprocess.PIPE)  # fmt: skip
    out, _ = process.communicate(timeout=30)
    assert process.returncode == 0
    assert out.split() == [str(process.pid).encode(), str(os.getpid()).encode()]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["term", "kill"])
def test_the_child_dies_when_its_parent_is_killed(tmp_path: Path, sig: signal.Signals) -> None:
    """A real parent process with threads starts the child, then is killed -9."""
    pid_file = tmp_path / "child.pid"
    parent_code = f"""
import subprocess, sys, threading, time
from metastore.embedded import EmbeddedEtcd, dying_with_parent
from metastore.store import MetadataStore
threading.Thread(target=time.sleep, args=(120,), daemon=True).start()
child = subprocess.Popen(dying_with_parent({SLEEPER!r}, {int(sig)}))
open({str(pid_file)!r}, "w").write(str(child.pid))
time.sleep(120)
"""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    parent = subprocess.Popen([sys.executable, "-c", parent_code], cwd=REPO, env=env)
    child_pid = 0
    try:
        child_pid = int(wait_until(lambda: pid_file.read_text(), timeout=30))
        wait_until(lambda: _runs(child_pid, SLEEPER), timeout=30)
        parent.kill()
        parent.wait(timeout=10)
        wait_until(lambda: not _running(child_pid), timeout=10)
    finally:
        parent.kill()
        parent.wait(timeout=10)
        if child_pid:
            _kill(child_pid)


def test_the_command_never_runs_once_its_parent_is_gone(tmp_path: Path) -> None:
    """The launcher's check: a parent pid that is not its parent's any more (as after the
    parent died between fork and prctl) and the command is not run."""
    marker = tmp_path / "ran"
    argv = dying_with_parent(["touch", str(marker)], signal.SIGTERM)
    at = argv.index(str(os.getpid()))
    argv[at] = "1"  # not this process: the launcher's parent looks gone
    process = subprocess.run(argv, timeout=30, check=False)
    assert process.returncode == -signal.SIGTERM
    assert not marker.exists()


def test_an_empty_command_is_refused() -> None:
    with pytest.raises(ValueError, match="empty command"):
        dying_with_parent([])


@pytest.mark.slow
def test_children_start_while_another_thread_is_in_grpc(etcd: EmbeddedEtcd) -> None:
    """A `preexec_fn` makes `subprocess` fork (not vfork): gRPC's fork handlers run, then
    Python code in the child, and with a thread busy in the etcd client about one child in
    thirteen died of SIGSEGV or SIGABRT before its exec (30 of 400 measured). Through the
    launcher every one runs its command."""
    stop = False

    async def traffic() -> None:
        store = MetadataStore([etcd.endpoint], timeout=5)
        try:
            count = 0
            while not stop:
                await store.put(f"/launcher-test/{count % 20}", b"x" * 100)
                await store.get(f"/launcher-test/{count % 20}")
                count += 1
        finally:
            await store.close()

    thread = threading.Thread(target=asyncio.run, args=(traffic(),), daemon=True)
    thread.start()
    codes: list[int] = []
    try:
        for _ in range(150):
            codes.append(subprocess.run(dying_with_parent(["true"]), timeout=30,
                                        check=False).returncode)  # fmt: skip
    finally:
        stop = True
        thread.join(timeout=30)
    assert codes == [0] * 150, sorted(set(codes))
