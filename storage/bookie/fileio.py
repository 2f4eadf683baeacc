"""Positioned writes of many buffers without joining them first (pure file I/O).

A journal group or a checkpoint chunk is a list of record headers and bodies; joining them
into one buffer copies every byte once more and, for groups of 64 KiB entries, allocates a
fresh multi-MiB buffer (page faults and zeroing) per write. `pwritev` hands the list to the
kernel as it is, at most IOV_MAX buffers per call.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

IOV_MAX = max(16, os.sysconf("SC_IOV_MAX")) if hasattr(os, "sysconf") else 1024


def pwrite_all(fd: int, parts: Sequence[bytes], offset: int, what: str) -> int:
    """Write `parts` back to back at `offset`; the bytes written. OSError on a short write
    (`what` names the file kind in the message)."""
    total = 0
    for first in range(0, len(parts), IOV_MAX):
        chunk = parts[first:first + IOV_MAX]
        size = sum(len(part) for part in chunk)
        written = os.pwritev(fd, chunk, offset + total)
        if written != size:
            raise OSError(f"short {what} write: {written} of {size} bytes")
        total += size
    return total
