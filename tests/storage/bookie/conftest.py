"""A factory of bookie processes on free ports, against the session's real etcd; a small disk."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from metastore.embedded import EmbeddedEtcd
from tests.storage.bookie.support import BookieProcess
from tests.support import RawEtcd

BookieFactory = Callable[..., BookieProcess]


@pytest.fixture
def start_bookie(etcd: EmbeddedEtcd, raw_etcd: RawEtcd, tmp_path: Path) -> Iterator[BookieFactory]:
    started: list[BookieProcess] = []

    def start(name: str = "bookie", **kwargs: Any) -> BookieProcess:
        readonly = kwargs.pop("readonly", False)
        # 1 MiB journal preallocation instead of 16: many restarts, little disk.
        kwargs["conf"] = {"journalPreAllocSizeMB": "1", **kwargs.get("conf", {})}
        process = BookieProcess(raw_etcd, etcd.url, tmp_path / name, **kwargs)
        started.append(process)
        return process.start(readonly=readonly)

    yield start
    for process in started:
        process.kill()


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 32 MiB tmpfs, so that filling the disk is quick and exact (needs root to mount)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    result = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=32m", "tmpfs", str(mount)], capture_output=True
    )
    if result.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {result.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)
