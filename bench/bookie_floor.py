"""The bookie floor: the least any durable bookie does per add, as a bound for the bookie bench.

`floor_bookie(journal)` serves one connection from a thread of this process, its loop compiled
and run without the GIL (bench/bookiefloor.pyx: per turn, every whole V2 add frame received is
checked and journaled, one pwrite and one fdatasync, then the EOK responses in one send). It
keeps no write cache, entry log or index and hands nothing between threads, so its rate under
the lean generator (bench/lean_load.py) is what the machine's network path, client and disk
allow a bookie at most; the bookie bench reports the bookie against it.
`floor_bookie(journal, handoff=True)` is the same with the write and sync of each turn on a
second thread, handed over and reported back as the bookie's journal writer does: the cost of
that structure alone.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from bench import bookiefloor
from bench.lean_load import build_frames


@dataclass
class FloorRun:
    """What one served connection did (filled in when it ends)."""

    address: str
    adds: int = 0
    groups: int = 0
    sync_seconds: float = 0.0
    ending: str = ""

    @property
    def per_group(self) -> float:
        return self.adds / self.groups if self.groups else 0.0

    @property
    def sync_ms(self) -> float:
        return self.sync_seconds / self.groups * 1e3 if self.groups else 0.0


@contextmanager
def floor_bookie(journal: Path, handoff: bool = False) -> Iterator[FloorRun]:
    """Serve one connection at `FloorRun.address` until its client closes it, journaling over
    `journal` (an existing file written with zeros; overwritten); with `handoff`, each turn's
    write and sync on a second thread, as the bookie's journal writer (bench/bookiefloor.pyx).
    On leaving, the run's figures are filled in; an ending other than the client closing
    raises."""
    size = journal.stat().st_size
    if size < bookiefloor.MIN_JOURNAL:
        raise ValueError(f"a journal of {size} bytes is smaller than one turn can write "
                         f"({bookiefloor.MIN_JOURNAL})")
    listener = socket.create_server(("127.0.0.1", 0))
    fd = os.open(journal, os.O_RDWR)
    host, port = listener.getsockname()[:2]
    run = FloorRun(f"{host}:{port}")
    failure: list[BaseException] = []

    def serve() -> None:
        try:
            run.adds, run.groups, run.sync_seconds, run.ending = bookiefloor.serve(
                listener.fileno(), fd, size, handoff)
        except BaseException as exc:  # reported on the caller's thread
            failure.append(exc)

    thread = threading.Thread(target=serve, name="bookie-floor", daemon=True)
    thread.start()
    try:
        yield run
    finally:
        if thread.is_alive():  # never connected to: connect and close, so the accept returns
            with socket.create_connection((host, port)):
                pass
        thread.join()
        listener.close()
        os.close(fd)
    if failure:
        raise failure[0]
    if run.ending != "closed":
        raise RuntimeError(f"the bookie floor stopped: {run.ending}")


def floor_frames(slots: int, per_slot: int, base: int, payload: bytes, master_key: bytes,
                 distinct: int = 256) -> list[list[bytes]]:
    """`build_frames`' frames for the floor, each slot cycling through `distinct` of them (the
    floor does not look at entry ids, and a run at its rate would otherwise hold gigabytes of
    frames)."""
    built = build_frames(slots, min(per_slot, distinct), base, payload, master_key)
    return [[mine[i % len(mine)] for i in range(per_slot)] for mine in built]
