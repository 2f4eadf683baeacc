"""A factory of bookie processes on free ports, against the session's real etcd."""

from __future__ import annotations

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
