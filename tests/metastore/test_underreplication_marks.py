"""Auto-recovery keys and values in BookKeeper's text formats (reference 1.3)."""

from __future__ import annotations

import pytest

from metastore import paths
from metastore.errors import MetadataFormatError
from metastore.underreplication_marks import (
    UnderreplicatedLedger,
    decode_lock_data,
    decode_rereplication_layout,
    decode_underreplicated_ledger,
    encode_lock_data,
    encode_rereplication_layout,
    encode_underreplicated_ledger,
)


def test_paths() -> None:
    assert paths.underreplicated_ledger(1) == (
        "/ledgers/underreplication/ledgers/0000/0000/0000/0001/urL0000000001"
    )
    assert paths.underreplicated_ledger((1 << 48) | (2 << 32) | 0xABCD) == (
        "/ledgers/underreplication/ledgers/0001/0002/0000/abcd/urL281483566689229"
    )
    assert paths.underreplication_lock(7) == "/ledgers/underreplication/locks/urL0000000007"


def test_under_replication_mark_text() -> None:
    mark = UnderreplicatedLedger(("10.0.0.1:3181", "10.0.0.2:3181"), ctime=1700000000000)
    raw = b'replica: "10.0.0.1:3181"\nreplica: "10.0.0.2:3181"\nctime: 1700000000000\n'
    assert encode_underreplicated_ledger(mark) == raw
    assert decode_underreplicated_ledger(raw) == mark
    assert decode_underreplicated_ledger(b'replica: "a:1"\n') == UnderreplicatedLedger(("a:1",))


def test_lock_and_layout_text() -> None:
    assert encode_lock_data("worker-1") == b'bookieId: "worker-1"\n'
    assert decode_lock_data(b'bookieId: "worker-1"\n') == "worker-1"
    assert decode_lock_data(b"") is None
    assert encode_rereplication_layout() == b'type: "BASIC"\nversion: 1\n'
    assert decode_rereplication_layout(b'type: "BASIC"\nversion: 1\n') == ("BASIC", 1)


@pytest.mark.parametrize("raw", [b"replica: 5 5", b"nope: 1", b"\xff"])
def test_garbage(raw: bytes) -> None:
    with pytest.raises(MetadataFormatError, match="under-replication mark"):
        decode_underreplicated_ledger(raw)
    with pytest.raises(MetadataFormatError, match="under-replication layout"):
        decode_rereplication_layout(b'type: "BASIC"\n')  # version is required
