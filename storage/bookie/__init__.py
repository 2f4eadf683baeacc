"""A BookKeeper-compatible bookie: V2 and V3 protocols, journal, entry logs, index, cookie,
registration. One module a job; each storage layer names its commit point.

Bytes and frames (pure, no I/O): `format` (the packaged entry, the on-disk records),
`protocol` (V2 frames), `protocol_v3` (V3 protobuf frames), `availability` (BookKeeper's
availability-of-entries bytes), `addpath` (compiled: a read's worth of plain adds cut, checked,
cached, journalled and answered in one call; the write cache in C memory; the journal's
writer thread, without the GIL; the entry-log record framing), `fileio` (positioned writes of
many buffers), `errors`.

Storage: `journal` (group commit, the group's fdatasync), `entrylog` (batch fdatasync),
`index` (one LMDB transaction per checkpoint), `ledger_storage` (BookKeeper's LedgerStorage:
ledger states, write cache, checkpoint, entry log and index, taking plain values), `gc` and
`compaction` (garbage collection and entry-log compaction), `bookie` (admission, fencing and the
journal over the ledger storage).

Process: `server` (TCP, one protocol per connection, one request handler), `connections` (the
port's connection bounds), `cookie` (BookKeeper's cookie, checked at start), `registration`
(the registration on a lease or session, the disk check), `metrics` (BookKeeper's stat names,
Prometheus text), `service` (one process, started and stopped in order), `__main__`.

The broker-side client is `storage.bookie_client`.
"""

from storage.bookie.format import package_entry, verify_entry
from storage.bookie.protocol import Flag, OpCode, ResultCode

__all__ = ["Flag", "OpCode", "ResultCode", "package_entry", "verify_entry"]
